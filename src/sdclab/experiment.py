"""Experiments: one TOML file names a population, mechanisms and attacks; one command runs them all.

```toml
[population]
persons = 50000          # a synthetic population ...
seed = 2010
# path = "pop/"          # ... or a population directory

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "psa"
settings = { rate = "0.05" }

[attacks]
reconstruct = true
variability = true
attackers = ["census", "commercial"]

[match]                  # optional: every mechanism with a common-axis ε at these values
values = [1, 4, 16]

[report]                 # optional: what the frontier plots
accuracy = "compared.mae_nonempty"
level = "tract"
```

Every step writes into ``DIR/steps/<step>-<digest>/``, where the digest covers the step's own
settings and the digests of its inputs; a step whose directory exists is reused, so re-running an
experiment (or extending it by one mechanism) redoes only what changed. ``DIR/results.json`` and
``DIR/report.html`` gather the figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import re
import shutil
import stat
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sdclab import __version__, api, matching, protection
from sdclab.attacks import linkage
from sdclab.attacks.reconstruction import DRAWS, NODE_LIMIT
from sdclab.attacks.reconstruction_files import METRICS_FILE, write_reconstruction
from sdclab.census.model import Census
from sdclab.census_view import NO_VARIABILITY, census_view, declared_summary
from sdclab.censuses import BUILT_IN, census_named
from sdclab.digest import frames_digest
from sdclab.errors import InputError
from sdclab.evaluation import block_size_counts
from sdclab.execution import Executor
from sdclab.fileio import (
    OUTPUT_MARKER,
    Modes,
    atomic_directory,
    atomic_file,
    check_replaceable,
    read_json_object,
    read_settings_file,
    read_toml,
    remove_path,
    restrict_tree,
    write_json,
    write_marker,
    write_parquet,
)
from sdclab.population import Population
from sdclab.population.bootstrap import bootstrap
from sdclab.population.io import TABLES, read_population, source_modes, table_file, write_population
from sdclab.population.synth import GENERATOR_VERSION, build_report, check_version, synthesize
from sdclab.population.synth_geography import GeographyCounts
from sdclab.protection import MECHANISMS
from sdclab.protection.base import EXPECTED, did_you_mean, shown
from sdclab.randomness import MAX_SEED, drew_from_stream
from sdclab.release import Release, write_release
from sdclab.report import render_report
from sdclab.results import (
    ExperimentResult,
    FrontierAxes,
    NotMeasured,
    PopulationSummary,
    ReconstructionResult,
    Reidentification,
    ReleaseResult,
    Sweep,
    VulnerableGroup,
    declared_axes,
    no_risk_analysis,
)

RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
EXPERIMENT_KIND = "experiment"
TIDY_FILES = ("results.parquet", "results.csv")
EXPERIMENT_ENTRIES = ["steps", RESULTS_FILE, *TIDY_FILES, REPORT_FILE]
"""What an experiment's directory may hold besides its marker."""
MAX_POINTS = 100
"""Values of a range at most."""
MAX_REPLICATES = 100
MAX_POPULATION_REPLICATES = 20
"""Population replicates at most (each runs every release again)."""
MAX_STEP_NAME = 120
"""Characters of a step's title kept in its directory's name."""
MAX_RELEASES = 1000
"""Releases an experiment may make at most (its sweeps' grids times their replicates, times the
population replicates)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


GEOGRAPHY = ("tracts", "counties", "states")


class PopulationSpec(_Strict):
    """A synthetic population (persons, seed), a population directory (path), or the persons'
    file (path) of a declared census (census)."""

    persons: int | None = Field(None, ge=100, le=100_000_000)
    seed: int = Field(2010, ge=0, le=MAX_SEED)
    path: str | None = None
    census: str | None = None
    """A census file (docs/census.md) or a built-in census's name; with a census other than the
    US 2010 one, ``path`` is its persons' file (CSV or Parquet)."""
    tracts: int | None = Field(None, ge=1)
    counties: int | None = Field(None, ge=1)
    states: int | None = Field(None, ge=1)
    """A synthetic population's numbers of tracts, counties and states (else by its size)."""
    generator: str = GENERATOR_VERSION
    """The synthetic generator's version (1.2 reproduces studies made before 2.0)."""
    replicates: int = Field(1, ge=1, le=MAX_POPULATION_REPLICATES)
    """Populations the experiment runs every release on: the first as given, the others further
    synthetic seeds or bootstrap replicates of the population read (:func:`population_seed`,
    :func:`sdclab.population.bootstrap.bootstrap`), so that intervals cover the population as
    well as the noise."""

    @field_validator("generator")
    @classmethod
    def _known_generator(cls, version: str) -> str:
        check_version(version)
        return version

    def geography(self) -> GeographyCounts:
        return GeographyCounts(self.tracts, self.counties, self.states)

    def source(self) -> dict[str, Any]:
        """Where the population came from: a directory, or the synthetic generator's settings
        (a seed is not recorded for a population that was read, since none made it)."""
        if self.declared:
            return {"census": self.census, "path": self.path}
        if self.path is not None:
            bootstrap = {"replicates": self.replicates, "seed": self.seed}
            return {"path": self.path, **(bootstrap if self.replicates > 1 else {})}
        return {
            **({"replicates": self.replicates} if self.replicates > 1 else {}),
            "persons": self.persons,
            "seed": self.seed,
            "generator": self.generator,
            **self.geography().to_dict(),
        }

    def digested(self) -> dict[str, Any]:
        """What the population step's digest covers (the geography counts only when given, so
        that an earlier experiment's steps stay valid)."""
        given = self.geography().to_dict()
        return {
            k: v
            for k, v in self.model_dump().items()
            if (k not in GEOGRAPHY or k in given)
            and k != "replicates"
            and (k != "census" or self.census is not None)
        }

    @property
    def declared(self) -> bool:
        """Whether the population is the persons' file of a census other than the US 2010 one."""
        return self.census is not None and self.census not in BUILT_IN

    @model_validator(mode="after")
    def _one_source(self) -> PopulationSpec:
        if self.declared and self.path is None:
            raise ValueError("census: give path, the census's persons' file")
        if self.declared and self.replicates > 1:
            raise ValueError(
                "replicates: bootstrap replicates resample the US 2010 census's units; a "
                "declared census runs on the persons' file given (replicates = 1)"
            )
        if (self.persons is None) == (self.path is None):
            raise ValueError("give either persons (synthetic) or path (a population directory)")
        if self.path is not None and self.geography().to_dict():
            raise ValueError("tracts, counties and states shape a synthetic population only")
        if self.path is not None and "generator" in self.model_fields_set:
            raise ValueError("generator makes a synthetic population only")
        if self.persons is not None:
            self.geography().check(self.persons)
        return self


Scalar = str | int | float | bool


