"""An experiment file as validated models: the population, the mechanisms and their sweeps, the
attacks, the match and the report's axes; each problem said in one line naming the key."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Literal

import numpy as np
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

from sdclab import protection
from sdclab.attacks.reconstruction import NODE_LIMIT
from sdclab.censuses import BUILT_IN, census_named, generator_of
from sdclab.censuses.us2010 import NAME as US2010
from sdclab.censuses.us2010.population.synth import GENERATOR_VERSION, check_version
from sdclab.censuses.us2010.population.synth_geography import GeographyCounts
from sdclab.core.census.model import Census
from sdclab.core.errors import InputError
from sdclab.core.execution import Executor
from sdclab.core.randomness import MAX_SEED
from sdclab.pipeline import matching
from sdclab.pipeline.census_view import NO_VARIABILITY, census_view
from sdclab.pipeline.experiment.replicates import replicate_seed
from sdclab.pipeline.results.decision import FrontierAxes, declared_axes
from sdclab.protection.base import EXPECTED, did_you_mean, shown

MAX_POINTS = 100
"""Values of a range at most."""
MAX_REPLICATES = 100
MAX_POPULATION_REPLICATES = 20
"""Population replicates at most (each runs every release again)."""
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
    mapping: str | None = None
    """With a declared census: the mapping file naming its persons' file's columns and codes."""
    tracts: int | None = Field(None, ge=1)
    counties: int | None = Field(None, ge=1)
    states: int | None = Field(None, ge=1)
    """A synthetic population's numbers of tracts, counties and states (else by its size)."""
    generator: str = GENERATOR_VERSION
    """The synthetic generator's version (1.2 reproduces studies made before 2.0)."""
    replicates: int = Field(1, ge=1, le=MAX_POPULATION_REPLICATES)
    """Populations the experiment runs every release on: the first as given, the others further
    synthetic seeds or bootstrap replicates of the population read (:func:`population_seed`,
    :func:`sdclab.censuses.us2010.population.bootstrap.bootstrap`), so that intervals cover the
    population as well as the noise."""

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
        if self.synthetic_census:
            generator = generator_of(str(self.census))
            assert generator is not None, "checked on validation"
            version = generator.GENERATOR_VERSION
            return {
                "census": self.census,
                "persons": self.persons,
                "seed": self.seed,
                "generator": version,
            }
        if self.declared:
            mapping = {} if self.mapping is None else {"mapping": self.mapping}
            return {"census": self.census, "path": self.path, **mapping}
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
            and (k not in ("census", "mapping") or v is not None)
        }

    @property
    def declared(self) -> bool:
        """Whether the population is of a census other than the US 2010 one (its persons' file,
        or the synthetic persons of a built-in census that has them)."""
        return self.census is not None and self.census != US2010

    @property
    def synthetic_census(self) -> bool:
        """Whether the population is a built-in census's synthetic persons (not the US one's)."""
        return self.declared and self.path is None

    @model_validator(mode="after")
    def _one_source(self) -> PopulationSpec:
        if self.mapping is not None and not self.declared:
            raise ValueError(
                "mapping: a mapping file names the columns and codes of a declared census's "
                "persons' file (give census, a census file, and path)"
            )
        if self.synthetic_census and generator_of(str(self.census)) is None:
            raise ValueError("census: give path, the census's persons' file")
        if self.synthetic_census and self.persons is None:
            raise ValueError(
                f"census: give persons (census {self.census}'s synthetic population) or path "
                "(its persons' file)"
            )
        if self.declared and self.replicates > 1:
            raise ValueError(
                "replicates: replicates are further synthetic seeds or bootstrap resamples of "
                "the US 2010 census's units; another census runs on one population (replicates "
                "= 1)"
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
        budget set to reach it (:mod:`sdclab.pipeline.matching`)."""
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
    targets: list[str] = Field(
        [],
        description="further attack targets the census declares (eu2021: grid): every release "
        "also reconstructed on each and reidentified, reported apart (target_reidentification)",
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
    compared table (:func:`sdclab.pipeline.census_view.census_view`) for a declared census."""
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
    return BUILT_IN[US2010]()


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
        2010 census only (:func:`us_only_settings`) and an attack target it does not declare."""
        if not self.population.declared:
            if self.attacks.targets:
                raise InputError(
                    f"attacks.targets: the US 2010 census declares no attack target, got "
                    f"{self.attacks.targets[0]!r}"
                )
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
        if self.attacks.targets and not self.attacks.reconstruct:
            raise InputError(
                "attacks.targets: the targets are attacked by reconstruction; "
                "set attacks.reconstruct to true or leave the targets out"
            )
        unknown = [t for t in self.attacks.targets if t not in self._census.targets]
        if unknown:
            known = ", ".join(self._census.targets) or "none"
            raise InputError(
                f"attacks.targets: census {self._census.name} declares no attack target "
                f"{unknown[0]!r} (it declares: {known})"
            )
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
