"""What every mechanism carries (:class:`Mechanism`) and how its parameters are validated.

Parameters arrive as ``key=value`` strings from the command line (``--set``), as values from an
experiment file or as Python values (int, float, bool, str, Fraction, Decimal, lists, mappings);
a pydantic model per mechanism validates them once, at the boundary. A value given as a number and
the same value given as its text validate alike (a float becomes the decimal it prints as: 0.05 is
Decimal("0.05")), and bad values become one clear :class:`InputError` in the project's words,
naming the mechanism, the parameter, what was given and what was expected.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Generic,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

import annotated_types
import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from sdclab.core.accounting import SpecCard
from sdclab.core.errors import InputError
from sdclab.core.figures import as_json
from sdclab.core.randomness import check_seed
from sdclab.release import Artifact, ArtifactCheck

if TYPE_CHECKING:
    from sdclab.censuses.us2010.population import Population
    from sdclab.core.cell_model import CellModel
    from sdclab.core.census.model import Census
    from sdclab.core.diagnostics import Diagnostics
    from sdclab.core.query_noise import QueryNoise
    from sdclab.core.tables.definition import TableDef
    from sdclab.protection.audit_plans import Trials
    from sdclab.release import Protection, Release

P = TypeVar("P", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Unit:
    """A parameter's unit, as ``sdclab mechanisms`` shows it, declared with the field's type:
    ``rate: Annotated[Decimal, Unit("share 0–1")] = Field(Decimal("0.05"), gt=0, lt=1)``."""

    text: str


def unit_of(field: FieldInfo) -> str | None:
    """A parameter's unit: the :class:`Unit` among its metadata, else None."""
    return next((item.text for item in field.metadata if isinstance(item, Unit)), None)


class Parameters(BaseModel):
    """Base of every mechanism's parameter model: unknown keys are errors. A parameter's meaning
    is its attribute docstring (the string on the line after it), its unit a :class:`Unit`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    EXECUTION: ClassVar[frozenset[str]] = frozenset()
    """Settings of where and how a run executes (workers, a checkpoint directory): they change
    nothing in the release, and a path or an address of the agency's machines stays out of it."""

    FILE_SETTINGS: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Settings that may name a file, with their values that name none (presets). A release
    records such a file's content, so there any other text is not a recorded form."""

    @classmethod
    def check_recorded(cls, data: Mapping[str, Any]) -> None:
        """Refuse parameters read from a release that name a file: reading a release never
        opens a path it names."""
        for name, presets in cls.FILE_SETTINGS.items():
            value = data.get(name)
            if isinstance(value, str) and value not in presets:
                raise InputError(
                    f"parameter {name} names a file ({value!r}); a release records the content "
                    "of such a file instead"
                )

    US_SETTINGS: ClassVar[frozenset[str]] = frozenset()
    """Settings defined on the US 2010 census only (TopDown's ``product``, the PSA's
    ``match_adults``): refused for another census, and not recorded in its releases."""

    _census: Census | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _bind_census(self, info: ValidationInfo) -> Parameters:
        """Bind the census the parameters are for (validation context ``census``), before any
        check of a mechanism that depends on it (its tables, their sensitivities)."""
        census = (info.context or {}).get("census")
        if census is not None and census is not _us2010():
            self._census = census
            given = sorted(self.US_SETTINGS & self.model_fields_set)
            if given:
                raise ValueError(
                    f"{', '.join(given)}: a setting for the US 2010 census only, not for "
                    f"census {census.name} (leave it out)"
                )
        return self

    @property
    def census(self) -> Census:
        """The census the parameters apply to: the one :meth:`Mechanism.parse` was given, else
        the US 2010 census."""
        return self._census if self._census is not None else _us2010()

    @field_validator("*", mode="before")
    @classmethod
    def _python_value(cls, value: Any, info: ValidationInfo) -> Any:
        """A Python value as the field's text would validate (see :func:`python_value`)."""
        if info.field_name is None or info.field_name not in cls.model_fields:
            return value
        return python_value(value, cls.model_fields[info.field_name].annotation)

    def recorded(self) -> dict[str, Any]:
        """The parameters as a release records them: without the execution settings, and with
        the content of any file they name in place of its path (a mechanism with file settings
        extends this), since a path is local and an attacker is entitled to the content."""
        us_only = set() if self._census is None else set(self.US_SETTINGS)
        return self.model_dump(mode="json", exclude=set(self.EXECUTION) | us_only)