class Range(_Strict):
    """Values of a numeric setting from ``from`` to ``to`` in ``steps`` (both ends included),
    evenly spaced on a linear or a log scale."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    start: float = Field(alias="from")
    to: float
    steps: int = Field(ge=2, le=MAX_POINTS)
    scale: Literal["linear", "log"] = "linear"

    @model_validator(mode="after")
    def _positive_on_a_log_scale(self) -> Range:
        if self.scale == "log" and min(self.start, self.to) <= 0:
            raise ValueError("a log scale needs from and to above 0")
        return self

    def values(self) -> list[int | str]:
        """The values as settings take them: whole numbers where every value is one, else
        decimal strings of 4 significant digits (what the titles show is what is run)."""
        if self.scale == "log":
            points = np.geomspace(self.start, self.to, self.steps)
        else:
            points = np.linspace(self.start, self.to, self.steps)
        if np.allclose(points, np.round(points), rtol=1e-12, atol=0):  # 2 of 1.9999999999999996
            return [int(v) for v in np.round(points)]
        return [format(float(v), ".4g") for v in points]


class MechanismSpec(_Strict):
    name: str
    settings: dict[str, Scalar | list[Scalar] | Range] = Field(default_factory=dict)
    """A value, or a list or a range of values to sweep (the grid of every swept setting)."""
    seed: int = Field(1, ge=0, le=MAX_SEED)
    label: str | None = Field(None, pattern=r"^[\w.%+-]{1,64}$")
    replicates: int = Field(1, ge=1, le=MAX_REPLICATES)
    """Independent runs of every point, each with its own seed (the first: ``seed``)."""

    @field_validator("settings", mode="before")
    @classmethod
    def _ranges_in_words(cls, settings: Any) -> Any:
        """A table of values is a :class:`Range`, its problems said in its own terms; a list
        holds at least one value."""
        if not isinstance(settings, dict):
            return settings
        out = dict(settings)
        for key, value in settings.items():
            if isinstance(value, list) and not value:
                raise ValueError(f"{key}: an empty list sweeps nothing; give at least one value")
            if not isinstance(value, dict):
                continue
            try:
                out[key] = Range.model_validate(value)
            except ValidationError as exc:
                first = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
                if first["type"] == "extra_forbidden":
                    raise ValueError(
                        f"{key}: unknown key {first['loc'][-1]} of a range (from, to, steps, scale)"
                    ) from None
                raise ValueError(
                    experiment_problem({**first, "loc": (key, *first["loc"])})
                ) from None
        return out

    @property
    def title(self) -> str:
        return self.label or self.name

    def swept(self) -> dict[str, list[Scalar]]:
        """The swept settings and their values, in the file's order."""
        out: dict[str, list[Scalar]] = {}
        for key, value in self.settings.items():
            if isinstance(value, Range):
                out[key] = list(value.values())
            elif isinstance(value, list):
                out[key] = list(value)
        return out

    @model_validator(mode="after")
    def _distinct_values(self) -> MechanismSpec:
        """Every swept value once (a repeated one, or a range whose values round alike, would
        make two releases of one title)."""
        for key, values in self.swept().items():
            counts = Counter(str(v) for v in values)
            twice = sorted(v for v, n in counts.items() if n > 1)
            if twice:
                raise ValueError(
                    f"settings.{key} holds {', '.join(twice)} more than once: sweep distinct "
                    "values (a range's values are rounded to 4 significant digits)"
                )
        return self

    def count(self) -> int:
        """How many releases :meth:`points` makes without a match: the product of the swept
        settings' numbers of values times the replicates, counted without making them."""
        return math.prod(len(values) for values in self.swept().values()) * self.replicates

    def first_settings(self) -> dict[str, Scalar]:
        """The settings of the entry's first point (as :meth:`points` makes them): every swept
        setting at its first value."""
        fixed = {k: v for k, v in self.settings.items() if not isinstance(v, list | Range)}
        return {**fixed, **{k: values[0] for k, values in self.swept().items()}}

    def points(self, common: Sequence[float] = (), census: Census | None = None) -> list[Point]:
        """Every (setting, replicate) of the entry: the grid of its swept settings, each run
        ``replicates`` times; with ``common`` values, the grid once per common-axis ε, the
        budget set to reach it (:mod:`sdclab.matching`)."""
        swept = self.swept()
        fixed = {k: v for k, v in self.settings.items() if k not in swept}
        assert all(not isinstance(v, (list, Range)) for v in fixed.values())
        out = []
        axis: list[float | None] = list(common) or [None]
        for target, values in itertools.product(axis, itertools.product(*swept.values())):
            varied: dict[str, Scalar] = dict(zip(swept, values, strict=True))
            settings: dict[str, Scalar] = {**fixed, **varied}  # type: ignore[dict-item]
            if target is not None:
                settings |= matching.matched(self.name, settings, target, census).settings
                varied = {MATCHED: format(target, "g"), **varied}
            name = self.title + "".join(
                f"{'@' if i == 0 else ','}{k}={v}" for i, (k, v) in enumerate(varied.items())
            )
            for replicate in range(1, self.replicates + 1):
                out.append(
                    Point(
                        title=name + (f"#{replicate}" if self.replicates > 1 else ""),
                        entry=self.title,
                        setting=name,
                        name=self.name,
                        settings=settings,
                        seed=replicate_seed(self.seed, replicate),
                        varied={k: str(v) for k, v in varied.items()},
                        replicate=replicate,
                    )
                )
        return out


def population_seed(seed: int, population: int) -> int:
    """The seed of population replicate ``population``: the given seed for the first, a derived
    one for the others (the generator's seed, or the bootstrap's)."""
    return seed if population == 1 else replicate_seed(seed, population, stream=1)


def on_population(point: Point, population: int) -> Point:
    """``point`` run on population replicate ``population`` (the first: ``point`` itself):
    ``/p2`` ends its title, and its seed is derived from the point's and the population's, so
    that no two populations share a noise draw."""
    if population == 1:
        return point
    return replace(
        point,
        title=f"{point.title}/p{population}",
        seed=replicate_seed(point.seed, population, stream=2),
        population=population,
    )


def replicate_seed(seed: int, replicate: int, stream: int = 0) -> int:
    """The seed of a replicate: the entry's own for the first, a derived one for the others (and
    for every replicate of another ``stream``: population seeds, and noise on later populations)."""
    if replicate == 1 and stream == 0:
        return seed
    entropy = [seed, replicate] if stream == 0 else [seed, replicate, stream]
    high, low = (int(w) for w in np.random.SeedSequence(entropy).generate_state(2, np.uint64))
    return (high << 64 | low) & MAX_SEED


@dataclass(frozen=True)
class Point:
    """One release of an experiment: a mechanism entry at one setting of its sweep, one
    replicate."""

    title: str
    """Unique in the experiment: ``topdown-dhc@rho=4#2`` (the entry's title alone when it
    sweeps nothing and runs once)."""
    entry: str
    """The entry's title."""
    setting: str
    """The title without the replicate: what the replicates of a setting share."""
    name: str
    settings: dict[str, Scalar]
    seed: int
    varied: dict[str, str]
    replicate: int
    population: int = 1
    """The population replicate it runs on (``/p2`` ends the title of the second)."""


