"""Typed results: what the attacks and an evaluation measure, as values with attributes.

The command line, experiments and the report read the same objects; ``metrics.json`` and
``results.json`` are written from them (:meth:`to_dict`, with :data:`SCHEMA_VERSION`). A figure
that was not measured or does not apply is a :class:`NotMeasured` carrying its reason, never 0 and
never a bare null. :class:`Figure` is one figure in long form with the dimensions a comparison
needs: setting, replicate, level, block-size class, table and an interval.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from sdclab.diagnostics import Diagnostics, diagnostics_json, read_diagnostics
from sdclab.figures import NotMeasured, Value, as_json, fields_json, from_json

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import polars as pl

    from sdclab.accounting import SpecCard

T = TypeVar("T")

SCHEMA_VERSION = 7
"""Version of the layout of ``metrics.json`` and ``results.json`` (2: the specification card
holds its guarantee as values, with the common-axis figure; 3: every release names its sweep
point and replicate, and the results hold every setting's replicate means and intervals; 4: the
accuracy holds distances between distributions and the tract indicators; 5: the population
lists its evaluation-only figures, and every tidy row and replicate mean says whether it is
evaluation only; 6: the population's fixed vulnerable group, and the reidentification's
headline risk for it)."""


def number(value: Any) -> float | None:
    """A figure as a plain number for display or a chart (None when not measured)."""
    value = from_json(value)
    return None if isinstance(value, NotMeasured) else float(value)


@dataclass(frozen=True)
class Figure:
    """One figure in long form, with the dimensions along which figures are compared."""

    metric: str
    value: Value
    setting: str | None = None
    """The mechanism as configured (an experiment's label)."""
    replicate: int | None = None
    level: str | None = None
    size_class: str | None = None
    """The block-size class; for ``accuracy.mae_by_true_count`` the class of the cell's true
    count, for ``totals.*`` the class of the geounit's true total."""
    table: str | None = None
    interval: tuple[float, float] | None = None
    """A confidence or variability interval around ``value``, when one is known."""
    population: int | None = None
    """The population replicate (1: the experiment's population)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": as_json(self.value),
            "setting": self.setting,
            "replicate": self.replicate,
            "population": self.population,
            "level": self.level,
            "size_class": self.size_class,
            "table": self.table,
            "interval": list(self.interval) if self.interval is not None else None,
        }


# ---------------------------------------------------------------------------------------------
# Reidentification
# ---------------------------------------------------------------------------------------------

NO_RECORDS = "no attacker record falls in this group"
NO_LINKS = "no putative link in this group"
NO_METHOD = "the method was not scored"


def _points(ours: Value, theirs: Value) -> Value:
    """``ours − theirs`` in percentage points, or why one is missing."""
    if isinstance(ours, NotMeasured):
        return ours
    if isinstance(theirs, NotMeasured):
        return theirs
    return 100 * (ours - theirs)


def _entry(mapping: Mapping[str, T], key: str, what: str) -> T:
    """``mapping[key]``, or a KeyError that names what there is."""
    if key not in mapping:
        raise KeyError(f"no {what} {key!r}; {what}s: {', '.join(mapping)}")
    return mapping[key]


def _share(part: int, whole: int, reason: str) -> Value:
    """``part / whole``, or not measured for ``reason`` when ``whole`` is 0."""
    return part / whole if whole else NotMeasured(reason)


@dataclass(frozen=True)
class LinkRates:
    """Putative and confirmed links of one linkage method over one group of attacker records."""

    attacker_records: int
    putative: int
    confirmed: int

    @property
    def putative_rate(self) -> Value:
        return _share(self.putative, self.attacker_records, NO_RECORDS)

    @property
    def confirmed_rate(self) -> Value:
        return _share(self.confirmed, self.attacker_records, NO_RECORDS)

    @property
    def precision(self) -> Value:
        """Confirmed among putative links: how far an attacker can trust a link."""
        return _share(self.confirmed, self.putative, NO_LINKS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "attacker_records": self.attacker_records,
            "putative": self.putative,
            "confirmed": self.confirmed,
            "putative_rate": as_json(self.putative_rate),
            "confirmed_rate": as_json(self.confirmed_rate),
            "precision": as_json(self.precision),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LinkRates:
        return cls(int(data["attacker_records"]), int(data["putative"]), int(data["confirmed"]))


@dataclass(frozen=True)
class Linkage:
    """One linkage method's rates by group of attacker records (``all``, ``modal``, ``nonmodal``,
    ``unique``, ``nonmodal_unique``, by block size, ...)."""

    method: str
    groups: Mapping[str, LinkRates]

    @property
    def all(self) -> LinkRates:
        return self.groups["all"]

    @property
    def nonmodal(self) -> LinkRates:
        """Census records whose race and ethnicity are not their block's most common."""
        return self.groups["nonmodal"]

    @property
    def modal(self) -> LinkRates:
        return self.groups["modal"]

    def group(self, name: str) -> LinkRates:
        return _entry(self.groups, name, "group")

    def __repr__(self) -> str:
        return (
            f"<Linkage {self.method}: precision {show_share(self.all.precision)}, nonmodal "
            f"{show_share(self.nonmodal.precision)}>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {name: rates.to_dict() for name, rates in self.groups.items()}

    @classmethod
    def from_dict(cls, method: str, data: Mapping[str, Any]) -> Linkage:
        return cls(method, {k: LinkRates.from_dict(v) for k, v in data.items()})


FIXED_BASELINE_METHODS = ("mdg_exact", "prg_exact", "random_draw")
UPPER_BOUND_METHODS = ("confidential", "swapped")
HEADLINE_GROUPS = ("all", "nonmodal", "vulnerable")
"""The groups of attacker records whose headline risk is given, where measured: ``vulnerable``
(the population's fixed vulnerable persons, :class:`VulnerableGroup`) only when the
reidentification was given the group."""
VULNERABLE_DEFINITION = (
    "nonmodal data-defined persons unique on {block, sex, agebin} in blocks whose reconstruction "
    "of the exact release has solution variability 0 (proven)"
)


@dataclass(frozen=True)
class VulnerableGroup:
    """The population's most vulnerable persons: one fixed set on which every release is scored,
    whatever its mechanism (evaluation only: it is defined from the confidential records).

    The attack paper defines its headline group from the published 2010 tables; here it comes
    from the exact release, the tables every mechanism protects, so that no mechanism's own
    reconstruction chooses the persons it is scored on (docs/reidentification.md)."""

    persons: npt.NDArray[np.int64] = field(repr=False)
    """Their person ids, sorted."""
    solvar0_blocks: int
    """Populated blocks whose exact reconstruction is proven the only one."""
    populated_blocks: int
    """Populated blocks measured."""
    input_digest: str = field(default="", repr=False, compare=False)
    """The keyed digest of the population it was found in (a group is scored on that population
    only)."""

    @property
    def size(self) -> int:
        """The number of persons in the group."""
        return int(self.persons.size)

    def to_dict(self) -> dict[str, Any]:
        """The group's figures (never its persons' ids)."""
        return {
            "definition": VULNERABLE_DEFINITION,
            "persons": self.size,
            "solvar0_blocks": self.solvar0_blocks,
            "populated_blocks": self.populated_blocks,
        }


@dataclass(frozen=True)
class HeadlineRisk:
    """Confirmed reidentifications of the reconstruction beyond the best baseline (the one with
    the most confirmed links in the group; the upper bounds are not baselines)."""

    group: str
    reconstruction: LinkRates
    best_baseline: str
    baseline: LinkRates

    @property
    def persons(self) -> int:
        """Confirmed persons beyond the best baseline (negative: the baseline does better)."""
        return self.reconstruction.confirmed - self.baseline.confirmed

    @property
    def points(self) -> Value:
        """The difference of confirmed rates, in percentage points."""
        return _points(self.reconstruction.confirmed_rate, self.baseline.confirmed_rate)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_baseline": self.best_baseline,
            "reconstruction_confirmed_rate": as_json(self.reconstruction.confirmed_rate),
            "baseline_confirmed_rate": as_json(self.baseline.confirmed_rate),
            "points": as_json(self.points),
            "persons": self.persons,
        }


