"""What every mechanism carries (:class:`Mechanism`) and how its parameters are validated.

Parameters arrive as ``key=value`` strings from the command line (``--set``) or as values from an
experiment file; a pydantic model per mechanism validates them once, at the boundary, and bad
values become one clear :class:`InputError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sdclab.accounting import SpecCard
from sdclab.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

    from sdclab.geography import Geography
    from sdclab.population import Population
    from sdclab.protection.audit_plans import Trials
    from sdclab.release import Release

P = TypeVar("P", bound=BaseModel)


class Parameters(BaseModel):
    """Base of every mechanism's parameter model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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

    def recorded(self) -> dict[str, Any]:
        """The parameters as a release records them: without the execution settings, and with
        the content of any file they name in place of its path (a mechanism with file settings
        extends this), since a path is local and an attacker is entitled to the content."""
        return self.model_dump(mode="json", exclude=set(self.EXECUTION))


@dataclass(frozen=True)
class Artifact:
    """A payload a mechanism publishes beside its tables, kept as ``artifacts/<name>.parquet``
    (an MDF, noisy measurements, population-group tables, a p-table)."""

    name: str
    meaning: str
    check: Callable[[pl.DataFrame, Geography], str | None] | None = None
    """A problem of a frame read from a release (its columns, types, geounits), or None."""


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


@dataclass(frozen=True, kw_only=True)
class Mechanism(Generic[P]):
    """A mechanism and everything it carries: its parameters, its protection, its guarantee,
    the payloads it publishes, what it says about its noise, how it is evaluated and audited."""

    name: str
    summary: str
    """What it is, in one line."""
    parameters: type[P]
    guarantee: Callable[[P], SpecCard]
    """The specification card from the parameters alone (without data)."""
    protect: Callable[[Population, P, np.random.Generator], Release] | None = None
    """The mechanism itself: population, parameters and random stream → release."""
    artifacts: tuple[Artifact, ...] = ()
    """The payloads its releases may carry beside the tables."""
    noise: Callable[[P], NoisePublication] | None = None
    """What its release publishes about its own noise."""
    diagnostics: Callable[[Population, Release], dict[str, Any]] | None = None
    """Evaluation only: the mechanism's own figures about a release that need the confidential
    population it was made from (never written into the release)."""
    risk_analysis: Callable[[Release, Population | None], dict[str, Any]] | None = None
    """The mechanism's own disclosure-risk analysis of a release (the cell key method's)."""
    audit_plan: Callable[[Mapping[str, Any], int, int], Trials] | None = None
    """How a privacy audit observes it: (settings, trials, seed) → outputs on two neighbouring
    datasets and the guarantee's claim for them."""

    def parse(self, settings: Mapping[str, Any]) -> P:
        """Validated parameters from a mapping (strings are converted as pydantic does)."""
        try:
            return self.parameters.model_validate(dict(settings))
        except ValidationError as exc:
            first = exc.errors()[0]
            known = ", ".join(self.parameters.model_fields) or "none: it takes no parameters"
            if not first["loc"]:  # a check of the parameters together
                message = str(first["msg"]).removeprefix("Value error, ")
                raise InputError(f"mechanism {self.name}: {message}") from None
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(
                f"mechanism {self.name}, parameter {where}: {first['msg']} "
                f"(known parameters: {known})"
            ) from None

    def artifact(self, name: str) -> Artifact | None:
        """The declared artifact called ``name``, if any."""
        return next((a for a in self.artifacts if a.name == name), None)

    def __repr__(self) -> str:
        return f"<mechanism {self.name}: {self.summary}>"


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


def check_budget_range(
    name: str,
    value: Decimal | Fraction,
    scales: Iterable[Fraction],
    supported: tuple[Fraction, Fraction],
    scale_name: str,
) -> None:
    """Refuse a budget whose noise lies outside what the exact sampler supports.

    Every noise ``scale`` a budget ``value`` sets is inversely proportional to it, so the range
    of budgets the sampler can serve follows from the scales at this value; a ValueError names it.
    """
    scales = list(scales)
    if not scales:
        return
    low, high = supported
    smallest, largest = min(scales), max(scales)
    if low <= smallest and largest <= high:
        return
    budget = Fraction(value)
    lowest, highest = budget * largest / high, budget * smallest / low
    shown = value if isinstance(value, Decimal) else _show(value)
    raise ValueError(
        f"{name} = {shown} needs noise of {scale_name} outside the {_show(low)}..{_show(high)} "
        f"the exact sampler supports; expected {name} from {_show(lowest)} to {_show(highest)}"
    )


def _show(value: Fraction) -> str:
    """A rational number for a message, at any magnitude."""
    try:
        return f"{float(value):.4g}"
    except OverflowError:
        return "a number beyond 1e308"
