"""What every mechanism declares: its name, its parameters (validated) and its specification card.

Parameters arrive as ``key=value`` strings from the command line (``--set``) or as values from an
experiment file; a pydantic model per mechanism validates them once, at the boundary, and bad
values become one clear :class:`InputError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sdclab.accounting import SpecCard
from sdclab.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from sdclab.population import Population
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
class MechanismEntry(Generic[P]):
    """A mechanism as the registry knows it."""

    name: str
    summary: str
    parameters: type[P]
    card: Callable[[P], SpecCard]
    """The card from the parameters alone (without data)."""
    protect: Callable[[Population, P, np.random.Generator], Release] | None = None
    """The mechanism itself: population, parameters and random stream → release."""
    diagnostics: Callable[[Population, Release], dict[str, Any]] | None = None
    """Evaluation only: the mechanism's own figures about a release that need the confidential
    population it was made from (never written into the release; see ``evaluation.diagnostics``)."""

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