class AttackSpec(_Strict):
    reconstruct: bool = True
    variability: bool = True
    naive: bool = Field(
        True,
        description="also reconstruct naively (every count exact) where the release is noisy, "
        "for its agreement beside the noise-aware attack's",
    )
    attackers: list[Literal["census", "commercial"]] = ["census", "commercial"]
    block_only: bool = Field(
        False,
        description="also reconstruct every release from its block tables alone (the attack "
        "paper's rHDF_b) and reidentify it, reported apart (block_only_reidentification)",
    )
    workers: int | None = Field(None, ge=1)
    executor: str | None = Field(None, description="local, dask://HOST:PORT or dask-local[:N]")
    seed: int = Field(0, ge=0, le=MAX_SEED)
    time_limit: float = Field(300.0, gt=0)
    node_limit: int | None = Field(
        NODE_LIMIT,
        ge=1,
        description="branch-and-bound nodes per integer program of a reconstruction: work, not "
        "wall time, so that a rerun reproduces the results (a tract stopped by the time limit "
        "first is flagged in the report)",
    )

    def solving(self) -> dict[str, Any]:
        """How every reconstruction of the experiment is solved: where, seeded how, within
        which limits."""
        return {
            "workers": self.workers,
            "executor": self.executor,
            "seed": self.seed,
            "time_limit": self.time_limit,
            "node_limit": self.node_limit,
        }


class ReportSpec(_Strict):
    """What the report's frontier plots: an accuracy figure (lower is better) at a level, and
    for a figure given per table, the table; against the headline risk of an attacker. The
    defaults come from the census (validation context ``census``; :meth:`axes`)."""

    accuracy: str | None = None
    """Default: ``compared.mae_nonempty`` (the US P12), ``accuracy.mae_nonempty`` of the census's
    compared table (:func:`sdclab.census_view.census_view`) for a declared census."""
    level: str | None = None
    """Default: the level of the reconstruction's programs (the US tract)."""
    table: str | None = None
    attacker: Literal["census", "commercial"] = "census"
    persons: Literal["all", "nonmodal", "vulnerable"] | None = None
    """Default: the vulnerable group (the US 2010 census), all persons (a declared census)."""
    risk_ceiling: float = Field(0.0, allow_inf_nan=False)
    """The choose table offers no setting whose mean headline risk (percentage points beyond the
    best baseline) exceeds it: 0, no better than the statistics alone, by default."""

    @field_validator("level")
    @classmethod
    def _a_level_of_the_census(cls, level: str | None, info: ValidationInfo) -> str | None:
        levels = _census_in(info).geography.levels
        if level is not None and level not in levels:
            raise ValueError(
                f"expected one of {', '.join(levels)}, got {shown(level)}"
                f"{did_you_mean(level, list(levels))}"
            )
        return level

    @model_validator(mode="after")
    def _axes_the_frontier_can_plot(self, info: ValidationInfo) -> ReportSpec:
        census = _census_in(info)
        self.axes(census)  # refused in words: a signed or unknown figure, a table given or missing
        if self.table is not None and self.table not in census.tables:
            what = "a catalogue table" if census is _us2010() else f"a table of {census.name}"
            raise ValueError(f"table {self.table!r} is not {what}")
        return self

    def axes(self, census: Census | None = None) -> FrontierAxes:
        """The frontier's axes over ``census`` (default: the US 2010 census)."""
        if census is None or census is _us2010():
            return FrontierAxes(
                accuracy=self.accuracy or "compared.mae_nonempty",
                level=self.level or "tract",
                table=self.table,
                risk=f"reidentification.{self.attacker}.headline.{self.persons or 'vulnerable'}"
                ".points",
                risk_ceiling=self.risk_ceiling,
            )
        return declared_axes(
            census_view(census),
            self.accuracy,
            self.level,
            self.table,
            f"{self.attacker}.{self.persons or 'all'}",
            self.risk_ceiling,
        )


def _census_in(info: ValidationInfo) -> Census:
    """The census an experiment is validated for (validation context ``census``; default: the
    US 2010 census)."""
    census = (info.context or {}).get("census")
    return census if census is not None else _us2010()


def _us2010() -> Census:
    """The US 2010 census (its tables are the catalogue)."""
    return BUILT_IN["us2010"]()


MATCHED = "ε"
"""How a matched release's title names its common-axis ε: ``topdown@ε=4``."""


class MatchSpec(_Strict):
    """Run every mechanism that has a common-axis ε at the same values of it."""

    axis: Literal["epsilon@1e-10"] = "epsilon@1e-10"
    """ε at δ = 10⁻¹⁰ for one person's record changed (the only axis)."""
    values: list[float] | Range

    @field_validator("values", mode="before")
    @classmethod
    def _range_in_words(cls, values: Any) -> Any:
        return Range.model_validate(values) if isinstance(values, dict) else values

    def targets(self) -> list[float]:
        values = self.values.values() if isinstance(self.values, Range) else self.values
        out = [float(v) for v in values]
        if not out or min(out) <= 0:
            raise ValueError("give one or more values of ε above 0")
        shown = [format(v, "g") for v in out]  # as the titles show them
        if len(set(shown)) != len(shown):
            raise ValueError("every value of ε once (to 6 significant digits)")
        return out


