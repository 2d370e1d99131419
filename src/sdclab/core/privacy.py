"""Privacy semantics as values: what a guarantee measures, whom it protects, against which
neighbours, within which invariants, and its figure on one common axis.

A :class:`Guarantee` states a mechanism's guarantee as it computes it (the output measure, the
protection unit, the neighbouring relation, the invariants, the budget as exact fractions where
the mechanism computes them so) and, derived by valid conversions only, the loss of **one
person's record changed (replace), within the invariants, over the whole release**. That loss,
turned into ε at a stated δ, is the common axis on which releases are compared
(:func:`common_axis`); where no valid conversion exists it is :class:`NotMeasured` with the
reason. Every conversion used here is derived in ``docs/privacy.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from sdclab.core import zcdp
from sdclab.core.figures import NotMeasured

Measure = Literal["pure", "approximate", "zcdp", "none"]
Relation = Literal["add_remove", "replace"]
ProtectionUnit = Literal["person", "household", "none"]
Scope = Literal["release", "cell"]

MEASURE_TEXT: dict[Measure, str] = {
    "pure": "pure ε-DP",
    "approximate": "approximate (ε, δ)-DP",
    "zcdp": "ρ-zCDP",
    "none": "none",
}
RELATION_TEXT: dict[Relation, str] = {
    "add_remove": "add or remove one record",
    "replace": "replace one record (the other records and the invariants unchanged)",
}
UNIT_TEXT: dict[ProtectionUnit, str] = {
    "person": "person record",
    "household": "household record (the household with its persons)",
    "none": "none",
}

COMMON_DELTA = Fraction(1, 10**10)
"""δ at which the common-axis ε is stated unless asked otherwise."""
COMMON_AXIS = (
    "ε at δ for one person's record changed (replace), within the stated invariants, over the "
    "whole release"
)

Number = Fraction | float


def _number(value: Number) -> dict[str, Any]:
    """A budget figure in JSON: its value, and the exact fraction when it is one."""
    out: dict[str, Any] = {"value": float(value)}
    if isinstance(value, Fraction):
        out["exact"] = str(value)
    return out


def _read_number(data: Mapping[str, Any]) -> Number:
    return Fraction(data["exact"]) if "exact" in data else float(data["value"])


@dataclass(frozen=True)
class Loss:
    """A privacy loss under one measure: ε (pure), (ε, δ) (approximate) or ρ (zCDP)."""

    measure: Literal["pure", "approximate", "zcdp"]
    epsilon: Number | None = None
    delta: Number | None = None
    rho: Number | None = None

    def __post_init__(self) -> None:
        needed = {"pure": ("epsilon",), "approximate": ("epsilon", "delta"), "zcdp": ("rho",)}
        for name in ("epsilon", "delta", "rho"):
            given = getattr(self, name) is not None
            if given != (name in needed[self.measure]):
                raise ValueError(f"a {self.measure} loss {'has no' if given else 'needs'} {name}")

    def text(self) -> str:
        if self.measure == "zcdp":
            assert self.rho is not None
            return f"rho = {float(self.rho):.4g} (zCDP)"
        assert self.epsilon is not None
        if self.measure == "approximate":
            assert self.delta is not None
            return f"epsilon = {float(self.epsilon):.4g}, delta = {float(self.delta):.3g}"
        return f"epsilon = {float(self.epsilon):.4g} (pure DP)"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"measure": self.measure}
        for name in ("epsilon", "delta", "rho"):
            value = getattr(self, name)
            if value is not None:
                out[name] = _number(value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Loss:
        return cls(
            data["measure"],
            **{k: _read_number(data[k]) for k in ("epsilon", "delta", "rho") if k in data},
        )


# ---------------------------------------------------------------------------------------------
# Conversions: each returns the converted loss and the label that says which one was used
# ---------------------------------------------------------------------------------------------


def add_remove_to_replace(loss: Loss, zcdp_factor: int | None = None) -> tuple[Loss, str]:
    """A replace is a removal followed by an addition.

    Pure ε: 2ε (group privacy of two). zCDP: ``zcdp_factor``·ρ when the mechanism's own
    sensitivity gives it (2 for a Gaussian histogram, whose Δ₂² goes from 1 to 2), else 4ρ (group
    privacy of two, k²ρ). Approximate: (2ε, (1 + e^ε)δ)."""
    if loss.measure == "pure":
        assert loss.epsilon is not None
        return Loss("pure", epsilon=2 * loss.epsilon), "add/remove → replace: 2ε (group of two)"
    if loss.measure == "zcdp":
        assert loss.rho is not None
        factor = zcdp_factor or 4
        why = (
            f"{factor}ρ from the mechanism's sensitivity"
            if zcdp_factor
            else "4ρ (zCDP group privacy of two)"
        )
        return Loss("zcdp", rho=factor * loss.rho), f"add/remove → replace: {why}"
    assert loss.epsilon is not None and loss.delta is not None
    # (1 + e^ε)·δ in logarithms: e^ε overflows a float for ε above 709
    log_delta = _log(loss.delta) + float(loss.epsilon) + math.log1p(math.exp(-float(loss.epsilon)))
    return (
        Loss("approximate", epsilon=2 * loss.epsilon, delta=_from_log(log_delta)),
        "add/remove → replace: (2ε, (1 + e^ε)δ) (group of two)",
    )


def group(loss: Loss, k: int) -> tuple[Loss, str]:
    """Group privacy: a guarantee for one record covers k records at kε (pure), k²ρ (zCDP) or
    (kε, k·e^{(k−1)ε}·δ) (approximate)."""
    if k < 1:
        raise ValueError(f"a group has at least one record, got {k}")
    if loss.measure == "pure":
        assert loss.epsilon is not None
        return Loss("pure", epsilon=k * loss.epsilon), f"group of {k}: {k}ε"
    if loss.measure == "zcdp":
        assert loss.rho is not None
        return Loss("zcdp", rho=k * k * loss.rho), f"group of {k}: {k}²ρ"
    assert loss.epsilon is not None and loss.delta is not None
    delta = _from_log(math.log(k) + (k - 1) * float(loss.epsilon) + _log(loss.delta))
    return (
        Loss("approximate", epsilon=k * loss.epsilon, delta=delta),
        f"group of {k}: ({k}ε, {k}e^({k - 1}ε)δ)",
    )


def compose(*losses: Loss) -> Loss:
    """Sequential composition of losses of one measure: ε, (ε, δ) or ρ add up."""
    measures = {loss.measure for loss in losses}
    if len(measures) != 1:
        raise ValueError(f"losses of different measures do not add: {sorted(measures)}")
    (measure,) = measures

    def total(name: str) -> Number | None:
        values = [getattr(loss, name) for loss in losses]
        if values[0] is None:
            return None
        if all(isinstance(v, Fraction) for v in values):
            return sum(values, Fraction(0))
        return float(sum(float(v) for v in values))

    delta = total("delta")
    return Loss(
        measure,
        epsilon=total("epsilon"),
        delta=None if delta is None else _capped(delta),
        rho=total("rho"),
    )


def _log(delta: Number) -> float:
    return math.log(float(delta)) if delta > 0 else -math.inf


def _from_log(log_delta: float) -> float:
    """δ from its logarithm, capped at 1."""
    return 1.0 if log_delta >= 0 else math.exp(log_delta)


def _capped(delta: Number) -> Number:
    """A δ above 1 says no more than δ = 1 (no guarantee at all)."""
    return min(delta, Fraction(1) if isinstance(delta, Fraction) else 1.0)


# ---------------------------------------------------------------------------------------------
# The guarantee and its common-axis figure
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invariant:
    """Statistics published exactly: the neighbours of the guarantee all share them."""

    statistic: str
    levels: str
    """Where: "nation, state", "every block", "every geounit"."""

    def text(self) -> str:
        return f"{self.statistic} ({self.levels})"


@dataclass(frozen=True)
class Guarantee:
    """A mechanism's guarantee as values, with the loss of one person's record changed."""

    measure: Measure
    unit: ProtectionUnit
    relation: Relation | None
    loss: Loss | None
    """The guarantee as the mechanism computes it, under its own unit and relation; None when
    there is no formal guarantee (``reason`` says why)."""
    person_replace: Loss | NotMeasured
    """The loss of one person's record changed, within the invariants, over the whole release —
    or why no valid conversion gives one."""
    derivation: tuple[str, ...] = ()
    """The conversions that lead from ``loss`` to ``person_replace``, each labelled."""
    invariants: tuple[Invariant, ...] = ()
    scope: Scope = "release"
    asked: Loss | None = None
    """The budget as the parameters ask for it, when it differs from ``loss`` (geometric noise's
    ε before the unit tables' dependence on persons is accounted for)."""
    reason: str = ""
    """Why there is no formal guarantee (``measure`` none)."""
    qualifier: str = ""
    """What the common-axis figure says beside itself wherever it stands next to another
    mechanism's, when its universe is far narrower than theirs ("within the PSA's invariants
    (…)"); empty where the stated invariants need no such word."""
    open: bool = False
    """No formal guarantee because none is known (an open problem), not because the mechanism
    has an unbounded loss: the budget reads "unknown", not "infinite"."""

    def __post_init__(self) -> None:
        if (self.measure == "none") != (self.loss is None):
            raise ValueError("a guarantee has a loss exactly when its measure is not none")
        if self.loss is not None and self.loss.measure != self.measure:
            raise ValueError(f"a {self.measure} guarantee with a {self.loss.measure} loss")
        if self.measure == "none" and not self.reason:
            raise ValueError("a mechanism without a formal guarantee says why")

    @property
    def is_formal(self) -> bool:
        return self.loss is not None

    def text(self) -> str:
        """The budget in one line (no bare ε: the measure is named; no figure that guarantees
        nothing: a δ of 1 is no guarantee, and a per-cell ε is the parameter its δ is stated
        for, shown beside that δ)."""
        if self.loss is None:
            if self.open:
                return f"unknown: no closed form ({self.reason})"
            return f"infinite: no formal guarantee ({self.reason})"
        loss = self.loss
        if loss.measure == "approximate" and loss.delta is not None and loss.delta >= 1:
            return (
                "none in effect: delta = 1 (an event may reveal the data with certainty), "
                f"stated at epsilon = {float(loss.epsilon or 0):.4g}"
            )
        if self.scope == "cell" and loss.measure == "approximate":
            return (
                f"per released cell: delta = {float(loss.delta or 0):.3g} at epsilon = "
                f"{float(loss.epsilon or 0):.4g} (the epsilon at which delta is stated)"
            )
        return loss.text()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "measure": self.measure,
            "unit": self.unit,
            "relation": self.relation,
            "scope": self.scope,
            "loss": None if self.loss is None else self.loss.to_dict(),
            "asked": None if self.asked is None else self.asked.to_dict(),
            "invariants": [{"statistic": i.statistic, "levels": i.levels} for i in self.invariants],
            "person_replace": self.person_replace.to_dict(),
            "derivation": list(self.derivation),
            "summary": self.text(),
        }
        if self.reason:
            out["reason"] = self.reason
        if self.qualifier:
            out["qualifier"] = self.qualifier
        if self.open:
            out["open"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Guarantee:
        """A guarantee read back from :meth:`to_dict`'s form; unknown values are a ValueError."""
        known: dict[str, tuple[Any, ...]] = {
            "measure": tuple(MEASURE_TEXT),
            "unit": tuple(UNIT_TEXT),
            "relation": (*RELATION_TEXT, None),
            "scope": ("release", "cell"),
        }
        for key, values in known.items():
            if data.get(key, "release" if key == "scope" else "") not in values:
                raise ValueError(f"unknown {key} {data.get(key)!r}")
        replace = data["person_replace"]
        return cls(
            measure=data["measure"],
            unit=data["unit"],
            relation=data["relation"],
            scope=data.get("scope", "release"),
            loss=None if data["loss"] is None else Loss.from_dict(data["loss"]),
            asked=None if data.get("asked") is None else Loss.from_dict(data["asked"]),
            invariants=tuple(Invariant(i["statistic"], i["levels"]) for i in data["invariants"]),
            person_replace=(
                NotMeasured(str(replace["not_measured"]))
                if "not_measured" in replace
                else Loss.from_dict(replace)
            ),
            derivation=tuple(data.get("derivation", ())),
            reason=str(data.get("reason", "")),
            qualifier=str(data.get("qualifier", "")),
            open=bool(data.get("open", False)),
        )


def no_guarantee(reason: str, unit: ProtectionUnit = "none", **fields: Any) -> Guarantee:
    """The guarantee of a mechanism that has none, with the reason (also the common axis's)."""
    return Guarantee(
        measure="none",
        unit=unit,
        relation=None,
        loss=None,
        person_replace=NotMeasured(
            f"{'no closed form known' if fields.get('open') else 'no formal guarantee'}: {reason}"
        ),
        reason=reason,
        **fields,
    )


def composed_over_cells(per_cell: Loss, cells: int) -> Guarantee:
    """One person's guarantee over ``cells`` published cells whose noises are independent, each
    ``per_cell`` (ε, δ) for one record added or removed: (tε, 1 − (1 − δ)^t), the k-fold
    composition bound of Kairouz, Oh & Viswanath (2015, Theorem 3.3 at i = 0; tighter than
    basic composition's tδ), and the replace relation from it."""
    if per_cell.measure != "approximate" or per_cell.delta is None or per_cell.epsilon is None:
        raise ValueError(f"composition over cells takes an (epsilon, delta) loss, got {per_cell}")
    delta = -math.expm1(cells * math.log1p(-float(per_cell.delta)))
    released = Loss("approximate", epsilon=cells * per_cell.epsilon, delta=_capped(delta))
    replaced, step = add_remove_to_replace(released)
    return Guarantee(
        measure="approximate",
        unit="person",
        relation="add_remove",
        loss=released,
        person_replace=replaced,
        derivation=(
            f"composition over t = {cells:,} cells with independent noise: (tε, 1 − (1 − δ)^t) "
            "(Kairouz, Oh & Viswanath 2015)",
            step,
        ),
    )


def person_guarantee(
    loss: Loss,
    relation: Relation,
    *,
    zcdp_factor: int | None = None,
    invariants: tuple[Invariant, ...] = (),
    asked: Loss | None = None,
) -> Guarantee:
    """A guarantee per person record over the whole release; the person-replace loss follows
    from ``loss`` (converted from add/remove when it is stated so)."""
    derivation: tuple[str, ...] = ()
    replace = loss
    if relation == "add_remove":
        replace, step = add_remove_to_replace(loss, zcdp_factor)
        derivation = (step,)
    return Guarantee(
        measure=loss.measure,
        unit="person",
        relation=relation,
        loss=loss,
        person_replace=replace,
        derivation=derivation,
        invariants=invariants,
        asked=asked,
    )


@dataclass(frozen=True)
class CommonFigure:
    """A release's figure on the common axis: ε at δ for one person's record changed."""

    epsilon: float
    """The headline: the tight conversion for zCDP, the loss itself for pure DP."""
    delta: float
    epsilon_standard: float | None
    """zCDP only: the standard bound ρ + 2√(ρ ln 1/δ), beside the tight one."""
    rho: Number | None
    """zCDP only: ρ of one person's record changed."""
    derivation: tuple[str, ...]
    qualifier: str = ""
    """The guarantee's :attr:`Guarantee.qualifier`: shown beside the figure wherever it stands
    next to another mechanism's."""

    def __repr__(self) -> str:
        return f"<CommonFigure: {self.text()}>"

    def text(self) -> str:
        text = f"epsilon = {self.epsilon:.2f} at delta = {self.delta:.0e}"
        if self.epsilon_standard is not None:
            text += f" (tight; standard bound {self.epsilon_standard:.2f})"
        return f"{text} {self.qualifier}" if self.qualifier else text

    def to_dict(self) -> dict[str, Any]:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "epsilon_standard": self.epsilon_standard,
            "rho": None if self.rho is None else _number(self.rho),
            "derivation": list(self.derivation),
            "axis": COMMON_AXIS,
        }
        if self.qualifier:
            out["qualifier"] = self.qualifier
        return out


