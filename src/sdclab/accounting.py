"""Privacy accounting and the DP specification card.

Every mechanism states its guarantee in the five building blocks of Bailie, Gong & Meng
(``specs/swapping-dp.md`` §1): domain, multiverse (invariants), input premetric (protection unit and
neighbouring relation), output premetric, and budget — plus what the guarantee covers and its
caveats. A mechanism without a formal guarantee says so with the reason; no bare ε is ever printed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

OutputPremetric = Literal["none", "pure-DP (D_Mult)", "approximate DP (D_Mult^delta)", "zCDP"]


@dataclass(frozen=True)
class Budget:
    """A protection-loss budget: ε for pure/approximate DP (with δ), ρ for zCDP, or none at all."""

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    reason_if_none: str = ""

    @property
    def is_formal(self) -> bool:
        return self.epsilon is not None or self.rho is not None

    def text(self) -> str:
        if self.rho is not None:
            return f"rho = {self.rho:g} (zCDP)"
        if self.epsilon is not None and self.delta:
            return f"epsilon = {self.epsilon:g}, delta = {self.delta:g}"
        if self.epsilon is not None:
            return f"epsilon = {self.epsilon:g}"
        return f"infinite: no formal guarantee ({self.reason_if_none})"


@dataclass(frozen=True)
class SpecCard:
    """A DP specification in the five building blocks, with coverage and caveats."""

    mechanism: str
    domain: str
    multiverse: str
    invariants: tuple[str, ...]
    protection_unit: str
    neighbours: str
    output_premetric: OutputPremetric
    budget: Budget
    covers: str
    caveats: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["invariants"] = list(self.invariants)
        data["caveats"] = list(self.caveats)
        data["budget"] = {k: v for k, v in data["budget"].items() if v not in (None, "")}
        data["budget"]["summary"] = self.budget.text()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpecCard:
        budget = {k: v for k, v in data["budget"].items() if k != "summary"}
        return cls(
            **{
                **data,
                "invariants": tuple(data["invariants"]),
                "caveats": tuple(data.get("caveats", ())),
                "budget": Budget(**budget),
            }
        )

    def render(self) -> str:
        """The card as plain text, one block per line group."""
        invariants = "; ".join(self.invariants) if self.invariants else "none"
        lines = [
            f"DP specification card — mechanism: {self.mechanism}",
            f"  1. Domain (who is protected):       {self.domain}",
            f"  2. Multiverse (invariants):         {self.multiverse}",
            f"       invariants: {invariants}",
            f"  3. Input premetric (what changes):  unit = {self.protection_unit};"
            f" {self.neighbours}",
            f"  4. Output premetric (how measured): {self.output_premetric}",
            f"  5. Budget (how much):               {self.budget.text()}",
            f"  Covers: {self.covers}",
        ]
        lines += [f"  Caveat: {c}" for c in self.caveats]
        return "\n".join(lines)


def no_protection_card() -> SpecCard:
    """The card of the exact release: nothing is protected."""
    return SpecCard(
        mechanism="none",
        domain="the confidential input files as given",
        multiverse="a single universe per dataset: every published statistic is exact",
        invariants=("every published table cell",),
        protection_unit="none",
        neighbours="no neighbouring datasets are protected",
        output_premetric="none",
        budget=Budget(reason_if_none="no protection: the tables are the exact confidential counts"),
        covers="all tables of the release",
        caveats=("Not for publication: this release is the confidential tabulation itself.",),
    )
