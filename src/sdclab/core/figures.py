"""A figure, or why there is none: what every result of sdclab is made of.

A figure that was not measured, or does not apply, is :class:`NotMeasured` with its reason —
shown as ``n/a (reason)``, never as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeAlias


@dataclass(frozen=True)
class NotMeasured:
    """A figure that was not measured, or does not apply, and why."""

    reason: str

    def __repr__(self) -> str:
        return f"n/a ({self.reason})"

    def to_dict(self) -> dict[str, str]:
        return {"not_measured": self.reason}


Value: TypeAlias = float | int | NotMeasured
"""A figure, or why there is none."""


def measured(value: float | int | None, reason: str) -> Value:
    """``value``, or :class:`NotMeasured` with ``reason`` when it is None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NotMeasured(reason)
    return value


def from_json(value: Any, reason: str = "not recorded") -> Value:
    """A figure read back from JSON (or from a figure function): ``{"not_measured": why}``, null
    and NaN become NotMeasured."""
    if isinstance(value, Mapping) and "not_measured" in value:
        return NotMeasured(str(value["not_measured"]))
    return measured(value, reason)


def as_json(value: Any) -> Any:
    """A result (or a figure, a list, a mapping of them) in JSON form."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    return value


def fields_json(result: Any, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A result dataclass's fields (but ``exclude``), in order, in JSON form."""
    return {
        f.name: as_json(getattr(result, f.name)) for f in fields(result) if f.name not in exclude
    }