@dataclass(frozen=True)
class ConfirmationPasses:
    """How one linkage method's putative links were confirmed: in the first pass of the
    confirmation (on the exact age) or in the second (on agebin, over the links the first left).
    The attack paper prints only their sum, its confirmed reidentifications."""

    putative: int
    first_pass: int
    second_pass: int

    @property
    def first_pass_share(self) -> Value:
        """Share of the putative links confirmed on the exact age."""
        return _share(self.first_pass, self.putative, NO_LINKS)

    @property
    def second_pass_share(self) -> Value:
        """Share of the putative links confirmed on agebin only."""
        return _share(self.second_pass, self.putative, NO_LINKS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "putative": self.putative,
            "first_pass": self.first_pass,
            "second_pass": self.second_pass,
            "first_pass_share": as_json(self.first_pass_share),
            "second_pass_share": as_json(self.second_pass_share),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfirmationPasses:
        return cls(int(data["putative"]), int(data["first_pass"]), int(data["second_pass"]))


NONMODAL_PRG = ("prg", "prg_exact")
"""The proportional guessers whose nonmodal precision stands beside the reconstruction's: the
release's own (from its tables) and the one on the exact tables (the same for every release)."""


@dataclass(frozen=True)
class Reidentification:
    """Links of reconstructed records (and of the two baselines) to an attacker's file."""

    attacker: str
    """The attacker file's preset (census, commercial) or "custom"."""
    attacker_parameters: Mapping[str, Any]
    attacker_records: int
    attacker_match_share: float
    """Share of attacker records that match a census record on identity, block, sex and age."""
    reconstruction: Linkage
    mdg: Linkage | NotMeasured
    """Baseline: records drawn from the published block tables (the 2010 study's MDG)."""
    prg: Linkage | NotMeasured
    """Baseline: a draw from the published block distribution of race and ethnicity (PRG)."""
    links: pl.DataFrame | None = field(default=None, repr=False, compare=False)
    """The reconstruction's links (attacker id, block, confirmed)."""
    fixed: Mapping[str, Linkage] = field(default_factory=dict, repr=False)
    """The baselines fixed across releases (``mdg_exact``, ``prg_exact``, ``random_draw``) and
    the upper bounds (``confidential``, ``swapped``), by name."""
    passes: Mapping[str, ConfirmationPasses] = field(default_factory=dict, repr=False)
    """By method: how its putative links were confirmed (empty for figures written before)."""

    def nonmodal_precision(self) -> dict[str, Value]:
        """The reconstruction's precision on nonmodal persons beside the proportional guessers'
        (:data:`NONMODAL_PRG`; the paper's PRG: 16.0–16.7%), and by how many percentage points
        it exceeds each."""
        ours = self.reconstruction.nonmodal.precision
        out: dict[str, Value] = {"reconstruction": ours}
        methods = self.methods()
        for name in NONMODAL_PRG:
            method = methods.get(name)
            theirs = (
                method.nonmodal.precision
                if method is not None
                else (self.prg if isinstance(self.prg, NotMeasured) else NotMeasured(NO_METHOD))
            )
            out[name] = theirs
            out[f"points_beyond_{name}"] = _points(ours, theirs)
        return out

    def methods(self) -> dict[str, Linkage]:
        """The methods measured, by name."""
        chosen = (self.reconstruction, self.mdg, self.prg, *self.fixed.values())
        return {m.method: m for m in chosen if isinstance(m, Linkage)}

    def baselines(self) -> dict[str, Linkage]:
        """The baselines measured (upper bounds excluded): the release's own and the fixed."""
        return {
            name: m
            for name, m in self.methods().items()
            if name not in ("reconstruction", *UPPER_BOUND_METHODS)
        }

    def headline_groups(self) -> tuple[str, ...]:
        """The :data:`HEADLINE_GROUPS` measured (``vulnerable`` when the group was given)."""
        return tuple(g for g in HEADLINE_GROUPS if g in self.reconstruction.groups)

    def headline(self, group: str) -> HeadlineRisk:
        """Confirmed reidentifications beyond the best baseline in ``group`` (all, nonmodal)."""
        ours = self.reconstruction.group(group)
        best_name, best = max(
            ((n, m.group(group)) for n, m in self.baselines().items()),
            key=lambda item: item[1].confirmed,
        )
        return HeadlineRisk(group, ours, best_name, best)

    def no_headline(self) -> NotMeasured:
        """Why there is no headline risk: no baseline was measured (the reason the baselines
        give)."""
        reason = self.mdg.reason if isinstance(self.mdg, NotMeasured) else "no baseline measured"
        return NotMeasured(f"no baseline to be beyond ({reason.removeprefix('not measured: ')})")

    def __repr__(self) -> str:
        return (
            f"<Reidentification by the {self.attacker} attacker: "
            f"{self.attacker_records:,} records, reconstruction precision "
            f"{show_share(self.reconstruction.all.precision)} (nonmodal "
            f"{show_share(self.reconstruction.nonmodal.precision)})>"
        )

    def figures(self, field: str = "reidentification", **dims: Any) -> Iterator[Figure]:
        """Every rate in long form; a group by block size (``nonmodal_block_size_10-49``) is its
        persons (``nonmodal``) with the block-size class as ``size_class``. ``field``: the
        evaluation's field they come from (the first part of every metric)."""
        for method in self.methods().values():
            for group, rates in method.groups.items():
                persons, _, size = group.partition("block_size_")
                persons = persons.removesuffix("_") or "all"
                for metric in ("putative_rate", "confirmed_rate", "precision"):
                    yield Figure(
                        f"{field}.{self.attacker}.{method.method}.{persons}.{metric}",
                        getattr(rates, metric),
                        size_class=size or None,
                        **dims,
                    )
        if self.baselines():
            for group in self.headline_groups():
                head = self.headline(group)
                prefix = f"{field}.{self.attacker}.headline.{group}"
                yield Figure(f"{prefix}.points", head.points, **dims)
                yield Figure(f"{prefix}.persons", head.persons, **dims)
        else:  # no baseline to be beyond: n/a, never 0
            for group in self.headline_groups():
                prefix = f"{field}.{self.attacker}.headline.{group}"
                yield Figure(f"{prefix}.points", self.no_headline(), **dims)
        for name, value in self.nonmodal_precision().items():
            if name.startswith("points_beyond_"):
                yield Figure(f"{field}.{self.attacker}.nonmodal_precision.{name}", value, **dims)
        for name, passes in self.passes.items():
            for which in ("first", "second"):
                yield Figure(
                    f"{field}.{self.attacker}.{name}.all.confirmed_{which}_pass_share",
                    getattr(passes, f"{which}_pass_share"),
                    **dims,
                )

    def to_dict(self) -> dict[str, Any]:
        baselines = self.mdg.reason if isinstance(self.mdg, NotMeasured) else "computed"
        return {
            "schema_version": SCHEMA_VERSION,
            "attacker_preset": self.attacker,
            "attacker": dict(self.attacker_parameters),
            "attacker_records": self.attacker_records,
            "attacker_match_share": self.attacker_match_share,
            "baselines": baselines,
            **{name: m.to_dict() for name, m in self.methods().items()},
            "headline": (
                {g: self.headline(g).to_dict() for g in self.headline_groups()}
                if self.baselines()
                else as_json(self.no_headline())
            ),
            "nonmodal_precision": as_json(self.nonmodal_precision()),
            **(
                {"confirmation_passes": {m: p.to_dict() for m, p in self.passes.items()}}
                if self.passes
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reidentification:
        def method(name: str) -> Linkage | NotMeasured:
            if name in data:
                return Linkage.from_dict(name, data[name])
            return NotMeasured(str(data.get("baselines", "not computed")))

        reconstruction = method("reconstruction")
        assert isinstance(reconstruction, Linkage), "a reidentification links reconstructed records"
        return cls(
            attacker=str(data.get("attacker_preset", "custom")),
            attacker_parameters=dict(data.get("attacker", {})),
            attacker_records=int(data["attacker_records"]),
            attacker_match_share=float(data["attacker_match_share"]),
            reconstruction=reconstruction,
            mdg=method("mdg"),
            prg=method("prg"),
            fixed={
                name: Linkage.from_dict(name, data[name])
                for name in (*FIXED_BASELINE_METHODS, *UPPER_BOUND_METHODS)
                if name in data
            },
            passes={
                name: ConfirmationPasses.from_dict(counts)
                for name, counts in data.get("confirmation_passes", {}).items()
            },
        )


NO_TIME = "the run recorded no time"


def _seconds(value: Value) -> str:
    return "time n/a" if isinstance(value, NotMeasured) else f"{value:.1f} s"


def show_share(value: Value) -> str:
    """A share for a line of text (\"n/a\" when not measured)."""
    return "n/a" if isinstance(value, NotMeasured) else f"{value:.1%}"


# ---------------------------------------------------------------------------------------------
# Reconstruction
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variability:
    """Solution variability: how many blocks have one reconstruction only (solvar = 0)."""

    blocks: int
    share_blocks_solvar_zero: Value
    share_persons_solvar_zero: Value
    cumulative_share_of_blocks: Mapping[str, Value]
    """Share of blocks with solvar at most each key."""
    seconds: Value

    def __repr__(self) -> str:
        return (
            f"<Variability: {show_share(self.share_blocks_solvar_zero)} of {self.blocks:,} "
            f"blocks ({show_share(self.share_persons_solvar_zero)} of persons) have one "
            "reconstruction only>"
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variability:
        none = "no block was measured"
        return cls(
            blocks=int(data["blocks"]),
            share_blocks_solvar_zero=from_json(data["share_blocks_solvar_zero"], none),
            share_persons_solvar_zero=from_json(data["share_persons_solvar_zero"], none),
            cumulative_share_of_blocks={
                k: from_json(v, "no block with a finite solvar")
                for k, v in data.get("cumulative_share_of_blocks", {}).items()
            },
            seconds=from_json(data.get("seconds"), NO_TIME),
        )


@dataclass(frozen=True)
class ReconstructionFigures:
    """The attack's own figures about a reconstruction (none of them uses the truth)."""

    metrics: Mapping[str, Any] = field(repr=False)
    """The figures as ``metrics.json`` records them."""

    @property
    def seconds(self) -> Value:
        return from_json(self.metrics.get("seconds"), NO_TIME)

    @property
    def records(self) -> Value:
        """How many person records the reconstruction holds (against the population's size:
        a reconstruction of noisy counts may hold many more, or fewer)."""
        return from_json(self.metrics.get("persons"), "not recorded")

    @property
    def statuses(self) -> dict[str, int]:
        """Tracts by solver status (optimal, time limit, ...)."""
        return dict(self.metrics.get("statuses", {}))

    @property
    def time_limited_tracts(self) -> int:
        """Tracts one of whose solves wall time stopped (their reconstruction may differ between
        runs); read from the statuses for a reconstruction that does not record it."""
        if "time_limited_tracts" in self.metrics:
            return int(self.metrics["time_limited_tracts"])
        return sum(n for status, n in self.statuses.items() if "time limit" in status.lower())

    @property
    def unknown_attributes(self) -> list[str]:
        """Person attributes the release's tables determine for no record."""
        return list(self.metrics.get("unknown_attributes", []))

    @property
    def variability(self) -> Variability | NotMeasured:
        data = self.metrics.get("variability")
        if data is None:
            return NotMeasured("solution variability was not asked for")
        if "not_measured" in data:
            return NotMeasured(str(data["not_measured"]))
        return Variability.from_dict(data)

    def __repr__(self) -> str:
        return f"<ReconstructionFigures: {_seconds(self.seconds)}>"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.metrics)


@dataclass(frozen=True, kw_only=True)
class ReconstructionResult(ReconstructionFigures):
    """Person records rebuilt from a release's tables, with the attack's own figures."""

    mechanism: str
    """The mechanism of the attacked release."""
    persons: pl.DataFrame = field(repr=False)
    """Reconstructed persons: block, sex, age, age_min, age_max, race, hispanic (null where the
    tables do not determine an attribute)."""
    tracts: pl.DataFrame = field(repr=False)
    """One row per tract: status, mode, deviation, seconds, program size."""
    solvar: pl.DataFrame | None = field(default=None, repr=False)
    """Solution variability per block, when measured."""

    @property
    def n_persons(self) -> int:
        return self.persons.height

    def __repr__(self) -> str:
        return (
            f"<ReconstructionResult of a {self.mechanism} release: {self.n_persons:,} persons in "
            f"{self.tracts.height:,} tracts, {_seconds(self.seconds)}>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **self.metrics}


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------

NO_CHILDREN = "no parent cell whose children are all shown"
NO_NAIVE = "no naive reconstruction was run beside the noise-aware one"
NAIVE_IS_AWARE = (
    "no naive reconstruction apart: the release's counts are exact, so the naive attack is the "
    "noise-aware one"
)
NO_CELLS = "the table has no cell at this level"
NO_SHOWN_CELLS = "every cell of the table is suppressed at this level"
NO_POSITIVE_CELLS = "no cell has a positive true count"
NO_POSITIVE_SHOWN_CELLS = "no shown cell has a positive true count"
NO_CELLS_OF_SIZE = "no cell has a true count of this size"


def _no_nonempty_figure(shown_cells: int) -> str:
    """Why a figure over the non-empty shown cells is missing: none shown, or none non-empty."""
    return NO_POSITIVE_SHOWN_CELLS if shown_cells else NO_SHOWN_CELLS


NO_DISTRIBUTION = (
    "no geounit has a positive true and published total, or the table has one cell (no "
    "distribution to compare)"
)


@dataclass(frozen=True)
class TableAccuracy:
    """Error of one published table at one level against the exact tabulation of the truth,
    over every cell: a withheld (suppressed) cell gives a user nothing, so its error is its true
    count and it stays in the denominator (withholding a true 0 costs nothing). The mean
    absolute errors over the shown cells alone are beside them (``*_shown``)."""

    table: str
    level: str
    cells: int
    shown_cells: int
    nonempty_cells: int
    """Cells whose true count is positive, shown or withheld."""
    nonempty_shown_cells: int
    """Shown cells whose true count is positive."""
    mae: Value
    rmse: Value
    bias: Value
    """Mean signed error (published − true; a withheld cell's is minus its true count)."""
    mae_nonempty: Value
    rmse_nonempty: Value
    bias_nonempty: Value
    mae_shown: Value
    """Mean absolute error over the shown cells alone (withheld cells left out)."""
    mae_nonempty_shown: Value
    """The same over the shown cells whose true count is positive."""
    mae_by_true_count: Mapping[str, Value]
    """Mean absolute error over the cells of each class of true count ("0", "1-9", "10-99",
    "100+")."""
    max_abs_error: Value
    negative_share: Value
    """Share of the shown cells published negative."""
    suppressed_share: float
    share_rel_error_above: Mapping[str, Value]
    """Over cells with a positive true count: share whose relative error exceeds each
    threshold ("10pct", "50pct", "100pct"; a withheld cell's is 100%)."""
    false_positive_cells: int
    """Cells whose true count is 0 but published otherwise."""
    distance_geounits: int
    """Geounits with a positive true or published total: those of the distances."""
    tv_mean: Value
    """Mean over those geounits of the total variation distance between the true and the
    published distribution over the table's cells."""
    hellinger_mean: Value
    """The same for the Hellinger distance."""

    @classmethod
    def from_dict(cls, table: str, level: str, data: Mapping[str, Any]) -> TableAccuracy:
        prefix = "share_rel_error_above_"
        by_count = "mae_true_count_"
        nonempty = _no_nonempty_figure(int(data["shown_cells"]))
        return cls(
            table=table,
            level=level,
            cells=int(data["cells"]),
            shown_cells=int(data["shown_cells"]),
            nonempty_cells=int(data["nonempty_cells"]),
            nonempty_shown_cells=int(data["nonempty_shown_cells"]),
            mae=from_json(data["mae"], NO_CELLS),
            rmse=from_json(data["rmse"], NO_CELLS),
            bias=from_json(data["bias"], NO_CELLS),
            mae_nonempty=from_json(data["mae_nonempty"], NO_POSITIVE_CELLS),
            rmse_nonempty=from_json(data["rmse_nonempty"], NO_POSITIVE_CELLS),
            bias_nonempty=from_json(data["bias_nonempty"], NO_POSITIVE_CELLS),
            mae_shown=from_json(data["mae_shown"], NO_SHOWN_CELLS),
            mae_nonempty_shown=from_json(data["mae_nonempty_shown"], nonempty),
            mae_by_true_count={
                k.removeprefix(by_count): from_json(v, NO_CELLS_OF_SIZE)
                for k, v in data.items()
                if k.startswith(by_count)
            },
            max_abs_error=from_json(data["max_abs_error"], NO_CELLS),
            negative_share=from_json(data["negative_share"], NO_SHOWN_CELLS),
            suppressed_share=float(data["suppressed_share"]),
            share_rel_error_above={
                k.removeprefix(prefix): from_json(v, NO_POSITIVE_CELLS)
                for k, v in data.items()
                if k.startswith(prefix)
            },
            false_positive_cells=int(data["false_positive_cells"]),
            distance_geounits=int(data["distance_geounits"]),
            tv_mean=from_json(data["tv_mean"], NO_DISTRIBUTION),
            hellinger_mean=from_json(data["hellinger_mean"], NO_DISTRIBUTION),
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as ``metrics.json`` holds them (one key per relative-error threshold)."""
        out = fields_json(self, exclude=("table", "level"))
        shares = out.pop("share_rel_error_above")
        by_count = out.pop("mae_by_true_count")
        false_positives = out.pop("false_positive_cells")
        out |= {f"mae_true_count_{k}": v for k, v in by_count.items()}
        distances = {k: out.pop(k) for k in ("distance_geounits", "tv_mean", "hellinger_mean")}
        out |= {f"share_rel_error_above_{k}": v for k, v in shares.items()}
        return out | {"false_positive_cells": false_positives} | distances


@dataclass(frozen=True)
class LevelAccuracy:
    """Mean absolute error at one level, averaged over the tables published there."""

    level: str
    mean_mae: float
    tables: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean_mae": self.mean_mae, "tables": self.tables}


COMPARED_TABLES = ("P1", "P12")
"""The tables every release's accuracy is compared on, like for like and each apart: total
population (P1: a geounit's total is one cell) and sex by age (P12). A mean over whatever each
release publishes would compare different tables, and a mean pooled over the two would hide
the error of the totals among P12's cells."""
COMPARED_LEVELS = ("tract", "block")
"""The levels the report compares the releases at."""
COMPARED_METRICS = (
    "mae",
    "mae_nonempty",
    "rmse_nonempty",
    "bias_nonempty",
    "mae_shown",
    "mae_nonempty_shown",
    "suppressed_share",
)
"""The figures of each compared table the tidy results carry at every compared level (not
measured, with the reason, where a release does not publish the table there)."""


@dataclass(frozen=True)
class AgreementRates:
    """Share of true persons matched one-to-one by released or reconstructed records."""

    blocks: int
    persons: int
    agree_exact_age: Value
    agree_agebin: Value

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgreementRates:
        reason = "no true person in this group"
        return cls(
            blocks=int(data["blocks"]),
            persons=int(data["persons"]),
            agree_exact_age=from_json(data["agree_exact_age"], reason),
            agree_agebin=from_json(data["agree_agebin"], reason),
        )

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class Agreement:
    """Agreement of records with the truth, overall and by block-size class."""

    all: AgreementRates
    by_block_size: Mapping[str, AgreementRates]
    records: int
    """Records compared (released or reconstructed)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Agreement | NotMeasured:
        for key in ("not_applicable", "not_measured"):
            if key in data:
                return NotMeasured(str(data[key]))
        return cls(
            all=AgreementRates.from_dict(data["all"]),
            by_block_size={
                k: AgreementRates.from_dict(v) for k, v in data["by_block_size"].items()
            },
            records=int(data["reconstructed_persons"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "all": self.all.to_dict(),
            "reconstructed_persons": self.records,
            "by_block_size": {k: v.to_dict() for k, v in self.by_block_size.items()},
        }


def table_accuracies(
    figures: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, dict[str, TableAccuracy]], dict[str, dict[str, Value]]]:
    """Accuracy by table and level, and additivity by table and parent level, from their JSON
    form (``accuracy`` of ``metrics.json``, or what :func:`sdclab.evaluation.accuracy` returns)."""
    accuracy = {
        name: {
            level: TableAccuracy.from_dict(name, level, values)
            for level, values in levels.items()
            if level != "additivity"
        }
        for name, levels in figures.items()
    }
    additivity = {
        name: {k: from_json(v, NO_CHILDREN) for k, v in levels.get("additivity", {}).items()}
        for name, levels in figures.items()
    }
    return accuracy, additivity


def level_accuracies(figures: Mapping[str, Mapping[str, Any]]) -> dict[str, LevelAccuracy]:
    return {
        level: LevelAccuracy(level, float(v["mean_mae"]), int(v["tables"]))
        for level, v in figures.items()
    }


NO_RECONSTRUCTION = "no reconstruction of this release was given"
NOT_GIVEN_BLOCK_ONLY = (
    "no reidentification of a reconstruction from the block tables alone was given"
)
NO_TOTALS = "the release publishes no P1 (total population) table"
NO_GEOUNITS = "no geounit of this class has its total shown"
NO_POSITIVE_TOTAL = "no geounit of this class has a positive true total"
RELATIVE_TOTAL_METRICS = ("mape", "malpe", "share_off_5pct", "share_off_10pct")


def totals_from(data: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Value]]]:
    """The geounit-total metrics read back (None: no geounit of the class, or none positive)."""
    return {
        level: {
            size: {
                k: from_json(v, NO_POSITIVE_TOTAL if k in RELATIVE_TOTAL_METRICS else NO_GEOUNITS)
                for k, v in metrics.items()
            }
            for size, metrics in classes.items()
        }
        for level, classes in data.items()
    }


NO_INDICATORS = "the release publishes no P12 (sex by age) at tract level"
NO_INDICATOR = (
    "no tract has a published indicator (a positive published denominator, no cell suppressed)"
)


def indicators_from(data: Mapping[str, Any]) -> dict[str, dict[str, Value]]:
    """The tract indicators read back (None: no tract with a published indicator)."""
    return {
        name: {k: from_json(v, NO_INDICATOR) for k, v in metrics.items()}
        for name, metrics in data.items()
    }


def no_risk_analysis(mechanism: str) -> NotMeasured:
    """The risk figures of a mechanism without a risk analysis of its own."""
    return NotMeasured(f"the {mechanism} mechanism has no risk analysis of its own")


NO_MICRODATA = "the release publishes no person records"


def _rank_curve(data: Mapping[str, Any]) -> Mapping[str, Value] | NotMeasured:
    for key in ("not_applicable", "not_measured"):
        if key in data:
            return NotMeasured(str(data[key]))
    return {top: from_json(value, "no record ranked") for top, value in data.items()}


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
    :mod:`sdclab.diagnostics`, each under its key in the JSON form."""
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
    total ("all", "0", "1-9", …), then metric (:func:`sdclab.evaluation.geounit_totals`)."""
    rank_curve: Mapping[str, Value] | NotMeasured = field(
        default=NotMeasured(NO_RECONSTRUCTION), repr=False
    )
    """Precision among the top k% of reconstructed records ranked by confidence (top_1% ...
    top_100%)."""
    indicators: Mapping[str, Mapping[str, Value]] = field(default_factory=dict, repr=False)
    """Errors of the key indicators per tract from the published P12: by indicator
    (``sex_ratio``, ``share_65_plus``, ``share_under_18``), then figure (tracts,
    undefined_tracts, mae, bias; :func:`sdclab.evaluation.tract_indicators`)."""
    block_only_reidentification: Mapping[str, Reidentification | NotMeasured] | NotMeasured = field(
        default=NotMeasured(NOT_GIVEN_BLOCK_ONLY), repr=False
    )
    """By attacker: the reidentification of the release's reconstruction from its block tables
    alone (the attack paper's rHDF_b, beside its rHDF_b,t), or why there is none."""

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
        diagnostics and risk analysis, whose shapes are its own, stay in their mappings."""
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
        """The reidentification by attacker, of the reconstruction and of the one from the block
        tables alone, or why there is none."""
        for attacker, reid in self.reidentification.items():
            if isinstance(reid, NotMeasured):
                yield Figure(f"reidentification.{attacker}", reid, **dims)
            else:
                yield from reid.figures(**dims)
        block_only = self.block_only_reidentification
        if isinstance(block_only, NotMeasured):
            yield Figure(BLOCK_ONLY_FIELD, block_only, **dims)
        else:
            for attacker, reid in block_only.items():
                if isinstance(reid, NotMeasured):
                    yield Figure(f"{BLOCK_ONLY_FIELD}.{attacker}", reid, **dims)
                else:
                    yield from reid.figures(BLOCK_ONLY_FIELD, **dims)

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
        out["reconstruction"] = as_json(self.reconstruction)
        if self.diagnostics:
            out["diagnostics"] = diagnostics_json(self.diagnostics)
        out["risk"] = as_json(self.risk)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evaluation:
        """An evaluation read back from :meth:`to_dict`'s form."""
        from sdclab.accounting import SpecCard

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
            rank_curve=_rank_curve(data.get("ranked_precision", {"not_measured": "not recorded"})),
            totals=totals_from(data.get("geounit_totals", {})),
            indicators=indicators_from(data.get("tract_indicators", {})),
            block_only_reidentification=_block_only(data.get(BLOCK_ONLY_FIELD)),
        )


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


def _block_only(data: Any) -> Mapping[str, Reidentification | NotMeasured] | NotMeasured:
    """The block-only reidentification read back (absent: results written before it)."""
    if not isinstance(data, Mapping):
        return NotMeasured("not recorded")
    if "not_measured" in data:
        return NotMeasured(str(data["not_measured"]))
    return {
        attacker: (
            NotMeasured(str(reid["not_measured"]))
            if "not_measured" in reid
            else Reidentification.from_dict(reid)
        )
        for attacker, reid in data.items()
    }


# ---------------------------------------------------------------------------------------------
# Which figures are evaluation only
# ---------------------------------------------------------------------------------------------

EVALUATION_ONLY = "evaluation_only"
"""Key under which figures list, as dotted paths, those computed with the truth (as
:func:`sdclab.protection.cellkey_risk.ckm_risk` already does): evaluation only, never to be
published."""

TRUTH_BASED_FIELDS = (
    "protection",
    "accuracy",
    "accuracy_by_level",
    "geounit_totals",
    "tract_indicators",
    "microdata_agreement",
    "reconstruction_agreement",
    "naive_reconstruction_agreement",
    "ranked_precision",
    "reconstruction_block_sex_agebin",
    "reidentification",
    BLOCK_ONLY_FIELD,
    "diagnostics",
)
"""Fields of a mechanism's results (an experiment's entry, the metrics of ``sdclab evaluate``)
computed with the truth. Reidentification is among them as a whole: confirmation needs the truth,
its breakdowns use true block sizes, and even its putative links are made against an attacker
file simulated from the confidential records. ``reconstruction`` (the attack's own figures,
solution variability included), ``specification``, ``budget`` and the release's notes (which hold
no figure of the confidential data: ``tests/test_no_leaks.py`` allows each key) are not."""


def evaluation_only(figures: dict[str, Any]) -> list[str]:
    """Dotted paths of the figures of one mechanism's results that were computed with the truth:
    the :data:`TRUTH_BASED_FIELDS` present and what ckm-risk lists under :data:`EVALUATION_ONLY`;
    only paths present in ``figures``."""
    paths = [name for name in TRUTH_BASED_FIELDS if name in figures]
    risk = figures.get("risk")
    if isinstance(risk, dict):
        paths += [f"risk.{path}" for path in risk.get(EVALUATION_ONLY, [])]
    return [path for path in paths if has_path(figures, path)]


TIDY_FIELDS = {
    "compared": "accuracy",
    "indicators": "tract_indicators",
    "totals": "geounit_totals",
    "naive_agreement": "naive_reconstruction_agreement",
}
"""The field of a mechanism's results a tidy figure comes from, where the first part of its
metric is not that field's name (``compared.*`` is the ``accuracy`` of P1 and of P12, with a
reason where a release lacks one)."""


def metric_field(metric: str) -> str:
    """The field of a mechanism's results (:meth:`Evaluation.to_dict`) a tidy metric is from."""
    head = metric.partition(".")[0]
    return TIDY_FIELDS.get(head, head)


def metric_is_evaluation_only(metric: str) -> bool:
    """Whether a tidy figure was computed with the truth: its field is one of the
    :data:`TRUTH_BASED_FIELDS` that :data:`EVALUATION_ONLY` lists."""
    return metric_field(metric) in TRUTH_BASED_FIELDS


def marked(figures: dict[str, Any]) -> dict[str, Any]:
    """``figures`` with the list of its evaluation-only paths under :data:`EVALUATION_ONLY`."""
    return {**figures, EVALUATION_ONLY: evaluation_only(figures)}


def has_path(figures: dict[str, Any], path: str) -> bool:
    """Whether the dotted ``path`` of nested keys is present in ``figures``."""
    node: Any = figures
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


# ---------------------------------------------------------------------------------------------
# Experiments
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """Where a release sits in its experiment entry's sweep."""

    entry: str
    """The entry's title (the mechanism's name unless labelled)."""
    setting: str
    """The entry at this point of its grid (``topdown-dhc@rho=4``): its replicates share it."""
    varied: Mapping[str, str] = field(default_factory=dict)
    """The swept settings' values at this point."""
    replicate: int = 1
    same_as: str | None = None
    """An earlier replicate whose release is identical (the mechanism drew no fresh
    randomness), if any."""
    population: int = 1
    """The population replicate the release was made from (1: the experiment's population)."""

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sweep:
        return cls(
            entry=str(data["entry"]),
            setting=str(data["setting"]),
            varied=dict(data.get("varied", {})),
            replicate=int(data.get("replicate", 1)),
            same_as=data.get("same_as"),
            population=int(data.get("population", 1)),
        )


@dataclass(frozen=True)
class ReleaseResult:
    """One release of an experiment: the mechanism as configured and its evaluation."""

    title: str
    """The experiment's label of the release (the mechanism's name unless labelled; with the
    sweep point and the replicate where the entry has them)."""
    settings: Mapping[str, Any] = field(repr=False)
    notes: Mapping[str, Any] = field(repr=False)
    evaluation: Evaluation = field(repr=False)
    point: Sweep | None = field(default=None, repr=False)
    """Its place in the entry's sweep (None: the release is the entry, run once)."""
    protection: Mapping[str, Any] | NotMeasured = field(
        default=NotMeasured("not judged (a release written before releases recorded it)"),
        repr=False,
    )
    """Whether the release protects, and why not (``release.json``'s ``protection``: whether
    its tables are the exact ones is a figure of the truth, so evaluation only)."""

    @property
    def protects(self) -> bool:
        """Whether the release protects (an unjudged release does not count as protecting)."""
        return isinstance(self.protection, Mapping) and bool(self.protection.get("protects"))

    @property
    def sweep(self) -> Sweep:
        return self.point if self.point is not None else Sweep(self.title, self.title)

    @property
    def epsilon(self) -> Value:
        """The common-axis ε (δ = 10⁻¹⁰, one person's record changed), or why there is none."""
        common = self.evaluation.card.common
        return common if isinstance(common, NotMeasured) else common.epsilon

    @property
    def mechanism(self) -> str:
        return self.evaluation.mechanism

    @property
    def budget(self) -> str:
        """The specification card's budget, as text."""
        return self.evaluation.card.guarantee.text()

    def to_dict(self) -> dict[str, Any]:
        """An entry of ``results.json``: settings, notes, budget, the evaluation's figures and
        the paths of the figures that used the truth."""
        figures = self.evaluation.to_dict()
        return marked(
            {
                "mechanism": self.mechanism,
                "settings": dict(self.settings),
                "notes": dict(self.notes),
                "budget": self.budget,
                "sweep": self.sweep.to_dict(),
                "protection": as_json(self.protection),
                **{k: v for k, v in figures.items() if k not in ("schema_version", "mechanism")},
            }
        )

    @classmethod
    def from_dict(cls, title: str, data: Mapping[str, Any]) -> ReleaseResult:
        return cls(
            title=title,
            settings=dict(data.get("settings", {})),
            notes=dict(data.get("notes", {})),
            evaluation=Evaluation.from_dict(data),
            point=Sweep.from_dict(data["sweep"]) if "sweep" in data else None,
            protection=_figures_or_why(data.get("protection")),
        )


@dataclass(frozen=True)
class PopulationSummary:
    """The population an experiment protected: where it came from and its size."""

    source: Mapping[str, Any]
    """The synthetic generator's settings, or the directory it was read from."""
    persons: int
    units: int
    geography: Mapping[str, int]
    """Geounits per level."""
    uniques: Mapping[str, float] = field(default_factory=dict)
    """Share of persons unique in their block on {sex, age} and on {sex, agebin} (evaluation
    only: from the confidential records)."""
    block_sizes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Blocks and persons in each block-size class ("1-9", …; evaluation only)."""
    vulnerable: Mapping[str, Any] | NotMeasured = field(
        default=NotMeasured("the experiment does not reconstruct (attacks.reconstruct)")
    )
    """The fixed vulnerable group's figures (:meth:`VulnerableGroup.to_dict`; evaluation only)."""

    def to_dict(self) -> dict[str, Any]:
        """Its fields, with the figures counted from the confidential records listed under
        :data:`EVALUATION_ONLY`."""
        return {**fields_json(self), EVALUATION_ONLY: list(POPULATION_TRUTH_FIELDS)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PopulationSummary:
        return cls(
            source=dict(data["source"]),
            persons=int(data["persons"]),
            units=int(data["units"]),
            geography=dict(data["geography"]),
            uniques=dict(data.get("uniques", {})),
            block_sizes=dict(data.get("block_sizes", {})),
            vulnerable=_figures_or_why(data.get("vulnerable")),
        )


def _figures_or_why(value: Any) -> Mapping[str, Any] | NotMeasured:
    """A mapping of figures read back from JSON, or why there is none (absent: not recorded)."""
    if isinstance(value, Mapping) and "not_measured" not in value:
        return dict(value)
    if isinstance(value, Mapping):
        return NotMeasured(str(value["not_measured"]))
    return NotMeasured("not recorded")


POPULATION_TRUTH_FIELDS = (
    "persons",
    "units",
    "geography",
    "uniques",
    "block_sizes",
    "vulnerable",
)
"""The figures of an experiment's population counted from the confidential records (exact
counts of persons, units and geounits, uniqueness, block sizes): evaluation only. Its
``source`` (a directory or the generator's settings) is not a figure of the data."""


@dataclass(frozen=True)
class CensusView:
    """What the results and the report say of a census other than the US 2010 one (whose report
    keeps its own tables and levels): which census, and the tables and levels the report shows
    by default (:func:`sdclab.census_view.census_view`)."""

    name: str
    title: str
    digest: str
    levels: tuple[str, ...]
    """The main geography's levels, from the top down."""
    unit: str
    """The level of the reconstruction's geounits (the US block)."""
    program: str
    """The level of its programs (the US tract): the frontier's default level."""
    total: str | None
    """The table of the total of persons (the US P1), if the census has one."""
    compared: str | None
    """The table the report compares by default (the US P12): the first person table crossing
    an attribute published at :attr:`unit` (else the first crossing one)."""
    quasi_identifiers: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CensusView:
        return cls(
            name=str(data["name"]),
            title=str(data["title"]),
            digest=str(data["digest"]),
            levels=tuple(data["levels"]),
            unit=str(data["unit"]),
            program=str(data["program"]),
            total=data.get("total"),
            compared=data.get("compared"),
            quasi_identifiers=tuple(data.get("quasi_identifiers", ())),
        )


@dataclass(frozen=True)
class ExperimentResult:
    """What an experiment measured: its population and every release's evaluation, with the
    steps it computed and reused. ``results.json`` and the report are written from it."""

    population: PopulationSummary
    releases: Mapping[str, ReleaseResult] = field(repr=False)
    """By title, in the experiment's order."""
    steps_computed: tuple[str, ...] = field(default=(), repr=False)
    steps_reused: tuple[str, ...] = field(default=(), repr=False)
    provenance: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """What made the results: sdclab's version, the experiment, when it ran, the population's
    source and the attacks' settings (never a mechanism's seed: it reproduces the noise)."""
    population_replicates: tuple[PopulationSummary, ...] = field(default=(), repr=False)
    """The further populations every release was also made from (their releases' titles end
    in ``/p2``, ``/p3``, …): a setting's replicates then vary the population as well as the
    noise."""
    census: CensusView | None = field(default=None, repr=False)
    """The census, where it is not the US 2010 one (None: the US 2010 census)."""

    def __getitem__(self, title: str) -> ReleaseResult:
        return _entry(self.releases, title, "release")

    def population_of(self, release: ReleaseResult) -> PopulationSummary:
        """The population (replicate) ``release`` was made from."""
        return (self.population, *self.population_replicates)[release.sweep.population - 1]

    def __repr__(self) -> str:
        return (
            f"<ExperimentResult: {len(self.releases)} releases of {self.population.persons:,} "
            f"persons ({', '.join(self.releases)})>"
        )

    def figures(self) -> Iterator[Figure]:
        """Every release's figures in long form, with its setting (the entry at its sweep
        point), replicate and population replicate."""
        for release in self.releases.values():
            sweep = release.sweep
            yield from release.evaluation.figures(
                setting=sweep.setting, replicate=sweep.replicate, population=sweep.population
            )

    def tidy(self) -> pl.DataFrame:
        """``results.parquet`` (built once: the replicate summary and the files share it)."""
        return self._tidy

    @cached_property
    def _tidy(self) -> pl.DataFrame:
        """``results.parquet``: one row per release × metric × level × block-size class ×
        table, with the release's entry, setting, replicate, population replicate and
        common-axis ε; ``value`` is null where the figure was not measured and ``reason`` says
        why; ``evaluation_only`` says whether it was computed with the truth
        (:func:`metric_is_evaluation_only`)."""
        import polars as pl

        rows = []
        for title, release in self.releases.items():
            sweep, epsilon = release.sweep, release.epsilon
            for f in release.evaluation.figures():
                rows.append(
                    {
                        "release": title,
                        "entry": sweep.entry,
                        "setting": sweep.setting,
                        "replicate": sweep.replicate,
                        "population": sweep.population,
                        "mechanism": release.mechanism,
                        "epsilon": number(epsilon),
                        "metric": f.metric,
                        "level": f.level,
                        "size_class": f.size_class,
                        "table": f.table,
                        "value": number(f.value),
                        "reason": f.value.reason if isinstance(f.value, NotMeasured) else None,
                        EVALUATION_ONLY: metric_is_evaluation_only(f.metric),
                    }
                )
        schema = {name: getattr(pl, kind) for name, kind in TIDY_SCHEMA.items()}
        return pl.DataFrame(rows, schema=schema, orient="row")

    def replicate_summary(self) -> list[dict[str, Any]]:
        """Per setting with more than one replicate and figure: the number of replicates that
        measured it, their mean, standard deviation and the 95% t-interval of the mean, and
        whether the figure is evaluation only. A replicate identical to an earlier one
        (``same_as``) is not an independent draw and is left out."""
        import polars as pl

        repeats = [t for t, r in self.releases.items() if r.sweep.same_as is not None]
        tidy = self.tidy().filter(~pl.col("release").is_in(repeats))  # identical: not a draw
        keys = ["setting", "metric", "level", "size_class", "table", EVALUATION_ONLY]
        counts = tidy.group_by("setting").agg(pl.col("release").n_unique().alias("n"))
        several = counts.filter(pl.col("n") > 1)["setting"]
        grouped = (
            tidy.filter(pl.col("setting").is_in(several.implode()) & pl.col("value").is_not_null())
            .group_by(keys, maintain_order=True)
            .agg(
                n=pl.len(),
                mean=pl.col("value").mean(),
                sd=pl.col("value").std(),
            )
        )
        return [
            {**row, **replicate_interval(row["mean"], row["sd"], row["n"])}
            for row in grouped.iter_rows(named=True)
        ]

    def settings(self) -> dict[str, list[str]]:
        """Each setting's independent replicates (titles), in the experiment's order."""
        return _by_setting(self.releases)

    def frontier(
        self,
        axes: FrontierAxes | None = None,
        *,
        accuracy: str | None = None,
        level: str | None = None,
        table: str | None = None,
        attacker: str | None = None,
        persons: str | None = None,
    ) -> list[FrontierPoint]:
        """One point per setting (the entry at one point of its sweep): the replicate means of
        an accuracy figure and of the headline risk, with their 95% intervals, and the
        common-axis ε. A replicate identical to an earlier one is not a draw and is left out.

        The axes are ``axes`` (default :class:`FrontierAxes`, or :func:`declared_axes` for a
        census other than the US 2010 one) with any keyword given in place of
        its own: ``accuracy``, ``level`` and ``table`` of the accuracy figure; ``attacker``
        (census, commercial) and ``persons`` (vulnerable, all, nonmodal) of the headline risk."""
        import polars as pl

        default = FrontierAxes() if self.census is None else declared_axes(self.census)
        axes = with_axes(
            axes or default,
            accuracy=accuracy,
            level=level,
            table=table,
            attacker=attacker,
            persons=persons,
        )
        repeats = [t for t, r in self.releases.items() if r.sweep.same_as is not None]
        tidy = self.tidy().filter(~pl.col("release").is_in(repeats))
        errors = tidy.filter(
            (pl.col("metric") == axes.accuracy)
            & (pl.col("level") == axes.level)
            & pl.col("size_class").is_null()
            & (pl.col("table") == axes.table if axes.table else pl.lit(True))
        )
        if errors.group_by("release").len()["len"].max() not in (None, 1):
            raise ValueError(f"{axes.accuracy} has one figure per table: name the table")
        # a figure not measured as a whole (``reidentification.census``) says why for its parts
        risk = tidy.filter(
            (pl.col("metric") == axes.risk)
            | pl.lit(axes.risk).str.starts_with(pl.col("metric") + ".")
        )
        points = []
        for setting, rows in _by_setting(self.releases).items():
            first = self.releases[rows[0]]
            points.append(
                FrontierPoint(
                    setting=setting,
                    entry=first.sweep.entry,
                    mechanism=first.mechanism,
                    epsilon=first.epsilon,
                    releases=tuple(rows),
                    accuracy=_replicate_mean(errors, rows, f"no {axes.accuracy} at {axes.level}"),
                    risk=_replicate_mean(risk, rows, f"no {axes.risk}"),
                    varied=dict(first.sweep.varied),
                    protects=all(self.releases[t].protects for t in rows),
                    why_not=next(
                        (_why_not(self.releases[t]) for t in rows if not self.releases[t].protects),
                        None,
                    ),
                    qualifier=getattr(first.evaluation.card.common, "qualifier", ""),
                )
            )
        return points

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``results.json``."""
        return {
            "schema_version": SCHEMA_VERSION,
            "population": self.population.to_dict(),
            "population_replicates": [p.to_dict() for p in self.population_replicates],
            "mechanisms": {title: r.to_dict() for title, r in self.releases.items()},
            "replicates": self.replicate_summary(),
            "steps": {"computed": list(self.steps_computed), "reused": list(self.steps_reused)},
            "provenance": dict(self.provenance),
            **({} if self.census is None else {"census": self.census.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExperimentResult:
        """Results read back from ``results.json``."""
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"results of schema version {data.get('schema_version')!r}, not "
                f"{SCHEMA_VERSION}: run the experiment again with this sdclab"
            )
        steps = data.get("steps", {})
        return cls(
            population=PopulationSummary.from_dict(data["population"]),
            population_replicates=tuple(
                PopulationSummary.from_dict(p) for p in data.get("population_replicates", [])
            ),
            releases={
                title: ReleaseResult.from_dict(title, entry)
                for title, entry in data["mechanisms"].items()
            },
            steps_computed=tuple(steps.get("computed", ())),
            steps_reused=tuple(steps.get("reused", ())),
            provenance=dict(data.get("provenance", {})),
            census=CensusView.from_dict(data["census"]) if "census" in data else None,
        )


def _by_setting(releases: Mapping[str, ReleaseResult]) -> dict[str, list[str]]:
    """The titles of each setting's independent replicates, in the experiment's order."""
    out: dict[str, list[str]] = {}
    for title, release in releases.items():
        if release.sweep.same_as is None:
            out.setdefault(release.sweep.setting, []).append(title)
    return out


RISK_CEILING = 0.0
"""The choose table's default risk ceiling: the headline risk (confirmed reidentifications beyond
the best baseline, percentage points) at most 0 — no better than what the statistics alone give."""


@dataclass(frozen=True)
class FrontierAxes:
    """What the accuracy–risk frontier plots: an accuracy figure of the tidy results (lower is
    better) at a level, against a risk figure (by default the census attacker's headline risk
    for the population's fixed vulnerable group, :class:`VulnerableGroup`)."""

    accuracy: str = "compared.mae_nonempty"
    level: str = "tract"
    table: str | None = None
    """For a figure given per table (``accuracy.*``, ``compared.*``): which table's (for
    ``compared.*``, P12 unless named: :func:`default_table`)."""
    risk: str = "reidentification.census.headline.vulnerable.points"
    risk_ceiling: float = RISK_CEILING
    """The choose table offers no setting whose mean risk exceeds it."""

    def __post_init__(self) -> None:
        if self.table is None:
            object.__setattr__(self, "table", default_table(self.accuracy))
        per_table = FRONTIER_ACCURACY.get(self.accuracy)
        if per_table is None:
            raise ValueError(
                f"{self.accuracy!r} is not an error the frontier can plot (lower must be better "
                f"and it must be a size, not a signed bias): one of {', '.join(FRONTIER_ACCURACY)}"
            )
        if per_table != (self.table is not None):
            raise ValueError(
                f"{self.accuracy} is given per table: name the table"
                if per_table
                else f"{self.accuracy} is not given per table: give no table"
            )
        if self.accuracy.startswith("compared.") and self.table not in COMPARED_TABLES:
            raise ValueError(
                f"{self.accuracy} is given for {' and '.join(COMPARED_TABLES)}, each apart: "
                f"not {self.table}"
            )
        if self.accuracy.startswith("indicators.") and self.level != "tract":
            raise ValueError(f"{self.accuracy} is measured per tract: give level tract")

    @property
    def headline(self) -> bool:
        """Whether the risk is a headline risk (points beyond the best baseline), rather than a
        rate as measured (a census without baselines: the confirmed rate)."""
        parts = self.risk.split(".")
        return len(parts) == 5 and parts[2] == "headline"

    def describe(self) -> tuple[str, str]:
        """The axes' labels, in words."""
        accuracy = ACCURACY_WORDS.get(self.accuracy, self.accuracy)
        table = f" of {self.table}" if self.table else ""
        risk = self.risk
        parts = self.risk.split(".")
        who = {"nonmodal": "nonmodal persons ", "vulnerable": "vulnerable group "}
        if self.headline:  # reidentification.census.headline.all.points
            group = who.get(parts[3], "")
            risk = f"{group}confirmed beyond the best baseline, {parts[1]} attacker (pp)"
        elif len(parts) == 5 and parts[4] == "confirmed_rate":  # …reconstruction.all.rate
            group = who.get(parts[3], "")
            risk = f"{group}confirmed rate, {parts[1]} attacker (no baseline)"
        return f"{accuracy}{table}, {self.level.replace('_', ' ')}", risk


def with_axes(
    axes: FrontierAxes,
    *,
    accuracy: str | None = None,
    level: str | None = None,
    table: str | None = None,
    attacker: str | None = None,
    persons: str | None = None,
) -> FrontierAxes:
    """``axes`` with the keywords given in place of its own (a ValueError for an axis the
    frontier cannot plot, as :class:`FrontierAxes` says)."""
    from dataclasses import replace

    _, head, *rest = axes.risk.split(".")
    if attacker is not None and attacker not in ("census", "commercial"):
        raise ValueError(f"attacker {attacker!r}: expected census or commercial")
    if persons is not None and persons not in HEADLINE_GROUPS:
        raise ValueError(f"persons {persons!r}: expected one of {', '.join(HEADLINE_GROUPS)}")
    if rest and rest[0] == "headline":
        rest = ["headline", persons or rest[1], *rest[2:]]
    risk = ".".join(["reidentification", attacker or head, *rest])
    changes: dict[str, Any] = {"risk": risk}
    if accuracy is not None:
        changes["accuracy"] = accuracy
        changes["table"] = table  # a figure given per table names its own table
    elif table is not None:
        changes["table"] = table
    if level is not None:
        changes["level"] = level
    return replace(axes, **changes)


US_ONLY_ACCURACY = ("compared.", "indicators.")
"""The frontier's accuracy figures measured on the US tables alone (P1 and P12, the tract
indicators)."""


def declared_axes(
    census: CensusView,
    accuracy: str | None = None,
    level: str | None = None,
    table: str | None = None,
    risk: str = "census.all",
    ceiling: float = RISK_CEILING,
) -> FrontierAxes:
    """The frontier over a declared census: by default the MAE of the non-empty cells of its
    compared table at the level of the reconstruction's programs, against the confirmed rate of
    ``risk`` (``attacker.persons``): a declared census has no baseline, so no headline risk
    beyond it. A figure or group of the US tables alone is a ValueError."""
    accuracy = accuracy or "accuracy.mae_nonempty"
    if accuracy.startswith(US_ONLY_ACCURACY):
        raise ValueError(
            f"{accuracy} is measured on the US 2010 census's tables (P1, P12, the tract "
            f"indicators); for census {census.name} plot an accuracy.* figure of one of its "
            "tables, or totals.*"
        )
    attacker, persons = risk.split(".")
    if persons == "vulnerable":
        raise ValueError(
            "persons: the vulnerable group needs solution variability, measured on the US 2010 "
            f"census only, not census {census.name}: give all or nonmodal"
        )
    per_table = FRONTIER_ACCURACY.get(accuracy, False)
    return FrontierAxes(
        accuracy=accuracy,
        level=level or census.program,
        table=table if table is not None or not per_table else census.compared,
        risk=f"reidentification.{attacker}.reconstruction.{persons}.confirmed_rate",
        risk_ceiling=ceiling,
    )


def default_table(accuracy: str) -> str | None:
    """The table a frontier figure is read from when none is named: P12 (sex by age) for the
    ``compared.*`` figures, none for the others (a per-table ``accuracy.*`` figure names its
    table)."""
    return "P12" if accuracy.startswith("compared.") else None


FRONTIER_ACCURACY: dict[str, bool] = {
    **{
        f"compared.{m}": True
        for m in ("mae_nonempty", "mae", "rmse_nonempty", "mae_shown", "mae_nonempty_shown")
    },
    **{
        f"accuracy.{m}": True
        for m in (
            "mae_nonempty",
            "mae",
            "rmse_nonempty",
            "rmse",
            "max_abs_error",
            "tv_mean",
            "hellinger_mean",
            "share_rel_error_above_10pct",
            "share_rel_error_above_50pct",
            "share_rel_error_above_100pct",
        )
    },
    **{f"totals.{m}": False for m in ("mae", "rmse", "mape", "share_off_5pct", "share_off_10pct")},
    **{
        f"indicators.{name}.mae": False for name in ("sex_ratio", "share_65_plus", "share_under_18")
    },
}
"""The accuracy figures the frontier may plot — errors whose size is all that counts, lower
better — and whether each is given per table (then the axes name the table)."""

ACCURACY_WORDS = {
    "compared.mae_nonempty": "MAE, non-empty cells",
    "compared.mae": "MAE, all cells",
    "compared.rmse_nonempty": "RMSE, non-empty cells",
    "compared.mae_shown": "MAE, shown cells only",
    "compared.mae_nonempty_shown": "MAE, non-empty shown cells only",
    "accuracy.mae_nonempty": "MAE, non-empty cells",
    "accuracy.tv_mean": "mean total variation distance",
    "accuracy.hellinger_mean": "mean Hellinger distance",
}


@dataclass(frozen=True)
class ReplicateMean:
    """A figure's mean over the replicates that measured it, with its 95% t-interval."""

    mean: float
    n: int
    low: float | None
    high: float | None


@dataclass(frozen=True)
class FrontierPoint:
    """One setting of an experiment on the accuracy–risk plane."""

    setting: str
    entry: str
    mechanism: str
    epsilon: Value
    releases: tuple[str, ...]
    """Its independent replicates."""
    accuracy: ReplicateMean | NotMeasured
    risk: ReplicateMean | NotMeasured
    varied: Mapping[str, str] = field(default_factory=dict)
    """The swept settings' values at this point of the entry's grid."""
    protects: bool = True
    """Whether every replicate protects (:attr:`ReleaseResult.protects`): a setting that does
    not is a reference line, never a choice."""
    why_not: str | None = None
    """Why it does not protect (a replicate's reason)."""
    qualifier: str = ""
    """What its ε says beside another mechanism's ("within the PSA's invariants (…)"; the
    card's common figure's :attr:`~sdclab.privacy.CommonFigure.qualifier`)."""

    @property
    def placed(self) -> bool:
        """Whether both coordinates were measured."""
        return isinstance(self.accuracy, ReplicateMean) and isinstance(self.risk, ReplicateMean)


def _replicate_mean(
    figures: pl.DataFrame, releases: list[str], missing: str
) -> ReplicateMean | NotMeasured:
    """The mean of one figure over ``releases`` (the rows of ``figures`` that are theirs)."""
    import polars as pl

    rows = figures.filter(pl.col("release").is_in(releases))
    values = rows["value"].drop_nulls().to_list()
    if not values:
        reasons = rows["reason"].drop_nulls().unique().to_list()
        return NotMeasured("; ".join(sorted(reasons)) or missing)
    mean = sum(values) / len(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    interval = replicate_interval(mean, sd, len(values))
    return ReplicateMean(mean, len(values), interval["low"], interval["high"])


def _why_not(release: ReleaseResult) -> str:
    """Why a release is no candidate: its protection verdict's reason, or why it has none."""
    if isinstance(release.protection, NotMeasured):
        return release.protection.reason
    return str(release.protection.get("reason", "it does not protect"))


@dataclass(frozen=True)
class Choice:
    """The answer of the choose table for one accuracy target."""

    target: float
    best: FrontierPoint | None
    """The candidate of least risk meeting the target (None: no candidate meets it)."""
    runner_up: FrontierPoint | None
    meeting: int
    """How many candidates meet the target."""
    flags: tuple[str, ...] = ()
    """Where the replicates do not settle the choice: the best's accuracy interval crosses the
    target, or its risk interval the ceiling."""


def candidates(
    points: Sequence[FrontierPoint], ceiling: float = RISK_CEILING
) -> list[FrontierPoint]:
    """The settings the choose table may offer: measured on both axes, protecting (every
    replicate: the exact release and a release that protects nothing are reference lines, never
    a choice) and at most ``ceiling`` in mean risk."""
    return [
        p
        for p in points
        if p.placed and p.protects and p.risk.mean <= ceiling  # type: ignore[union-attr]
    ]


def choose(
    points: Sequence[FrontierPoint], targets: Sequence[float], ceiling: float = RISK_CEILING
) -> list[Choice]:
    """For each accuracy target, the candidate (:func:`candidates`) of least risk whose mean
    accuracy meets it (lower is better; of settings at the same risk, the most accurate), the
    runner-up, how many meet it and the flags where an interval crosses the target or the
    ceiling; no best where no candidate meets it."""
    offered = candidates(points, ceiling)
    out = []
    for target in targets:
        meeting = sorted(
            (p for p in offered if p.accuracy.mean <= target),  # type: ignore[union-attr]
            key=lambda p: (p.risk.mean, p.accuracy.mean),  # type: ignore[union-attr]
        )
        best = meeting[0] if meeting else None
        flags: list[str] = []
        if best is not None:
            accuracy, risk = best.accuracy, best.risk
            assert isinstance(accuracy, ReplicateMean) and isinstance(risk, ReplicateMean)
            if accuracy.high is not None and accuracy.high > target:
                flags.append("its accuracy interval crosses the target")
            if risk.high is not None and risk.high > ceiling:
                flags.append("its risk interval crosses the ceiling")
        out.append(
            Choice(
                target, best, meeting[1] if len(meeting) > 1 else None, len(meeting), tuple(flags)
            )
        )
    return out


def accuracy_targets(points: Sequence[FrontierPoint]) -> list[float]:
    """Round targets (1, 2, 5 × a power of ten) across the measured mean accuracies: from the
    last below the smallest positive one (which only a setting as accurate meets) to the first
    at or above the largest."""
    values = [p.accuracy.mean for p in points if p.placed and p.accuracy.mean > 0]  # type: ignore[union-attr]
    if not values:
        return []
    low, high = math.floor(math.log10(min(values))) - 1, math.ceil(math.log10(max(values)))
    steps = [m * 10.0**e for e in range(low, high + 1) for m in (1, 2, 5)]
    first = max(i for i, t in enumerate(steps) if t < min(values))
    last = min(i for i, t in enumerate(steps) if t >= max(values))
    return steps[first : last + 1]


TIDY_SCHEMA = {
    "release": "String",
    "entry": "String",
    "setting": "String",
    "replicate": "Int64",
    "population": "Int64",
    "mechanism": "String",
    "epsilon": "Float64",
    "metric": "String",
    "level": "String",
    "size_class": "String",
    "table": "String",
    "value": "Float64",
    "reason": "String",
    EVALUATION_ONLY: "Boolean",
}
"""The columns of ``results.parquet`` and ``results.csv`` (polars type names)."""


@functools.cache
def _t_quantile(n: int) -> float:
    """The 97.5% quantile of Student's t with ``n`` − 1 degrees of freedom (one per ``n``:
    scipy's is slow to call once per figure)."""
    from scipy import stats

    return float(stats.t.ppf(0.975, n - 1))


def replicate_interval(mean: float, sd: float | None, n: int) -> dict[str, float | None]:
    """The 95% t-interval of a mean of ``n`` replicates with standard deviation ``sd`` (none
    for a single replicate)."""
    if n < 2 or sd is None:
        return {"low": None, "high": None}
    half = _t_quantile(n) * sd / math.sqrt(n)
    return {"low": mean - half, "high": mean + half}
