"""What every result is made of: one figure in long form (:class:`Figure`), figures read back
from JSON, and the layout version of the files the results are written to.

A figure that was not measured or does not apply is a :class:`NotMeasured` carrying its reason,
never 0 and never a bare null.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sdclab.core.figures import NotMeasured, Value, as_json, from_json

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


def lookup(mapping: Mapping[str, T], key: str, what: str) -> T:
    """``mapping[key]``, or a KeyError that names what there is."""
    if key not in mapping:
        raise KeyError(f"no {what} {key!r}; {what}s: {', '.join(mapping)}")
    return mapping[key]


def show_share(value: Value) -> str:
    """A share for a line of text (\"n/a\" when not measured)."""
    return "n/a" if isinstance(value, NotMeasured) else f"{value:.1%}"