class Experiment(_Strict):
    population: PopulationSpec
    mechanisms: list[MechanismSpec] = Field(min_length=1)
    attacks: AttackSpec = Field(default_factory=lambda: AttackSpec.model_validate({}))
    report: ReportSpec = Field(default_factory=lambda: ReportSpec.model_validate({}))
    match: MatchSpec | None = None
    _census: Census | None = PrivateAttr(default=None)

    @property
    def census(self) -> Census:
        """The census of the population (the US 2010 census unless ``population.census`` names
        another)."""
        return self._census if self._census is not None else _us2010()

    @model_validator(mode="after")
    def _bind_census(self, info: ValidationInfo) -> Experiment:
        """Bind the declared census (validation context ``census``, else read from
        ``population.census``) and refuse, in one line naming the setting, what runs on the US
        2010 census only (:func:`us_only_settings`)."""
        if not self.population.declared:
            return self
        census = (info.context or {}).get("census")
        self._census = census if census is not None else census_named(str(self.population.census))
        given = {
            "attacks": self.attacks.model_fields_set,
            "report": self.report.model_fields_set,
        }
        problem = us_only_settings(self, self._census, given)
        if problem is not None:
            raise InputError(problem)
        try:
            self.report.axes(self._census)
        except ValueError as exc:
            raise InputError(f"report: {exc}") from None
        return self

    def unmatched(self) -> dict[str, str]:
        """The entries a match leaves as they are, with the reason (none without a match)."""
        if self.match is None:
            return {}
        out = {}
        for m in self.mechanisms:
            why = matching.unmatchable(m.name, m.first_settings(), self._census)
            if why is not None:
                out[m.title] = why.reason
        return out

    def points_of(self, entry: MechanismSpec) -> list[Point]:
        """The entry's releases: at every matched ε where the experiment matches and the
        mechanism can be matched."""
        if self.match is None or entry.title in self.unmatched():
            return entry.points()
        return entry.points(self.match.targets(), self._census)

    def points(self) -> list[Point]:
        return [p for m in self.mechanisms for p in self.points_of(m)]

    @model_validator(mode="after")
    def _known_mechanisms(self) -> Experiment:
        titles = [m.title for m in self.mechanisms]
        if len(set(titles)) != len(titles):
            raise ValueError("two mechanisms share a name: give them distinct labels")
        populations = self.population.replicates
        releases = sum(m.count() for m in self.mechanisms) * populations  # before any is made
        if releases > MAX_RELEASES:
            raise ValueError(
                f"the sweeps make {releases:,} releases, more than {MAX_RELEASES:,}: "
                "sweep fewer values or run fewer replicates"
            )
        if self.match is not None:
            targets = self.match.targets()
            unmatched = self.unmatched()
            releases = populations * sum(
                m.count() * (1 if m.title in unmatched else len(targets)) for m in self.mechanisms
            )  # before any budget is solved for
            if releases > MAX_RELEASES:
                raise ValueError(
                    f"the sweeps and the match make {releases:,} releases, more than "
                    f"{MAX_RELEASES:,}: match fewer values or sweep fewer"
                )
        for m in self.mechanisms:
            for point in m.points():
                protection.get(m.name).parse(point.settings, self._census)
        if self.match is not None:
            for m in self.mechanisms:
                entry = protection.get(m.name)
                if m.title in unmatched or entry.rescale is None:
                    continue
                for point in m.points():
                    budgets = set(entry.rescale(entry.parse(point.settings), Fraction(1)))
                    clash = sorted(budgets & set(m.swept()))
                    if clash:
                        raise ValueError(
                            f"mechanisms: {m.title} sweeps {', '.join(clash)} and the experiment "
                            f"matches it on {self.match.axis}: sweep one or the other"
                        )
                    given = sorted(budgets & set(m.settings))
                    if given:
                        raise ValueError(
                            f"mechanisms: {m.title} sets {', '.join(given)} and the experiment "
                            f"matches it on {self.match.axis}, which would set "
                            f"{'it' if len(given) == 1 else 'them'} instead: remove "
                            f"{', '.join(given)} (the match chooses the budget)"
                        )
        for point in self.points():
            protection.get(point.name).parse(point.settings, self._census)
        # a bad executor or too many workers is an input error before any work
        Executor.parse(self.attacks.executor, self.attacks.workers)
        return self


def load_experiment(path: Path) -> Experiment:
    """Read and validate an experiment file; any problem is one clear InputError."""
    data = read_toml(Path(path), "experiment file")
    return parse_experiment(data, str(path), Path(path).parent)


def parse_experiment(data: Any, source: str, base: Path) -> Experiment:
    """Validate an experiment's content (``source`` names it in messages; a relative
    ``population.path`` is taken from ``base``)."""
    infinite = first_non_finite(data)
    if infinite is not None:
        loc, value = infinite
        error = {"loc": loc, "type": "finite_number", "input": value}
        raise InputError(f"{source}: {experiment_problem(error)}")
    population = data.get("population") if isinstance(data, dict) else None
    census = None
    if isinstance(population, dict) and isinstance(population.get("census"), str):
        population = data["population"] = dict(population)
        census = _declared_census(population, source, base)
    if census is None and isinstance(population, dict) and isinstance(population.get("path"), str):
        population = data["population"] = dict(population)
        shown = repr(population["path"])
        try:
            population["path"] = shown = str((base / population["path"]).resolve())
            is_dir = Path(population["path"]).is_dir()
        except (OSError, ValueError):  # a NUL character, a name too long for the system
            is_dir = False
        if not is_dir:
            raise InputError(f"{source}: population.path: {shown} is not a directory")
        try:  # a directory without the tables (/proc/self) is refused before anything is read
            for table in TABLES:
                table_file(Path(shown), table)
        except InputError as exc:
            raise InputError(f"{source}: population.path: {exc}") from None
    try:
        return Experiment.model_validate(data, context={"census": census})
    except ValidationError as exc:
        # a misspelt key first: the likeliest cause of a missing one
        first = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        raise InputError(f"{source}: {experiment_problem(first)}") from None
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


def _declared_census(population: dict[str, Any], source: str, base: Path) -> Census | None:
    """The census ``population.census`` names (a file taken from ``base``), with its persons'
    file ``population.path`` resolved and checked to be a file (None: the US 2010 census)."""
    name = population["census"]
    if name in BUILT_IN:
        return None
    population["census"] = str((base / name).resolve())
    try:
        census = census_named(population["census"])
    except InputError as exc:
        raise InputError(f"{source}: population.census: {exc}") from None
    path = population.get("path")
    if isinstance(path, str):
        try:
            population["path"] = str((base / path).resolve())
            is_file = Path(population["path"]).is_file()
        except (OSError, ValueError):  # a NUL character, a name too long for the system
            is_file = False
        if not is_file:
            raise InputError(
                f"{source}: population.path: {population['path']} is not a file (census "
                f"{census.name}'s persons, CSV or Parquet)"
            )
    return census