def common_axis(
    guarantee: Guarantee, delta: float | Fraction = COMMON_DELTA
) -> CommonFigure | NotMeasured:
    """ε at ``delta`` for one person's record changed, within the invariants, over the whole
    release; NotMeasured with the reason where no valid conversion exists."""
    loss = guarantee.person_replace
    if isinstance(loss, NotMeasured):
        return loss
    target = float(delta)
    steps = guarantee.derivation
    if loss.measure == "pure":
        assert loss.epsilon is not None
        return CommonFigure(
            float(loss.epsilon),
            target,
            None,
            None,
            (*steps, "pure ε holds at every δ"),
            guarantee.qualifier,
        )
    if loss.measure == "approximate":
        assert loss.epsilon is not None and loss.delta is not None
        if float(loss.delta) > target:
            return NotMeasured(
                f"bounded noise: δ ≥ {float(loss.delta):.3g} for one person's change, above "
                f"δ = {target:.0e}"
            )
        return CommonFigure(
            float(loss.epsilon),
            target,
            None,
            None,
            (*steps, "(ε, δ′) with δ′ ≤ δ holds at δ"),
            guarantee.qualifier,
        )
    assert loss.rho is not None
    rho = float(loss.rho)
    return CommonFigure(
        zcdp.epsilon_for_delta(rho, target),
        target,
        zcdp.epsilon_standard(rho, target),
        loss.rho,
        (
            *steps,
            "zCDP → (ε, δ): tight conversion (Canonne, Kamath & Steinke 2020), the standard bound "
            "ρ + 2√(ρ ln 1/δ) beside it",
        ),
        guarantee.qualifier,
    )
