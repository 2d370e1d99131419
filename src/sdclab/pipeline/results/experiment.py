"""An experiment's results: its population and every release's evaluation, with where each
release sits in its sweep; ``results.json`` and the tidy ``results.parquet`` are written from
them."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sdclab.core.figures import NotMeasured, Value, as_json, fields_json
from sdclab.pipeline.results.evaluation import Evaluation
from sdclab.pipeline.results.figure import SCHEMA_VERSION, Figure, lookup, number
from sdclab.pipeline.results.truth import EVALUATION_ONLY, marked, metric_is_evaluation_only

if TYPE_CHECKING:
    import polars as pl


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
    by default (:func:`sdclab.pipeline.census_view.census_view`)."""

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
        return lookup(self.releases, title, "release")

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