def first_non_finite(data: Any) -> tuple[tuple[str | int, ...], float] | None:
    """Where the first number that is not finite (TOML writes ``inf`` and ``nan``) lies in an
    experiment's content, and the number: no setting of an experiment is infinite."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return loc, value
        if isinstance(value, dict):
            items: list[tuple[str | int, Any]] = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            continue
        stack.extend(((*loc, key), item) for key, item in reversed(items))
    return None


def experiment_problem(error: Any) -> str:
    """One problem of an experiment file in the project's words: where (a dotted key), what was
    given and what was expected, with a "did you mean" for a misspelt key or choice."""
    loc = error["loc"]
    # entries of a list counted from 1, as a reader counts the [[mechanisms]] of the file
    where = "".join(f"[{p + 1}]" if isinstance(p, int) else f".{p}" for p in loc)
    where = where.removeprefix(".") or "experiment"
    kind = error["type"]
    if kind == "extra_forbidden":
        keys = list(_model_at(loc[:-1]).model_fields)
        return (
            f"unknown key {where}{did_you_mean(str(loc[-1]), keys)} "
            f"(keys {'here' if loc[:-1] else 'of an experiment'}: {', '.join(keys)})"
        )
    if kind == "missing":
        return f"missing key {where}"
    if kind in ("value_error", "assertion_error"):
        return f"{where}: {str(error['msg']).removeprefix('Value error, ')}"
    given = shown(error.get("input"))
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        hint = did_you_mean(str(error.get("input")), choices)
        return f"{where}: expected one of {', '.join(choices)}, got {given}{hint}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = error.get("ctx", {})
        words = {"gt": "above", "ge": "at least", "lt": "below", "le": "at most"}
        limit = next(f"{words[k]} {v}" for k, v in bound.items() if k in words)
        return f"{where}: expected a number {limit}, got {given}"
    if kind == "too_short":
        return f"{where}: expected at least one entry"
    if kind == "string_pattern_mismatch":
        return f"{where}: expected letters, digits, '.', '%', '+' or '-' (1 to 64), got {given}"
    expected = EXPECTED.get(kind)
    if expected is None:
        text = str(error["msg"]).rstrip(".")
        return f"{where}: {text[:1].lower()}{text[1:]}, got {given}"
    expected = {"whole": "a whole number", "number": "a number"}.get(expected, expected)
    return f"{where}: expected {expected}, got {given}"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel]:
    """The model of the experiment file that holds the keys at ``loc``."""
    model: type[BaseModel] = Experiment
    for part in loc:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[str(part)].annotation
        inner = [
            a for a in (annotation, *getattr(annotation, "__args__", ())) if isinstance(a, type)
        ]
        model = next((a for a in inner if issubclass(a, BaseModel)), model)
    return model


STEP_FORMAT = 4
"""Version of what a step holds, in every digest so that a step made by older code is made
again (2: releases carry their mechanism's noise publication, which the noise-aware attack
reads; reconstructions rank their records; 3: releases record whether they protect,
reconstructions which tracts a limit stopped, reidentifications confirm in two passes and score
the vulnerable group; 4: accuracy counts withheld cells at their true counts, reidentifications
link records known to their agebin on agebin only, draw attacker files from data-defined persons
and count the links each confirmation pass confirms)."""


def _digest(*parts: Any) -> str:
    """Digest of a step's settings and inputs (and of the sdclab version and step format that
    compute it)."""
    text = json.dumps([__version__, STEP_FORMAT, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _settings_files_digest(settings: dict[str, Any]) -> dict[str, str]:
    """SHA-256 of every file a setting names (a strategy, an iteration file, a p-table), so that
    a step is redone when such a file changes, not only when its path does."""
    digests = {}
    for key, value in settings.items():
        if not isinstance(value, str):
            continue
        path = Path(value)
        with contextlib.suppress(OSError, ValueError):  # not a path, or not a file
            if path.is_file():
                digests[key] = hashlib.sha256(read_settings_file(path, f"{key} file")).hexdigest()
    return digests


def _file_digest(spec: PopulationSpec) -> str:
    """SHA-256 of a declared census's persons' file."""
    digest = hashlib.sha256()
    try:
        with Path(str(spec.path)).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        reason = exc.strerror or exc
        raise InputError(f"population.path: {spec.path} cannot be read ({reason})") from None
    return digest.hexdigest()


def _directory_digest(path: str | None) -> str | None:
    """SHA-256 of the names and contents of a population directory's files (None: synthetic)."""
    if path is None:
        return None
    digest = hashlib.sha256()
    for file in sorted(Path(path).iterdir()):
        if file.is_file():
            digest.update(file.name.encode() + b"\0")
            try:
                with file.open("rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
            except OSError as exc:
                raise InputError(
                    f"population.path: {file} cannot be read ({exc.strerror or exc})"
                ) from None
    return digest.hexdigest()


@dataclass(frozen=True)
class Step:
    """One step of an experiment: what it makes, for which mechanism, from which inputs."""

    title: str
    """What it is about: ``release:topdown-dhc``, ``reidentify:psa:census``."""
    digest: str
    """Of its own settings and of the digests of its inputs."""

    def directory(self, root: Path) -> Path:
        """``steps/<title>-<digest>``, the title made safe for a file name (a swept value may
        hold any character; the digest keeps names distinct)."""
        safe = re.sub(r"[^\w.%+@=,#:-]", "_", self.title)[:MAX_STEP_NAME]
        return root / "steps" / f"{safe}-{self.digest}"


@dataclass
class StepCache:
    """The finished steps of an experiment directory: a step found complete is reused."""

    root: Path
    say: Callable[[str], None]
    modes: Modes | None = None
    """The most a step may allow: the source population's (None: a synthetic population)."""
    reused: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)
    """The step directories this run wrote (removed again if the run fails on bad input)."""

    def get(self, step: Step, make: Callable[[Path], None]) -> Path:
        """The directory of ``step``, made by ``make`` unless an earlier run left it complete."""
        target = step.directory(self.root)
        if (target / ".complete").exists():
            self.reused.append(step.title)
            return target
        start = time.perf_counter()
        self.say(f"{step.title} ...")
        with atomic_directory(target, self.modes) as tmp:
            make(tmp)
            (tmp / ".complete").write_text("")
        self.computed.append(step.title)
        self.made.append(target)
        self.say(f"{step.title}: {time.perf_counter() - start:.1f} s")
        return target


def _make_population(spec: PopulationSpec, replicate: int, tmp: Path) -> None:
    """Population replicate ``replicate``: the first as given, the others another synthetic seed
    or a bootstrap replicate of the population read."""
    seed = population_seed(spec.seed, replicate)
    if spec.path is not None:
        read = read_population(Path(spec.path))
        write_population(read if replicate == 1 else bootstrap(read, seed), tmp)
    else:
        population = synthesize(spec.persons or 0, seed, spec.geography(), spec.generator)
        report = build_report(population, seed, spec.geography(), spec.generator)
        write_population(population, tmp, {"synth.json": report})


def _make_release(truth: Population, m: Point, tmp: Path) -> None:
    write_release(api.protect(truth, m.name, seed=m.seed, **m.settings), tmp / "release")


def _make_risk(release: Release, truth: Population, tmp: Path) -> None:
    analysis = protection.get(release.mechanism).risk_analysis
    assert analysis is not None, "only a mechanism with a risk analysis has this step"
    write_json(analysis(release, truth), tmp / METRICS_FILE)


def _make_reconstruction(
    release: Release, attacks: AttackSpec, knowledge: str, tmp: Path, block_only: bool = False
) -> None:
    """A reconstruction step: the attack of record (with variability and ranked records), the
    naive one beside it, or the one from the block tables alone (``block_only``: reidentified
    only, so neither measured for variability, which reads the block tables either way, nor
    ranked)."""
    main = knowledge == "published" and not block_only
    result = api.reconstruct(
        release,
        **attacks.solving(),
        variability=attacks.variability and main,
        knowledge=knowledge,
        draws=DRAWS if main else 0,
        block_only=block_only,
    )
    write_reconstruction(
        tmp / "recon", result, result.to_dict(), result.solvar, census=release.census
    )


VULNERABLE_FILE = "vulnerable.parquet"
"""The vulnerable persons' ids in their step (confidential, as every step is)."""


def _make_vulnerable_group(truth: Population, attacks: AttackSpec, tmp: Path) -> None:
    group = api.vulnerable_group(truth, **attacks.solving())
    write_parquet(pl.DataFrame({"person_id": group.persons}), tmp / VULNERABLE_FILE)
    write_json(group.to_dict(), tmp / METRICS_FILE)