class WorkloadParameters(Parameters):
    """Parameters of a mechanism that protects the tables it is given: a workload over the
    census. Its budgets, sensitivities and card are those of these tables alone."""

    tables: tuple[str, ...] | None = None
    """the tables to publish, a workload over the census (default: every table of the census);
    budgets and sensitivities are derived from these tables alone"""

    @model_validator(mode="after")
    def _tables_of_the_census(self) -> WorkloadParameters:
        if self.tables is not None:
            if not self.tables or not all(self.tables):
                raise ValueError("tables: give table names, at least one (default: every table)")
            twice = sorted({t for t in self.tables if self.tables.count(t) > 1})
            if twice:
                raise ValueError(f"tables: {', '.join(twice)} given more than once")
            try:
                self.census.select(self.tables)
            except KeyError as exc:
                raise ValueError(f"tables: {exc.args[0]}") from None
        return self

    def workload(self) -> list[TableDef]:
        """The tables the mechanism protects, in the census's order (whatever the order given)."""
        chosen = set(self.census.tables if self.tables is None else self.tables)
        return [t for t in self.census.tables.values() if t.name in chosen]

    def workload_names(self) -> list[str]:
        return [t.name for t in self.workload()]

    def workload_text(self) -> str:
        """The tables protected, in words, for a card: every table, or the workload's."""
        names = ", ".join(self.workload_names())
        return "every table" if self.tables is None else f"the tables {names} (the workload)"

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if self.tables is None:
            del data["tables"]  # every table: what a release without the setting publishes
        else:
            data["tables"] = self.workload_names()  # in the census's order: one record per set
        return data


def _any_census_mechanisms() -> list[str]:
    from sdclab import protection  # the registry imports this module

    return [n for n, m in protection.MECHANISMS.items() if m.any_census]


def _us2010() -> Census:
    from sdclab.censuses import us2010

    return us2010.census()


