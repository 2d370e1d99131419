"""Household swapping. For now: the Permutation Swapping Algorithm's specification card.

Bailie, Gong & Meng (2025) show that the PSA — select each household independently with
probability p within its matching group, then permute the selected households' geography uniformly
at random within the group — is ε-DP subject to the invariants it induces, with
ε(p, b) = max{ln o, ln(b + 1) − ln o}, o = p/(1 − p), b the largest matching group.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sdclab import accounting
from sdclab.accounting import Budget, SpecCard
from sdclab.mechanisms.base import MechanismEntry, Parameters


class PsaParameters(Parameters):
    """Swap rate, matching variables and swapping level; ``largest_group`` (b) when no data."""

    rate: float = Field(0.05, gt=0, lt=1)
    largest_group: int = Field(..., ge=1, description="b, the largest matching group's size")
    matching: str = "state x household size"
    swap_level: Literal["county", "tract", "block_group"] = "county"


def card(p: PsaParameters) -> SpecCard:
    epsilon = accounting.psa_epsilon(p.rate, p.largest_group)
    return SpecCard(
        mechanism="psa",
        domain="every census edited file with the same variables (households with their persons, "
        "after editing and imputation)",
        multiverse="datasets sharing the swap's invariants",
        invariants=(
            "the marginal distribution of the swapping variable (geography)",
            "the marginal distribution of the holding variables (all other attributes)",
            f"the joint distribution of geography x matching variables ({p.matching}), "
            "e.g. households by size in every block",
            "everything at or above the matching geography (all state and national statistics)",
        ),
        protection_unit="household record",
        neighbours="bounded: neighbours differ in one household record, within one universe",
        output_premetric="pure-DP (D_Mult)",
        budget=Budget(epsilon=epsilon),
        covers="the swapped microdata and every table derived from it (post-processing)",
        caveats=(
            f"epsilon(p = {p.rate:g}, b = {p.largest_group:,}) from Theorem II.1 of Bailie, Gong "
            "& Meng (2025); b is the largest matching group",
            f"households are selected with probability {p.rate:g} and their {p.swap_level} is "
            "permuted uniformly at random within the matching group",
            "Group-quarters residents are not swapped and are not covered by this guarantee.",
        ),
    )


PSA = MechanismEntry(
    "psa", "Permutation Swapping Algorithm (provable swapping)", PsaParameters, card
)