def read_vulnerable_group(step: Path) -> VulnerableGroup:
    """The vulnerable group a step holds (a step this run or an earlier one made)."""
    figures = read_json_object(step / METRICS_FILE)
    persons = pl.read_parquet(step / VULNERABLE_FILE)["person_id"].to_numpy()
    return VulnerableGroup(
        persons=persons.astype(np.int64),
        solvar0_blocks=int(figures["solvar0_blocks"]),
        populated_blocks=int(figures["populated_blocks"]),
    )


def _make_reidentification(
    recon: ReconstructionResult,
    release: Release,
    truth: Population,
    preset: str,
    seed: int,
    vulnerable: VulnerableGroup | None,
    tmp: Path,
) -> None:
    result = api.reidentify(
        recon, release, truth, attacker=preset, seed=seed, vulnerable=vulnerable
    )
    assert result.links is not None
    write_parquet(result.links, tmp / "links.parquet")
    write_json(result.to_dict(), tmp / METRICS_FILE)


def us_only_settings(
    experiment: Experiment, census: Census, given: Mapping[str, set[str]]
) -> str | None:
    """The first setting of ``experiment`` over the declared ``census`` that runs on the US 2010
    census only, in one line naming it (None: none). ``given``: the keys each table of the file
    gave (a default that would turn on a US-only step, such as ``attacks.variability``, is not
    refused: that step is n/a with the reason)."""
    from sdclab import protection

    for number, entry in enumerate(experiment.mechanisms, 1):
        refused = protection.get(entry.name).refuses(census)
        if refused is not None:
            return f"mechanisms[{number}]: {refused}"
    attacks = experiment.attacks
    if attacks.variability and "variability" in given["attacks"]:
        return (
            f"attacks.variability: {NO_VARIABILITY}, not census {census.name}: leave it out "
            "(the report then says n/a) or set it to false"
        )
    if attacks.block_only:
        return (
            "attacks.block_only: the reconstruction from the block tables alone is the US 2010 "
            f"attack's, not census {census.name}'s"
        )
    return None


def progress(done: int, total: int, elapsed: float, title: str) -> str:
    """``[k/N] title``, with the time so far and, once a release is done, an estimate of the
    time left (the mean time of the releases done so far times those left)."""
    line = f"[{done + 1}/{total}] {title} — {_duration(elapsed)} elapsed"
    if done:
        line += f", about {_duration(elapsed / done * (total - done))} left"
    return line


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


NOTHING_TO_RECONSTRUCT = "the release publishes no person tables to reconstruct from"