@dataclass(frozen=True)
class NoisePublication:
    """What a mechanism's release says about its own noise: what an attacker may know."""

    distribution: str
    """The noise, in words ("discrete Gaussian", "two-sided geometric", "none", ...)."""
    published: tuple[str, ...] = ()
    """Where the release states it: parameters, artifacts, notes (e.g. "artifact measurements:
    the variance of every noisy measurement")."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """The figures that determine it (scales, variances, a p-table's bound), from the
    recorded parameters alone."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a release carries (``release.json``'s ``noise``)."""
        return {
            "distribution": self.distribution,
            "published": list(self.published),
            "parameters": as_json(self.parameters),
        }


@dataclass(frozen=True)
class Mechanism(Generic[P]):
    """A mechanism and everything it carries: its parameters, its protection, its guarantee,
    the payloads it publishes, what it says about its noise, how it is evaluated and audited.

    A mechanism's module makes the object from its name, summary and parameter model, and marks
    the functions that play each role with :meth:`define`::

        MECHANISM = Mechanism("geometric", "per-cell noise (pure epsilon-DP)", GeometricParameters)

        @MECHANISM.define("guarantee")
        def card(p: GeometricParameters) -> SpecCard: ...
    """

    name: str
    summary: str
    """What it is, in one line."""
    parameters: type[P]
    artifacts: tuple[Artifact, ...] = ()
    """The payloads its releases may carry beside the tables."""
    guarantee: Callable[[P], SpecCard] | None = None
    """The specification card from the parameters alone (without data); every registered
    mechanism defines it (the registry refuses one that does not)."""
    protect: Callable[[Population, P, np.random.Generator], Release] | None = None
    """The mechanism itself: population, parameters and random stream → release."""
    noise: Callable[[P], NoisePublication] | None = None
    """What its release publishes about its own noise."""
    diagnostics: Callable[[Population, Release], tuple[Diagnostics, ...]] | None = None
    """Evaluation only: the mechanism's own figures about a release that need the confidential
    population it was made from (never written into the release), each a kind of
    :mod:`sdclab.core.diagnostics` that renders its own section of the report."""
    risk_analysis: Callable[[Release, Population | None], dict[str, Any]] | None = None
    """The mechanism's own disclosure-risk analysis of a release (the cell key method's)."""
    audit_plan: Callable[[Mapping[str, Any], int, int], Trials] | None = None
    """How a privacy audit observes it: (settings, trials, seed) → outputs on two neighbouring
    datasets and the guarantee's claim for them."""
    query_noise: Callable[[P, str | None, str], QueryNoise] | None = None
    """The noise of one query or table (None: its default) at one level as a function of its
    budget, for ``sdclab budget``; None for a mechanism without a budget to choose."""
    cell_noise: Callable[[P, int | None], dict[str, Any]] | None = None
    """For a mechanism whose noise has no budget (the cell key method): the distribution of one
    published cell's noise (of a true ``count``, or of a large one), for ``sdclab budget``."""
    rescale: Callable[[P, Fraction], dict[str, str]] | None = None
    """The settings that multiply its privacy budget by a factor (every budget setting alike),
    for matching mechanisms on the common axis; None for a mechanism without a budget."""
    unprotected: Callable[[Population, P, Release], str | None] | None = None
    """Why a release of these parameters protects nothing although its tables may differ from
    the exact ones (a p-table whose noise can be undone, a constant record key), or None; part
    of :meth:`protection`."""
    cell_model: CellModel | None = None
    """The attacker's model of its published cells (:mod:`sdclab.core.cell_model`): the
    range of each true count and the cost of the distance from the published one, from the
    release alone; None for a mechanism the noise-aware attack cannot model."""
    example: Mapping[str, str] = field(default_factory=dict)
    """Settings of a quick release (the defaults where they are quick): what tests and examples
    run it with."""
    any_census: bool = False
    """Whether it protects any census's tables (else only the US 2010 census's, so far; a run on
    another census is refused in words)."""
    check: Callable[[Release, P], str | None] | None = None
    """The first value of a release read from its files that the mechanism could not have
    produced with the release's recorded parameters (given parsed), in words, or None: a count
    beyond its noise's reach, a measurement whose variance its budget does not give
    (:mod:`sdclab.protection.checks`). Run on every read, after the files' own checks."""

    def define(self, role: str) -> Callable[[F], F]:
        """A decorator: the function it decorates plays ``role`` (one of :data:`ROLES`) for this
        mechanism; each role is defined once."""
        if role not in ROLES:
            raise ValueError(f"mechanism {self.name}: no role {role!r} (roles: {', '.join(ROLES)})")

        def register(function: F) -> F:
            if self.defines(role):
                raise ValueError(f"mechanism {self.name}: {role} is defined twice")
            object.__setattr__(self, role, function)
            return function

        return register

    def defines(self, role: str) -> bool:
        """Whether a function plays ``role`` for this mechanism."""
        return getattr(self, role) is not None

    def card(self, params: P) -> SpecCard:
        """The specification card of ``params``."""
        if self.guarantee is None:
            raise TypeError(f"mechanism {self.name} defines no guarantee")
        return self.guarantee(params)

    def protection(self, population: Population, params: P, release: Release) -> Protection:
        """Whether ``release`` protects ``population``: the mechanism's own reason it does not
        (:attr:`unprotected`), else the rule every release follows — a release whose every table
        equals the exact tabulation at every level, no cell withheld, protects nothing."""
        from sdclab.release import Protection, publishes_exact_tables
        from sdclab.release.model import EXACT_TABLES

        reason = None
        if self.unprotected is not None:
            reason = self.unprotected(population, params, release)
        if reason is None and publishes_exact_tables(release, population):
            reason = EXACT_TABLES
        return Protection(reason is None, reason)

    def publishes(self, name: str, meaning: str) -> Callable[[ArtifactCheck], ArtifactCheck]:
        """A decorator: this mechanism's releases may carry the artifact ``name``, and the
        function it decorates checks such a frame read from a release."""

        def register(check: ArtifactCheck) -> ArtifactCheck:
            if self.artifact(name) is not None:
                raise ValueError(f"mechanism {self.name}: artifact {name} is declared twice")
            object.__setattr__(self, "artifacts", (*self.artifacts, Artifact(name, meaning, check)))
            return check

        return register

    def example_for(self, census: Census) -> dict[str, str]:
        """:attr:`example` for ``census``: without the US products' settings for another."""
        us_only: frozenset[str] = getattr(self.parameters, "US_SETTINGS", frozenset())
        keep = census is _us2010()
        return {k: v for k, v in self.example.items() if keep or k not in us_only}

    def parse(self, settings: Mapping[str, Any], census: Census | None = None) -> P:
        """Validated parameters from a mapping of text (``--set``) or Python values, for
        ``census`` (default: the US 2010 census).

        A problem is one :class:`InputError`: its message is the first problem in words
        (:func:`problems`), its details the others.
        """
        try:
            return self.parameters.model_validate(dict(settings), context={"census": census})
        except ValidationError as exc:
            found = problems(f"mechanism {self.name}", self.parameters, exc.errors())
            raise InputError(found[0], found[1:MAX_PROBLEMS]) from None

    def run(self, population: Population, settings: Mapping[str, Any], seed: int | None) -> Release:
        """Protect ``population``; the release records its randomness and whether it protects.

        Without a seed the random stream comes from OS entropy; with one the release is
        reproducible and marked not fit for publication. A release that does not protect
        (:meth:`protection`) is not fit for publication either, and says why. A run that keeps
        checkpoints needs a seed: its checkpoints must not hold what regenerates the noise of a
        publishable release, and an unseeded run could not resume from them anyway (it draws new
        entropy each time).
        """
        from dataclasses import replace

        from sdclab.core.randomness import (
            make_rng,
            release_randomness,
            stream_position,
            unprotected_record,
        )

        refused = self.refuses(population.census)
        if refused is not None:
            raise InputError(refused)
        params = self.parse(settings, population.census)
        self.check_run(params, seed, population.sources)
        assert self.protect is not None  # (checked)
        rng = make_rng(seed)
        before = stream_position(rng)
        release = self.protect(population, params, rng)
        undeclared = sorted(set(release.artifacts) - {a.name for a in self.artifacts})
        if undeclared:
            raise AssertionError(f"mechanism {self.name} declares no artifact {undeclared}")
        drew = stream_position(rng) != before
        randomness = release_randomness(release.randomness, seed, drew)
        verdict = self.protection(population, params, release)
        if verdict.reason is not None:
            randomness = unprotected_record(randomness, verdict.reason)
        return replace(
            release,
            randomness=randomness,
            noise=self.noise(params).to_dict() if self.noise is not None else {},
            protection=verdict,
            sources=population.sources,
            census=population.census,
        )

    def refuses(self, census: Census) -> str | None:
        """Why it cannot protect ``census``, in one line (None: it can)."""
        from sdclab.censuses import is_us2010

        if self.any_census or is_us2010(census):
            return None
        return (
            f"mechanism {self.name} protects the US 2010 census's tables only so far, not "
            f"census {census.name}'s (any census: {', '.join(_any_census_mechanisms())})"
        )

    def check_run(self, params: P, seed: int | None, inputs: tuple[Path, ...] = ()) -> None:
        """Refuse a run of :meth:`run` before any work: a mechanism that protects no data, a bad
        seed, a checkpoint without a seed, overlapping one of ``inputs`` (the directories the run
        reads or writes) or that is not a checkpoint directory. The command line and experiments
        call it before reading the population; :meth:`run` calls it with the population's own
        :attr:`~sdclab.censuses.us2010.population.Population.sources`."""
        from sdclab.core.fileio import check_checkpoint_directory

        if self.protect is None:
            raise InputError(
                f"mechanism {self.name!r} has a guarantee and an audit but protects no data"
            )
        check_seed(seed, "seed")
        checkpoint = getattr(params, "checkpoint", None)
        if checkpoint is None:
            return
        if seed is None:
            raise InputError(
                f"mechanism {self.name}: checkpoint needs a seed (--seed): an unseeded run draws "
                "new entropy each time, so it cannot resume, and its checkpoints must not hold "
                "that entropy"
            )
        where = f"mechanism {self.name}, parameter checkpoint"
        check_checkpoint_directory(Path(checkpoint), inputs, where)

    @property
    def exact_tables(self) -> bool:
        """Whether its tables are exact tabulations of the records it publishes from (the
        confidential ones or the swapped ones): its cell model is :func:`.cell_model.exact`."""
        from sdclab.core.cell_model import exact

        return self.cell_model is exact

    def artifact(self, name: str) -> Artifact | None:
        """The declared artifact called ``name``, if any."""
        return next((a for a in self.artifacts if a.name == name), None)

    def __repr__(self) -> str:
        return f"<mechanism {self.name}: {self.summary}>"


ROLES = (
    "guarantee",
    "protect",
    "noise",
    "diagnostics",
    "risk_analysis",
    "audit_plan",
    "query_noise",
    "cell_noise",
    "rescale",
    "unprotected",
    "cell_model",
    "check",
)
"""What a mechanism's functions may be (:meth:`Mechanism.define`)."""


def parse_settings(pairs: Sequence[str]) -> dict[str, str]:
    """``["rate=0.05", "largest_group=11700"]`` → a dict; malformed pairs are input errors."""
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {pair!r}: expected key=value")
        if key.strip() in settings:
            raise InputError(f"--set {key.strip()} given twice")
        settings[key.strip()] = value.strip()
    return settings


# ---------------------------------------------------------------------------------------------
# Parameters given as Python values
# ---------------------------------------------------------------------------------------------


def python_value(value: Any, annotation: Any) -> Any:
    """``value`` as a field of type ``annotation`` takes it: as its text would validate.

    A boolean is no number (the text ``true`` is none either); a float becomes the decimal it
    prints as (0.05 is Decimal("0.05"), not its binary expansion) and a Fraction the decimal equal
    to it (an error if there is none, as for 1/3); an infinity or NaN is refused wherever a number
    is expected; a path is text; where a list is expected, a text is its comma-separated items
    (``risk_keys=sex,race``) and a tuple a list. Anything else is left to the field's type.
    """
    kinds = field_kinds(annotation)
    if isinstance(value, np.generic):  # a NumPy scalar (a loop over np.linspace): its Python value
        value = value.item()
    if isinstance(value, bool):
        if kinds & {int, float, Decimal} and bool not in kinds:
            raise PydanticCustomError("bool_not_number", "a boolean is not a number")
        return value
    if kinds & {float, Decimal} and not _finite(value):
        raise PydanticCustomError("finite_number", "Input should be a finite number")
    if Decimal in kinds and isinstance(value, float):
        return Decimal(repr(value))
    if Decimal in kinds and isinstance(value, Fraction):
        return exact_decimal(value)
    if isinstance(value, os.PathLike) and str in kinds:
        return os.fspath(value)
    if isinstance(value, str) and tuple in kinds and str not in kinds:
        return tuple(part.strip() for part in value.split(",")) if value.strip() else ()
    if isinstance(value, tuple) and list in kinds:
        return list(value)
    return value


def field_kinds(annotation: Any) -> set[Any]:
    """The types a field's annotation admits: ``Decimal | None`` → {Decimal, NoneType};
    ``Literal[...]`` → {Literal}; ``list[dict[str, Any]]`` → {list}."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return set().union(*(field_kinds(arg) for arg in get_args(annotation)))
    if origin is Annotated:
        return field_kinds(get_args(annotation)[0])
    return {origin if origin is not None else annotation}


def _finite(value: Any) -> bool:
    """Whether a number (or a number's text) is finite; anything else counts as finite here."""
    if isinstance(value, Decimal):
        return value.is_finite()
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            return Decimal(value.strip().replace("_", "")).is_finite()
        except ArithmeticError:
            return True  # not a number at all: the field's type says so
    return True


def exact_decimal(value: Fraction) -> Decimal:
    """The decimal equal to a fraction whose denominator has no prime factor but 2 and 5."""
    rest, twos, fives = value.denominator, 0, 0
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        raise PydanticCustomError(
            "inexact_decimal", "{value} has no exact decimal form", {"value": str(value)}
        )
    places = max(twos, fives)
    return Decimal(f"{value.numerator * 10**places // value.denominator}E-{places}")


# ---------------------------------------------------------------------------------------------
# Problems with parameters, in words
# ---------------------------------------------------------------------------------------------

MAX_PROBLEMS = 5
"""How many problems with the parameters one error states (the first in its message)."""
SHOWN_LENGTH = 40
"""Longest given value a message shows whole."""

EXPECTED = {
    **dict.fromkeys(("int_parsing", "int_from_float", "int_type", "int_parsing_size"), "whole"),
    **dict.fromkeys(
        (
            "float_parsing",
            "float_type",
            "decimal_parsing",
            "decimal_type",
            "decimal_max_digits",
            "decimal_max_places",
            "decimal_whole_digits",
        ),
        "number",
    ),
    "finite_number": "a finite number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "text",
    "string_unicode": "text",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a table",
    "path_type": "a file path",
    "inexact_decimal": "a decimal number (a fraction such as 1/3 has no exact decimal form)",
}
"""What the value of a field should have been, by pydantic's error type ("whole" and "number":
the field's own words, e.g. "a whole number")."""
RANGE_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def problems(subject: str, model: type[BaseModel], errors: Sequence[ErrorDetails]) -> list[str]:
    """Every problem pydantic found with the parameters of ``subject`` (``mechanism topdown``,
    ``attacker commercial``), as one line each.

    ``mechanism topdown: unknown parameter 'rh'; did you mean 'rho'? (parameters: …)``,
    ``mechanism geometric, parameter epsilon: expected a number above 0 and at most 1000, got
    -1``, ``… parameter split: expected one of census2020, even, got 'evn'; did you mean
    'even'?``; a check of the parameters together reads ``mechanism X: what is wrong``. The
    errors of one union-typed field (one per branch) make one problem stating every branch.
    """
    grouped: dict[tuple[Any, ...], list[ErrorDetails]] = {}
    for n, error in enumerate(errors):
        loc = error["loc"]
        if not loc:
            key: tuple[Any, ...] = ("", n)
        elif any(isinstance(part, str) for part in loc[1:]):  # a union's branch tag
            key = (loc[0], "union")
        else:
            key = tuple(loc)
        grouped.setdefault(key, []).append(error)
    # an unknown name first: a misspelt parameter is the likeliest cause of the others
    ordered = sorted(grouped.values(), key=lambda g: g[0]["type"] != "extra_forbidden")
    return [_problem(subject, model, group) for group in ordered]


def _problem(subject: str, model: type[BaseModel], group: list[ErrorDetails]) -> str:
    first = group[0]
    loc, kind = first["loc"], first["type"]
    fields = list(model.model_fields)
    if not loc:  # a check of the parameters together
        return f"{subject}: {_validator_text(first)}"
    name = str(loc[0])
    if kind == "extra_forbidden":
        return f"{subject}: unknown parameter {name!r}{did_you_mean(name, fields)} " + (
            f"(parameters: {', '.join(fields)})" if fields else "(it takes no parameters)"
        )
    if kind == "missing":
        return f"{subject}: missing required parameter {name}"
    info = model.model_fields.get(name)
    annotation = info.annotation if info is not None else Any
    where = f"{subject}, parameter {name}"
    if len(group) > 1 or any(isinstance(part, str) for part in loc[1:]):
        given = min(group, key=lambda e: len(e["loc"]))["input"]
        return f"{where}: expected {expected_words(annotation)}, got {shown(given)}"
    where += "".join(f", item {part + 1}" for part in loc[1:] if isinstance(part, int))
    value, hint = first["input"], ""
    if kind in ("value_error", "assertion_error"):
        return f"{where}: {_validator_text(first)}"
    if kind in RANGE_ERRORS and info is not None:
        expected = f"{_noun(annotation)} {range_words(info.metadata)}"
    elif kind == "literal_error":
        choices = literal_choices(annotation) or re.findall(
            r"'([^']*)'", str(first.get("ctx", {}).get("expected", ""))
        )
        expected = f"one of {', '.join(choices)}"
        if isinstance(value, str):
            hint = did_you_mean(value, choices)
    elif kind == "bool_not_number":
        expected = _noun(annotation)
    elif kind in EXPECTED:
        expected = {"whole": "a whole number", "number": "a number"}.get(
            EXPECTED[kind], EXPECTED[kind]
        )
    else:  # a type of error our models have not met: pydantic's words, made to fit
        text = str(first["msg"]).rstrip(".")
        return f"{where}: {text[:1].lower()}{text[1:]}, got {shown(value)}"
    return f"{where}: expected {expected}, got {shown(value)}{hint}"


def _validator_text(error: ErrorDetails) -> str:
    """The message of a check of ours (a ValueError or an assert), without pydantic's prefix."""
    return str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")


def did_you_mean(given: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for a near-miss of one of ``choices``, else nothing."""
    folded = {c.lower(): c for c in choices}
    text = given.strip().lower()
    close = difflib.get_close_matches(text, list(folded), n=1, cutoff=0.6)
    match = folded.get(text) or (folded[close[0]] if close else None)
    return f"; did you mean {match!r}?" if match is not None and match != given else ""


def _noun(annotation: Any) -> str:
    """The number a numeric field holds: "a whole number" or "a number"."""
    kinds = field_kinds(annotation)
    return "a whole number" if int in kinds and not kinds & {float, Decimal} else "a number"


def range_words(metadata: Sequence[Any]) -> str:
    """A field's bounds in words: "above 0", "from 0 to 1", "above 0 and at most 1000"."""
    bounds = {}
    for item in metadata:
        for name in ("gt", "ge", "lt", "le"):
            if isinstance(item, getattr(annotated_types, name.title())):
                bounds[name] = _bound(getattr(item, name))
    if "ge" in bounds and "le" in bounds:
        return f"from {bounds['ge']} to {bounds['le']}"
    words = {"gt": "above", "ge": "at least", "lt": "below", "le": "at most"}
    text = " and ".join(f"{words[name]} {bound}" for name, bound in bounds.items())
    return f"of {text}" if text.startswith("at ") else text


def _bound(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def expected_words(annotation: Any) -> str:
    """What a field takes, in words: "a file path or a table", "text or a list of tables"."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        branches = [expected_words(arg) for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(dict.fromkeys(branches))
    if origin is Literal:
        return f"one of {', '.join(literal_choices(annotation))}"
    kind = origin if origin is not None else annotation
    if kind is list and "dict" in str(annotation):
        return "a list of tables"
    if isinstance(kind, type) and issubclass(kind, os.PathLike):
        return "a file path"
    return {
        int: "a whole number",
        float: "a number",
        Decimal: "a number",
        bool: "true or false",
        str: "text",
        list: "a list",
        tuple: "a list",
        dict: "a table",
    }.get(kind, str(kind))


def literal_choices(annotation: Any) -> list[str]:
    """The values of every ``Literal`` in an annotation (nested ones too), as text."""
    if get_origin(annotation) is Literal:
        return [str(arg) for arg in get_args(annotation)]
    return [choice for arg in get_args(annotation) for choice in literal_choices(arg)]


def shown(value: Any) -> str:
    """A given value as a message shows it: numbers bare, text quoted, long values shortened."""
    if isinstance(value, str):
        text = value if len(value) <= SHOWN_LENGTH else value[:SHOWN_LENGTH] + "…"
        try:
            Decimal(value.strip())
        except ArithmeticError:
            return repr(text)
        return text if value.strip() == value and value else repr(text)
    if isinstance(value, bool | int | float | Decimal | Fraction) or value is None:
        return str(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, os.PathLike):
        return repr(os.fspath(value))
    text = repr(value)
    return text if len(text) <= SHOWN_LENGTH else f"{text[:SHOWN_LENGTH]}…"
