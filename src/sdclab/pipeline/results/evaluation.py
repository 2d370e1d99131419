"""The evaluation of one release: its accuracy and the risk the attacks measured on it, as
``metrics.json`` and each entry of ``results.json`` hold them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdclab.core.diagnostics import Diagnostics, diagnostics_json, read_diagnostics
from sdclab.core.figures import NotMeasured, Value, as_json, fields_json
from sdclab.pipeline.results.accuracy import (
    COMPARED_LEVELS,
    COMPARED_METRICS,
    COMPARED_TABLES,
    NO_INDICATORS,
    NO_TOTALS,
    LevelAccuracy,
    TableAccuracy,
    indicators_from,
    level_accuracies,
    table_accuracies,
    totals_from,
)
from sdclab.pipeline.results.agreement import NAIVE_IS_AWARE, Agreement, rank_curve_from
from sdclab.pipeline.results.figure import SCHEMA_VERSION, Figure, from_json, show_share
from sdclab.pipeline.results.reconstruction import ReconstructionFigures
from sdclab.pipeline.results.reidentification import Reidentification

if TYPE_CHECKING:
    from sdclab.core.accounting import SpecCard

NO_RECONSTRUCTION = "no reconstruction of this release was given"
NOT_GIVEN_BLOCK_ONLY = (
    "no reidentification of a reconstruction from the block tables alone was given"
)


def no_risk_analysis(mechanism: str) -> NotMeasured:
    """The risk figures of a mechanism without a risk analysis of its own."""
    return NotMeasured(f"the {mechanism} mechanism has no risk analysis of its own")


NO_MICRODATA = "the release publishes no person records"


@dataclass(frozen=True)
class Evaluation:
    """Accuracy of a release and the risk the attacks measured on it: evaluation only (every
    figure but the guarantee and the attack's own solver figures used the truth)."""

    mechanism: str
    card: SpecCard = field(repr=False)
    """The release's specification card: its guarantee and common-axis figure."""
    accuracy: Mapping[str, Mapping[str, TableAccuracy]] = field(repr=False)
    """By table, then level."""
    additivity: Mapping[str, Mapping[str, Value]] = field(repr=False)
    """By table, then parent level: share of parent cells whose children do not add up."""
    by_level: Mapping[str, LevelAccuracy] = field(repr=False)
    microdata_agreement: Agreement | NotMeasured = field(repr=False)
    reconstruction: ReconstructionFigures | NotMeasured = field(repr=False)
    """The attack's own figures (not truth-based), when a reconstruction was given."""
    reconstruction_agreement: Agreement | NotMeasured = field(repr=False)
    """Of the noise-aware reconstruction (the attack of record)."""
    block_sex_agebin_agreement: Value = field(repr=False)
    """Share of true persons matched on block, sex and agebin alone."""
    reidentification: Mapping[str, Reidentification | NotMeasured] = field(repr=False)
    """By attacker."""
    diagnostics: tuple[Diagnostics, ...] = field(default=(), repr=False)
    """The mechanism's own figures about the release that need the truth: kinds of
    :mod:`sdclab.core.diagnostics`, each under its key in the JSON form."""
    risk: Mapping[str, Any] | NotMeasured = field(
        default=NotMeasured("the mechanism has no risk analysis of its own"), repr=False
    )
    """The mechanism's own risk analysis (the cell key method's), when it has one."""
    naive_agreement: Agreement | NotMeasured = field(
        default=NotMeasured(NAIVE_IS_AWARE), repr=False
    )
    """Of the naive reconstruction, which takes every published count as exact."""
    totals: Mapping[str, Mapping[str, Mapping[str, Value]]] = field(
        default_factory=dict, repr=False
    )
    """The detailed summary metrics of geounit totals (P1): by level, then class of the true
    total ("all", "0", "1-9", …), then metric
    (:func:`sdclab.pipeline.evaluation.geounit_totals`)."""
    rank_curve: Mapping[str, Value] | NotMeasured = field(
        default=NotMeasured(NO_RECONSTRUCTION), repr=False
    )
    """Precision among the top k% of reconstructed records ranked by confidence (top_1% ...
    top_100%)."""
    indicators: Mapping[str, Mapping[str, Value]] = field(default_factory=dict, repr=False)
    """Errors of the key indicators per tract from the published P12: by indicator
    (``sex_ratio``, ``share_65_plus``, ``share_under_18``), then figure (tracts,
    undefined_tracts, mae, bias; :func:`sdclab.pipeline.evaluation.tract_indicators`)."""
    block_only_reidentification: Mapping[str, Reidentification | NotMeasured] | NotMeasured = field(
        default=NotMeasured(NOT_GIVEN_BLOCK_ONLY), repr=False
    )
    """By attacker: the reidentification of the release's reconstruction from its block tables
    alone (the attack paper's rHDF_b, beside its rHDF_b,t), or why there is none."""
    target_reidentification: Mapping[str, Mapping[str, Reidentification | NotMeasured]] = field(
        default_factory=dict, repr=False
    )
    """By further attack target of the census (the European 1 km grid), then attacker: the
    reidentification of the release's reconstruction aimed at it (none asked: empty)."""

    def table(self, name: str, level: str) -> TableAccuracy:
        """The accuracy of table ``name`` at ``level``."""
        if name not in self.accuracy or level not in self.accuracy[name]:
            raise KeyError(f"no accuracy of table {name!r} at level {level!r}")
        return self.accuracy[name][level]

    def compared(self, level: str, table: str = "P12") -> TableAccuracy | NotMeasured:
        """Accuracy of ``table``, one of the :data:`COMPARED_TABLES`, at ``level``, or why a
        release that does not publish it there has none."""
        if table not in COMPARED_TABLES:
            raise ValueError(f"table {table!r}: compared are {', '.join(COMPARED_TABLES)}")
        if level not in self.accuracy.get(table, {}):
            return NotMeasured(
                f"the release publishes no {table} at {level} level (accuracy is compared on "
                f"{' and '.join(COMPARED_TABLES)}, each apart)"
            )
        return self.accuracy[table][level]

    def __repr__(self) -> str:
        block = self.by_level.get("block")
        mae = f"{block.mean_mae:.3f}" if block is not None else "n/a"
        agree = self.reconstruction_agreement
        shown = show_share(agree.all.agree_agebin) if isinstance(agree, Agreement) else "n/a"
        return f"<Evaluation of a {self.mechanism} release: block MAE {mae}, agreement {shown}>"

    def figures(self, **dims: Any) -> Iterator[Figure]:
        """Every figure in long form (``dims``: setting, replicate); the mechanism's own
        diagnostics and risk analysis, whose shapes are their own, stay apart."""
        yield from self._accuracy_figures(**dims)
        yield from self._compared_figures(**dims)
        yield from self._indicator_figures(**dims)
        yield from self._total_figures(**dims)
        yield from self._agreement_figures(**dims)
        yield from self._reidentification_figures(**dims)

    def _accuracy_figures(self, **dims: Any) -> Iterator[Figure]:
        """The accuracy of every table at every level, its additivity, and each level's mean."""
        for name, levels in self.accuracy.items():
            for level, acc in levels.items():
                yield from _table_accuracy_figures(name, level, acc, **dims)
            for parent, share in self.additivity.get(name, {}).items():
                yield Figure(
                    "accuracy.additivity_violations", share, level=parent, table=name, **dims
                )
        for level, summary in self.by_level.items():
            yield Figure("accuracy.mean_mae", summary.mean_mae, level=level, **dims)

    def _compared_figures(self, **dims: Any) -> Iterator[Figure]:
        """The compared tables' metrics at every compared level, or why the release has none."""
        for table in COMPARED_TABLES:
            for level in dict.fromkeys([*self.accuracy.get(table, {}), *COMPARED_LEVELS]):
                compared = self.compared(level, table)
                for metric in COMPARED_METRICS:
                    value = (
                        compared if isinstance(compared, NotMeasured) else getattr(compared, metric)
                    )
                    yield Figure(f"compared.{metric}", value, level=level, table=table, **dims)

    def _indicator_figures(self, **dims: Any) -> Iterator[Figure]:
        """The errors of the key indicators per tract, or why there are none."""
        if not self.indicators:
            yield Figure("indicators", NotMeasured(NO_INDICATORS), level="tract", **dims)
        for name, metrics in self.indicators.items():
            for metric, value in metrics.items():
                yield Figure(
                    f"indicators.{name}.{metric}", value, level="tract", table="P12", **dims
                )

    def _total_figures(self, **dims: Any) -> Iterator[Figure]:
        """The metrics of geounit totals by level and class of the true total, or why none."""
        if not self.totals:
            yield Figure("totals", NotMeasured(NO_TOTALS), table="P1", **dims)
        for level, classes in self.totals.items():
            for size, metrics in classes.items():
                for metric, value in metrics.items():
                    yield Figure(
                        f"totals.{metric}",
                        value,
                        level=level,
                        size_class=None if size == "all" else size,
                        table="P1",
                        **dims,
                    )

    def _agreement_figures(self, **dims: Any) -> Iterator[Figure]:
        """The agreement of the microdata and the reconstructions with the truth, all and by
        block size, the block sex × agebin agreement and the ranked precision."""
        for what in ("microdata_agreement", "reconstruction_agreement", "naive_agreement"):
            agreement = getattr(self, what)
            for metric in ("agree_exact_age", "agree_agebin"):
                if isinstance(agreement, NotMeasured):
                    yield Figure(f"{what}.{metric}", agreement, **dims)
                    continue
                yield Figure(f"{what}.{metric}", getattr(agreement.all, metric), **dims)
                for size, rates in agreement.by_block_size.items():
                    yield Figure(
                        f"{what}.{metric}", getattr(rates, metric), size_class=size, **dims
                    )
        yield Figure("reconstruction_block_sex_agebin", self.block_sex_agebin_agreement, **dims)
        if isinstance(self.rank_curve, NotMeasured):
            yield Figure("ranked_precision", self.rank_curve, **dims)
        else:
            for top, value in self.rank_curve.items():
                yield Figure(f"ranked_precision.{top}", value, **dims)

    def _reidentification_figures(self, **dims: Any) -> Iterator[Figure]:
        """The reidentification by attacker, of the reconstruction, of the one from the block
        tables alone and of those aimed at further targets, or why there is none."""
        yield from _by_attacker_figures("reidentification", self.reidentification, dims)
        block_only = self.block_only_reidentification
        if isinstance(block_only, NotMeasured):
            yield Figure(BLOCK_ONLY_FIELD, block_only, **dims)
        else:
            yield from _by_attacker_figures(BLOCK_ONLY_FIELD, block_only, dims)
        for target, links in self.target_reidentification.items():
            yield from _by_attacker_figures(f"{TARGET_FIELD}.{target}", links, dims)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, as ``metrics.json`` and an experiment's ``results.json`` hold it."""
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "mechanism": self.mechanism,
            "specification": self.card.to_dict(),
            "accuracy_by_level": {k: v.to_dict() for k, v in self.by_level.items()},
            "geounit_totals": as_json(self.totals),
            "tract_indicators": as_json(self.indicators),
            "accuracy": {
                name: {
                    **{level: acc.to_dict() for level, acc in levels.items()},
                    "additivity": as_json(self.additivity.get(name, {})),
                }
                for name, levels in self.accuracy.items()
            },
            "microdata_agreement": as_json(self.microdata_agreement),
            "reconstruction_agreement": as_json(self.reconstruction_agreement),
            "naive_reconstruction_agreement": as_json(self.naive_agreement),
            "ranked_precision": as_json(self.rank_curve),
            "reconstruction_block_sex_agebin": as_json(self.block_sex_agebin_agreement),
            "reidentification": as_json(self.reidentification),
            BLOCK_ONLY_FIELD: as_json(self.block_only_reidentification),
        }
        if self.target_reidentification:  # written where asked for: earlier results unchanged
            out[TARGET_FIELD] = as_json(self.target_reidentification)
        out["reconstruction"] = as_json(self.reconstruction)
        if self.diagnostics:
            out["diagnostics"] = diagnostics_json(self.diagnostics)
        out["risk"] = as_json(self.risk)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evaluation:
        """An evaluation read back from :meth:`to_dict`'s form."""
        from sdclab.core.accounting import SpecCard

        accuracy, additivity = table_accuracies(data["accuracy"])
        reconstruction = data.get("reconstruction", {"not_measured": NO_RECONSTRUCTION})
        risk = data.get("risk", {"not_measured": "not recorded"})
        return cls(
            mechanism=str(data["mechanism"]),
            card=SpecCard.from_dict(data["specification"]),
            accuracy=accuracy,
            additivity=additivity,
            by_level=level_accuracies(data["accuracy_by_level"]),
            microdata_agreement=Agreement.from_dict(data["microdata_agreement"]),
            reconstruction=(
                NotMeasured(str(reconstruction["not_measured"]))
                if "not_measured" in reconstruction
                else ReconstructionFigures(reconstruction)
            ),
            reconstruction_agreement=Agreement.from_dict(data["reconstruction_agreement"]),
            block_sex_agebin_agreement=from_json(
                data["reconstruction_block_sex_agebin"], NO_RECONSTRUCTION
            ),
            reidentification={
                attacker: (
                    NotMeasured(str(reid["not_measured"]))
                    if "not_measured" in reid
                    else Reidentification.from_dict(reid)
                )
                for attacker, reid in data["reidentification"].items()
            },
            diagnostics=read_diagnostics(data.get("diagnostics", {})),
            risk=NotMeasured(str(risk["not_measured"])) if "not_measured" in risk else dict(risk),
            naive_agreement=Agreement.from_dict(
                data.get("naive_reconstruction_agreement", {"not_measured": NAIVE_IS_AWARE})
            ),
            rank_curve=rank_curve_from(
                data.get("ranked_precision", {"not_measured": "not recorded"})
            ),
            totals=totals_from(data.get("geounit_totals", {})),
            indicators=indicators_from(data.get("tract_indicators", {})),
            block_only_reidentification=_block_only(data.get(BLOCK_ONLY_FIELD)),
            target_reidentification={
                target: _by_attacker(links) for target, links in data.get(TARGET_FIELD, {}).items()
            },
        )