class Runner:
    """Runs the steps of an experiment, reusing finished steps found on disk."""

    def __init__(
        self,
        experiment: Experiment,
        out: Path,
        say: Callable[[str], None],
        modes: Modes | None = None,
    ) -> None:
        self.experiment = experiment
        self.steps = StepCache(Path(out), say, modes)
        self.published: dict[tuple[str, str], str] = {}
        """The first replicate of every (setting, release tables) seen (digests in memory)."""
        self.vulnerable: tuple[VulnerableGroup, str] | None = None
        """The population's fixed vulnerable group and its step's digest, once made."""
        self.drew: dict[str, bool] = {}
        """Whether each release made so far drew from its random stream (by title)."""
        self.census = experiment.census
        self.declared = experiment.population.declared
        self.census_file = experiment.population.census
        if self.declared:  # solution variability is the US census's (its default turns it on)
            attacks = experiment.attacks.model_copy(update={"variability": False})
            self.experiment = experiment.model_copy(update={"attacks": attacks})

    def run(self) -> ExperimentResult:
        spec = self.experiment.population
        points = self.experiment.points()
        total = len(points) * spec.replicates
        releases: dict[str, ReleaseResult] = {}
        summaries = []
        began = time.perf_counter()
        for replicate in range(1, spec.replicates + 1):
            truth, pop_digest = self.population(replicate)
            self.vulnerable = self.vulnerable_group(truth, pop_digest)
            summaries.append(self.summary(truth, replicate))
            deterministic: dict[str, ReleaseResult] = {}
            """The first replicate of each setting whose mechanism drew nothing from its stream
            (on this population)."""
            for point in (on_population(p, replicate) for p in points):
                elapsed = time.perf_counter() - began
                self.steps.say(progress(len(releases), total, elapsed, point.title))
                first = deterministic.get(point.setting)
                if first is not None:  # the seed changes nothing: a replicate is the same release
                    releases[point.title] = replicate_of(first, point)
                    continue
                releases[point.title] = self.mechanism(point, truth, pop_digest)
                if not self.drew[point.title]:
                    deterministic[point.setting] = releases[point.title]
        return ExperimentResult(
            summaries[0],
            releases,
            tuple(self.steps.computed),
            tuple(self.steps.reused),
            population_replicates=tuple(summaries[1:]),
            census=census_view(self.census) if self.declared else None,
        )

    def population(self, replicate: int) -> tuple[Population, str]:
        """Population replicate ``replicate`` and its step's digest (the first's digest is what
        it was before there were replicates, so earlier steps stay valid). A declared census's
        persons are read from their file, not copied into a step."""
        spec = self.experiment.population
        if self.declared:
            digest = _digest("population", spec.digested(), self.census.digest, _file_digest(spec))
            return api.read_population(str(spec.path), census=self.census_file), digest
        parts = (spec.digested(), _directory_digest(spec.path))
        further = (replicate,) if replicate > 1 else ()
        digest = _digest("population", *parts, *further)
        step = Step("population" + (f":p{replicate}" if further else ""), digest)
        made = self.steps.get(step, partial(_make_population, spec, replicate))
        return read_population(made), digest

    def summary(self, truth: Population, replicate: int) -> PopulationSummary:
        """What the results say of population replicate ``replicate``."""
        spec = self.experiment.population
        if self.declared:
            return declared_summary(truth, spec.source())  # type: ignore[arg-type]
        source = spec.source()
        if replicate > 1:
            how = "bootstrap" if spec.path is not None else "seed"
            source = {**source, "replicate": replicate, how: population_seed(spec.seed, replicate)}
        return PopulationSummary(
            source=source,
            persons=truth.n_persons,
            units=truth.n_units,
            geography=truth.geography.summary,
            uniques=linkage.population_uniques(truth),
            block_sizes=block_size_counts(truth),
            vulnerable=(
                self.vulnerable[0].to_dict()
                if self.vulnerable is not None
                else NotMeasured("the experiment does not reconstruct (attacks.reconstruct)")
            ),
        )

    def vulnerable_group(
        self, truth: Population, pop_digest: str
    ) -> tuple[VulnerableGroup, str] | None:
        """The population's fixed vulnerable group and its step's digest, from the exact
        release reconstructed with variability (None when the experiment does not reconstruct)."""
        attacks = self.experiment.attacks
        if not attacks.reconstruct or self.declared:
            return None
        digest = _digest(
            "vulnerable", pop_digest, attacks.seed, attacks.time_limit, attacks.node_limit
        )
        step = Step("vulnerable", digest)
        made = self.steps.get(step, partial(_make_vulnerable_group, truth, attacks))
        return read_vulnerable_group(made), digest

    def mechanism(self, m: Point, truth: Population, pop_digest: str) -> ReleaseResult:
        """One release, its attacks and its evaluation."""
        mechanism = protection.get(m.name)
        files = _settings_files_digest(m.settings)
        settings = {k: str(v) for k, v in m.settings.items()}
        rel_digest = _digest("release", pop_digest, m.name, settings, files, m.seed)
        step = Step(f"release:{m.title}", rel_digest)
        release = api.read_release(
            self.steps.get(step, partial(_make_release, truth, m)) / "release"
        )
        self.drew[m.title] = drew_from_stream(release.randomness)
        risk: dict[str, Any] | NotMeasured = no_risk_analysis(m.name)
        if mechanism.risk_analysis is not None and self.declared:
            risk = NotMeasured(
                f"the {m.name} mechanism's own risk analysis reads the US 2010 census's tables, "
                f"not census {self.census.name}'s"
            )
        elif mechanism.risk_analysis is not None:
            step = Step(f"risk:{m.title}", _digest("risk", rel_digest))
            made = self.steps.get(step, partial(_make_risk, release, truth))
            risk = read_json_object(made / METRICS_FILE)
        reconstruction, reidentification = self.attacks(m, release, truth, rel_digest)
        naive = self.naive(m, release, rel_digest) if reconstruction is not None else None
        block_only = self.block_only(m, release, truth, rel_digest)
        return ReleaseResult(
            title=m.title,
            settings=mechanism.parse(m.settings, self.census).recorded(),
            notes=release.notes,
            evaluation=api.evaluation(
                release, truth, reconstruction, reidentification, risk, naive, block_only
            ),
            point=Sweep(
                m.entry, m.setting, m.varied, m.replicate, self.same_as(m, release), m.population
            ),
            protection=(
                release.protection.to_dict()
                if release.protection is not None
                else NotMeasured("the release does not record whether it protects")
            ),
        )

    def same_as(self, m: Point, release: Release) -> str | None:
        """The earlier replicate of ``m``'s setting whose release is identical (the mechanism
        drew no fresh randomness for it), if any."""
        key = (m.setting, frames_digest(*(t.frame(labels=False) for t in release.tables.values())))
        first = self.published.setdefault(key, m.title)
        return None if first == m.title else first

    def naive(self, m: Point, release: Release, rel_digest: str) -> ReconstructionResult | None:
        """The naive reconstruction of a noisy release (None for exact ones: it is the same)."""
        attacks = self.experiment.attacks
        if not attacks.naive or protection.get(release.mechanism).exact_tables:
            return None
        digest = _digest("naive", rel_digest, attacks.seed, attacks.time_limit, attacks.node_limit)
        step = Step(f"naive-reconstruction:{m.title}", digest)
        made = self.steps.get(step, partial(_make_reconstruction, release, attacks, "naive"))
        return api.read_reconstruction(made / "recon")

    def attacks(
        self, m: Point, release: Release, truth: Population, rel_digest: str
    ) -> tuple[ReconstructionResult | None, dict[str, Reidentification | NotMeasured]]:
        """The reconstruction of a release and the reidentification by each attacker."""
        attacks = self.experiment.attacks
        if not attacks.reconstruct:
            skipped = NotMeasured("the experiment does not reconstruct (attacks.reconstruct)")
            return None, dict.fromkeys(attacks.attackers, skipped)
        if not release.tables:
            return None, {a: NotMeasured(NOTHING_TO_RECONSTRUCT) for a in attacks.attackers}
        rec_digest = _digest(
            "reconstruction",
            rel_digest,
            attacks.seed,
            attacks.variability,
            attacks.time_limit,
            attacks.node_limit,
            "published",
        )
        step = Step(f"reconstruction:{m.title}", rec_digest)
        made = self.steps.get(step, partial(_make_reconstruction, release, attacks, "published"))
        recon = api.read_reconstruction(made / "recon")
        unlinkable = None if self.declared else linkage.not_linkable(recon.persons)
        if self.declared:  # the default asked for it: n/a, with the reason
            n_a = NotMeasured(NO_VARIABILITY).to_dict()
            recon = replace(recon, metrics={**recon.metrics, "variability": n_a})
        links: dict[str, Reidentification | NotMeasured] = {}
        for preset in attacks.attackers:
            if unlinkable is not None:
                links[preset] = NotMeasured(unlinkable)
                continue
            group, group_digest = self.vulnerable if self.vulnerable else (None, None)
            step = Step(
                f"reidentify:{m.title}:{preset}",
                _digest("reid", rec_digest, preset, attacks.seed, group_digest),
            )
            make = partial(
                _make_reidentification, recon, release, truth, preset, attacks.seed, group
            )
            made = self.steps.get(step, make)
            links[preset] = Reidentification.from_dict(read_json_object(made / METRICS_FILE))
        return recon, links

    def block_only(
        self, m: Point, release: Release, truth: Population, rel_digest: str
    ) -> dict[str, Reidentification | NotMeasured] | NotMeasured:
        """The reidentification of the release's reconstruction from its block tables alone, by
        each attacker (the attack paper's rHDF_b), when the experiment asks for it."""
        attacks = self.experiment.attacks
        if not (attacks.block_only and attacks.reconstruct):
            return NotMeasured(NO_BLOCK_ONLY)
        if not release.tables:
            return {a: NotMeasured(NOTHING_TO_RECONSTRUCT) for a in attacks.attackers}
        digest = _digest(
            "block-reconstruction", rel_digest, attacks.seed, attacks.time_limit, attacks.node_limit
        )
        step = Step(f"block-reconstruction:{m.title}", digest)
        make = partial(_make_reconstruction, release, attacks, "published", block_only=True)
        recon = api.read_reconstruction(self.steps.get(step, make) / "recon")
        unlinkable = linkage.not_linkable(recon.persons)
        group, group_digest = self.vulnerable if self.vulnerable else (None, None)
        links: dict[str, Reidentification | NotMeasured] = {}
        for preset in attacks.attackers:
            if unlinkable is not None:
                links[preset] = NotMeasured(unlinkable)
                continue
            step = Step(
                f"reidentify-block:{m.title}:{preset}",
                _digest("reid-block", digest, preset, attacks.seed, group_digest),
            )
            made = self.steps.get(
                step,
                partial(_make_reidentification, recon, release, truth, preset, attacks.seed, group),
            )
            links[preset] = Reidentification.from_dict(read_json_object(made / METRICS_FILE))
        return links


NO_BLOCK_ONLY = "not asked for (attacks.block_only reconstructs from the block tables alone too)"


