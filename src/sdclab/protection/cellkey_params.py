"""The cell key method's settings: the p-table (a preset, a max-entropy design or a file), keys,
suppression and swapping, and the registry entry they belong to (docs/cellkey.md)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sdclab.core.errors import InputError
from sdclab.protection.base import Mechanism, Parameters, Unit, WorkloadParameters, parse_settings
from sdclab.protection.ptable import (
    OnsPTable,
    PTable,
    create_ptable,
    ons_10_5_ptable,
    read_ptable,
)
from sdclab.release import artifact_file

AnyPTable = PTable | OnsPTable

EXACT_FLOAT = 2**53
"""Integers below this are exact in float64."""


@dataclass(frozen=True)
class MaxentDesign:
    """The settings of a max-entropy p-table (the ptable package's D, V, js, pstay), so that a
    preset names a design and its card can say which."""

    bound: int
    variance: Decimal
    js: int = 0
    pstay: Decimal | None = None
    source: str = ""

    def settings(self) -> dict[str, Any]:
        """The design as the settings of ``ptable=maxent`` (numbers as JSON numbers)."""
        pstay = None if self.pstay is None else float(self.pstay)
        return {
            "bound": self.bound,
            "variance": float(self.variance),
            "js": self.js,
            "pstay": pstay,
        }

    def text(self) -> str:
        """The design in words: D, V, js and pstay, and where it comes from."""
        stay = "no pstay bound" if self.pstay is None else f"pstay = {self.pstay}"
        where = f"; {self.source}" if self.source else ""
        return (
            f"the max-entropy p-table (ptable=maxent) with D = {self.bound}, "
            f"V = {self.variance}, js = {self.js}, {stay}{where}"
        )


MAXENT_PRESETS: dict[str, MaxentDesign] = {
    "ess-d2": MaxentDesign(
        2,
        Decimal("1.08"),
        js=1,
        source="the ESS (Eurostat) recommendation for the 2021 census round",
    ),
    "d8-v3": MaxentDesign(
        8, Decimal(3), js=0, pstay=Decimal("0.6"), source="a wide-noise design in use in Europe"
    ),
}
"""Max-entropy p-tables in use in Europe, by name (docs/cellkey.md, *p-table presets*)."""

PTABLE_PRESETS = ("ons-10-5", "maxent", *MAXENT_PRESETS)
PTABLE_ARTIFACT = "ptable"


class CellKeyParameters(WorkloadParameters):
    """The p-table (a preset, a max-entropy design or a file), suppression, keys and swapping."""

    ptable: str = "ons-10-5"
    """"ons-10-5" (the ONS 10/5 table), "maxent" (built from bound and variance), a max-entropy
    preset ("ess-d2": D 2, V 1.08, js 1; "d8-v3": D 8, V 3, js 0, pstay 0.6) or the path of a
    p-table CSV (long format or ONS format)"""
    bound: Annotated[int | None, Unit("count")] = Field(None, ge=1, le=100)
    """maxent (required there): D, the largest noise a cell can get (±D)"""
    variance: Annotated[Decimal | None, Unit("variance of a cell's noise")] = Field(
        None, gt=0, allow_inf_nan=False
    )
    """maxent (required there): V, the most noise variance a p-table row may have"""
    js: Annotated[int, Unit("count")] = Field(0, ge=0, le=100)
    """maxent: counts 1..js are never published (0: none excluded)"""
    pstay: Annotated[Decimal | None, Unit("probability 0–1")] = Field(None, gt=0, lt=1)
    """maxent: lower bound of p(i→i), the probability a count is published unchanged (default: no
    bound)"""
    threshold: Annotated[int, Unit("count")] = Field(0, ge=0, lt=EXACT_FLOAT)
    """published counts below this are suppressed, omitted like zeros (0: none); below 2^53, the
    counts that float64, in which the tables' counts are read, holds exactly"""
    key_space: Annotated[int | None, Unit("keys")] = Field(None, ge=2, le=2**32)
    """K: record keys are 0..K−1 and a cell key is their sum mod K (default: the ONS table's, else
    256)"""
    keys: Literal["stored", "drawn", "ids"] = "stored"
    """stored: the population's record_key (drawn once if it has none); drawn: fresh keys; ids:
    person_id / unit_id mod K, as ONS derives keys from ons_id"""
    swap: Literal["none", "swap", "swap-low", "swap-high"] = "none"
    """none, or targeted record swapping first with the defaults of swap, swap-low or swap-high,
    record keys travelling along (the ESS 2021 recipe)"""
    swap_settings: str = ""
    """the swap's own settings over its preset's, as key=value pairs separated by ';' (say
    "rate=0.05;k_anonymity=3;risk_levels=nuts3,lau"): targeted record swapping as the ESS
    recommends, then the cell key method, as one mechanism"""
    epsilon: Annotated[float, Unit("epsilon ((ε, δ)-DP)")] = Field(1.0, gt=0, le=50)
    """ε at which the card's δ is stated"""
    spsn: bool = True
    """same participants, same noise; false gives every published cell an independent uniform cell
    key (the no-SPSN baseline of the averaging attack; research only)"""

    def swap_parameters(self) -> Parameters | None:
        """The swap that runs first, parsed for this census (None: no swap)."""
        if self.swap == "none":
            if self.swap_settings:
                raise ValueError("swap_settings: give the swap that runs first (swap=swap)")
            return None
        from sdclab.protection import swapping  # the swapping module imports cell key parts

        preset = {"swap": swapping.SWAP, "swap-low": swapping.SWAP_LOW}.get(
            self.swap, swapping.SWAP_HIGH
        )
        pairs = [p for p in self.swap_settings.split(";") if p.strip()]
        settings = parse_settings([p.strip() for p in pairs])
        try:
            return preset.parse(settings, self.census)
        except InputError as exc:
            raise ValueError(f"swap_settings: {exc}") from None

    @model_validator(mode="after")
    def _the_swap_parses(self) -> CellKeyParameters:
        self.swap_parameters()
        return self

    @model_validator(mode="after")
    def _maxent_needs_design(self) -> CellKeyParameters:
        preset = MAXENT_PRESETS.get(self.ptable)
        given = self.bound, self.variance, self.pstay
        if preset is not None and (self.js or any(x is not None for x in given)):
            raise ValueError(
                f"ptable={self.ptable} fixes bound, variance, js and pstay ({preset.text()}); "
                "use ptable=maxent to choose them"
            )
        if self.ptable == "maxent" and (self.bound is None or self.variance is None):
            raise ValueError("ptable=maxent needs bound and variance")
        if self.ptable != "maxent" and (self.bound is not None or self.variance is not None):
            raise ValueError("bound and variance apply only with ptable=maxent")
        if self.ptable != "maxent" and (self.js or self.pstay is not None):
            raise ValueError(
                "js and pstay apply only with ptable=maxent (they shape a max-entropy p-table; "
                f"ptable={self.ptable} would ignore them)"
            )
        if self.bound is not None and self.variance is not None:
            check_reachable_variance(self.bound, self.variance)
        return self

    def table(self) -> AnyPTable:
        """The p-table these parameters name."""
        if self.ptable == "ons-10-5":
            return ons_10_5_ptable(self.key_space or 256)
        design = self.maxent_design()
        if design is not None:
            pstay = None if design.pstay is None else float(design.pstay)
            return create_ptable(design.bound, float(design.variance), design.js, pstay)
        path = Path(self.ptable)
        if not path.is_file():
            names = ", ".join(PTABLE_PRESETS)
            raise InputError(f"ptable {self.ptable!r}: not {names} or an existing file")
        return read_ptable(path)

    def maxent_design(self) -> MaxentDesign | None:
        """The max-entropy design: a preset's, maxent's own settings, or None (ONS, file)."""
        if self.ptable == "maxent":
            assert self.bound is not None and self.variance is not None
            return MaxentDesign(self.bound, self.variance, self.js, self.pstay)
        return MAXENT_PRESETS.get(self.ptable)

    @property
    def preset(self) -> MaxentDesign | None:
        """The max-entropy preset ``ptable`` names, if any."""
        return MAXENT_PRESETS.get(self.ptable)

    @property
    def ptable_file(self) -> bool:
        """Whether the p-table comes from a file (the release then publishes it)."""
        return self.ptable not in PTABLE_PRESETS

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if not self.swap_settings:
            del data["swap_settings"]  # none given: what a release before the setting records
        if self.ptable_file:
            data["ptable"] = f"a file, published as {artifact_file(PTABLE_ARTIFACT)}"
        return data

    def resolved_key_space(self, table: AnyPTable) -> int:
        """K: an ONS table fixes it (max ckey + 1); a long-format table takes any K."""
        if isinstance(table, OnsPTable):
            if self.key_space is not None and self.key_space != table.key_space:
                raise InputError(
                    f"key_space {self.key_space} differs from the ONS p-table's "
                    f"{table.key_space} cell keys"
                )
            return table.key_space
        return self.key_space or 256


MECHANISM = Mechanism(
    "cellkey",
    "cell key method: p-table noise keyed by the contributors (same people, same noise)",
    CellKeyParameters,
    any_census=True,
)


def check_reachable_variance(bound: int, variance: Decimal) -> None:
    """Refuse a variance the max-entropy p-table cannot reach at ``bound`` (it is not clamped).

    The construction bounds each row's variance by V, and the entropy of zero-mean noise on
    −D..D is largest for the uniform distribution, of variance D(D+1)/3: a larger V leaves the
    constraint slack and the table uniform, with less variance than asked for. A ValueError
    states the limit and what to change.
    """
    largest = Fraction(bound * (bound + 1), 3)
    target = Fraction(variance)
    if target <= largest:
        return
    whole = largest.denominator == 1
    shown = str(largest.numerator) if whole else f"{int(largest * 10**4) / 10**4:.4f}"  # down
    needed = next((d for d in range(bound + 1, 101) if Fraction(d * (d + 1), 3) >= target), None)
    raise ValueError(
        f"ptable=maxent cannot reach variance={variance} with bound={bound}: the largest variance "
        f"of a max-entropy p-table with bound={bound} is {'' if whole else 'just above '}{shown}, "
        f"D(D+1)/3, the uniform noise on -{bound}..{bound}; lower variance to at most {shown}"
        + (f" or raise bound to {needed} or more" if needed is not None else "")
    )