def _by_attacker_figures(
    where: str, links: Mapping[str, Reidentification | NotMeasured], dims: dict[str, Any]
) -> Iterator[Figure]:
    """Each attacker's reidentification figures under ``where``, or why it was not measured."""
    for attacker, reid in links.items():
        if isinstance(reid, NotMeasured):
            yield Figure(f"{where}.{attacker}", reid, **dims)
        else:
            yield from reid.figures(where, **dims)


def _table_accuracy_figures(
    name: str, level: str, acc: TableAccuracy, **dims: Any
) -> Iterator[Figure]:
    """The figures of one table's accuracy at one level: its metrics, its MAE by class of the
    cell's true count and its shares of cells beyond each relative error."""
    numbers = fields_json(
        acc, exclude=("table", "level", "share_rel_error_above", "mae_by_true_count")
    )
    for metric in numbers:
        yield Figure(f"accuracy.{metric}", getattr(acc, metric), level=level, table=name, **dims)
    for size, mae in acc.mae_by_true_count.items():
        yield Figure(  # size_class: the class of the cell's true count
            "accuracy.mae_by_true_count",
            mae,
            level=level,
            size_class=size,
            table=name,
            **dims,
        )
    for threshold, share in acc.share_rel_error_above.items():
        yield Figure(
            f"accuracy.share_rel_error_above_{threshold}",
            share,
            level=level,
            table=name,
            **dims,
        )


BLOCK_ONLY_FIELD = "block_only_reidentification"
"""The key of an evaluation's figures of the reconstruction from the block tables alone."""


TARGET_FIELD = "target_reidentification"
"""The key of an evaluation's figures of the reconstructions aimed at further attack targets."""


def _block_only(data: Any) -> Mapping[str, Reidentification | NotMeasured] | NotMeasured:
    """The block-only reidentification read back (absent: results written before it)."""
    if not isinstance(data, Mapping):
        return NotMeasured("not recorded")
    if "not_measured" in data:
        return NotMeasured(str(data["not_measured"]))
    return _by_attacker(data)


def _by_attacker(data: Mapping[str, Any]) -> dict[str, Reidentification | NotMeasured]:
    """Reidentifications by attacker read back, each or why it was not measured."""
    return {
        attacker: (
            NotMeasured(str(reid["not_measured"]))
            if "not_measured" in reid
            else Reidentification.from_dict(reid)
        )
        for attacker, reid in data.items()
    }