def replicate_of(first: ReleaseResult, point: Point) -> ReleaseResult:
    """A further replicate of a setting whose mechanism drew nothing from its stream: the same
    release, so the first's results, marked as the same (not a draw: left out of means)."""
    sweep = Sweep(
        point.entry, point.setting, point.varied, point.replicate, first.title, point.population
    )
    return replace(first, title=point.title, point=sweep)


def run_spec(
    experiment: Experiment,
    out: Path,
    say: Callable[[str], None],
    protect: tuple[Path, ...] = (),
    source: str = "an experiment given in Python",
) -> ExperimentResult:
    """Run (or finish) an experiment in ``out``; write results.json and report.html.

    ``out`` must be absent, empty or an earlier experiment's directory, apart from the inputs
    (``protect`` and the population directory). A run refused for bad input leaves no step it
    wrote, and a directory it created (or found empty) as it was. ``source`` names the
    experiment in the results' provenance.

    Everything in ``out`` holds or comes from the confidential population: with a population
    directory, nothing there (``out`` itself and what earlier runs left included) allows more
    than its directory and files do (:func:`~sdclab.population.io.source_modes`)."""
    out = Path(out)
    path = experiment.population.path
    inputs = (*protect, *([Path(path)] if path else []))
    check_replaceable(out, EXPERIMENT_KIND, inputs)
    for point in experiment.points():
        mechanism = MECHANISMS[point.name]
        params = mechanism.parse(point.settings, experiment.census)
        mechanism.check_run(params, point.seed, (*inputs, out))
    modes = _source_modes(experiment.population)
    created = not out.exists()
    was_empty = not created and not any(out.iterdir())
    given = stat.S_IMODE(out.stat().st_mode) if was_empty else 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "steps").mkdir(exist_ok=True)
    if modes is not None:  # before anything is written in it, and what earlier runs wrote
        restrict_tree(out, modes)
    write_marker(out, EXPERIMENT_KIND, EXPERIMENT_ENTRIES, modes)
    runner = Runner(experiment, out, say, modes)
    try:
        results = runner.run()
        results = replace(results, provenance=provenance(experiment, source))
        write_json(results.to_dict(), out / RESULTS_FILE, modes)
        tidy = results.tidy()
        write_parquet(tidy, out / TIDY_FILES[0], modes)
        with atomic_file(out / TIDY_FILES[1], modes) as tmp:
            tidy.write_csv(tmp)
        with atomic_file(out / REPORT_FILE, modes) as tmp:
            axes = experiment.report.axes(experiment.census)
            tmp.write_text(render_report(results, axes), encoding="utf-8")
    except (InputError, OSError):  # what the command line reports in one line, exit 2
        for step in runner.steps.made:
            shutil.rmtree(step, ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        elif was_empty:  # the user's empty directory: left as it was
            for entry in (*EXPERIMENT_ENTRIES, OUTPUT_MARKER):
                remove_path(out / entry)
            out.chmod(given)
        raise
    return results


def _source_modes(spec: PopulationSpec) -> Modes | None:
    """The most the experiment's outputs may allow: what the population directory grants, or
    the directory and file of a declared census's persons (None: a synthetic population)."""
    if spec.path is None:
        return None
    if spec.declared:
        return Modes.of(Path(spec.path).parent, [Path(spec.path)])
    return source_modes(Path(spec.path))


def provenance(experiment: Experiment, source: str) -> dict[str, Any]:
    """What made an experiment's results, for the top of its report (mechanism seeds are left
    out: each reproduces its release's noise)."""
    attacks = experiment.attacks
    return {
        "sdclab": __version__,
        "experiment": source,
        "run_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "population": experiment.population.source(),
        "attacks": {
            "seed": attacks.seed,
            "time_limit": attacks.time_limit,
            "node_limit": attacks.node_limit,
            "attackers": list(attacks.attackers),
            "block_only": attacks.block_only,
            "knowledge": "published (noise-aware)" + (", naive beside" if attacks.naive else ""),
        },
        "mechanism_seeds": "in the experiment (not repeated: a seed reproduces its noise)",
        **(
            {}
            if experiment.match is None
            else {
                "match": {
                    "axis": experiment.match.axis,
                    "values": experiment.match.targets(),
                    "not_matched": experiment.unmatched(),
                }
            }
        ),
    }


DEMO = Experiment.model_validate(
    {
        "population": {
            "persons": 4_000,
            "seed": 2010,
            "tracts": 4,
            "counties": 2,
            "replicates": 2,
        },
        "mechanisms": [
            {"name": "none"},
            {"name": "swap-low", "seed": 1},
            {"name": "swap-high", "seed": 2},
            {"name": "psa", "settings": {"rate": ["0.02", "0.05"]}, "seed": 3, "replicates": 2},
            {
                "name": "topdown",
                "label": "topdown-dhc",
                "settings": {"rho": [1, 4, 15.3]},
                "seed": 4,
                "replicates": 2,
            },
            {
                "name": "topdown",
                "label": "topdown-pl94",
                "settings": {"product": "pl94"},
                "seed": 5,
            },
            {
                "name": "cellkey",
                "label": "cellkey-ons",
                "settings": {"ptable": "ons-10-5", "keys": "drawn"},
                "seed": 6,
                "replicates": 2,
            },
            {
                "name": "cellkey",
                "label": "cellkey-maxent",
                "settings": {"ptable": "maxent", "bound": 5, "variance": 3, "keys": "drawn"},
                "seed": 6,
                "replicates": 2,
            },
            {"name": "geometric", "settings": {"epsilon": [2, 8]}, "seed": 7, "replicates": 2},
            {"name": "safetab_h", "seed": 8},
            {"name": "suppress", "settings": {"complementary": "true"}},
        ],
        "attacks": {"attackers": ["census", "commercial"]},
    }
)
"""The built-in experiment of ``sdclab demo``: a sweep (TopDown at 3 budgets, the cell key
method with 2 p-tables, geometric noise at 2 budgets, the PSA at 2 rates, 2 replicates each, and
the one-point mechanisms) on 4,000 persons in 4 tracts of 2 counties and on a second synthetic
population (another seed), so that every setting's interval covers the population as well as the
noise; sized to finish, attacks included, within 15 minutes on 2 cores (docs/experiments.md).
The 50,000-person study behind docs/findings.md is ``examples/study-50k.toml``."""


def run_experiment(
    experiment: str | Path | Mapping[str, Any],
    out: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> ExperimentResult:
    """Run (or finish) an experiment — a TOML file or the same content as a mapping — into
    directory ``out``; returns its results (also written as ``out/results.json`` beside
    ``out/report.html``). Finished steps found in ``out`` are reused."""
    inputs: tuple[Path, ...] = ()
    source = "a mapping given to sdclab.run_experiment"
    if isinstance(experiment, Mapping):
        spec = parse_experiment(dict(experiment), "experiment", Path.cwd())
    else:
        spec = load_experiment(Path(experiment))
        inputs = (Path(experiment),)
        source = str(Path(experiment).resolve())
    return run_spec(spec, Path(out), progress or (lambda _: None), inputs, source)
