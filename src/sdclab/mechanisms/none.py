"""The exact release (mechanism ``none``): every table as tabulated, no protection at all."""

from __future__ import annotations

from sdclab.accounting import SpecCard, no_protection_card
from sdclab.mechanisms.base import MechanismEntry, Parameters


class NoneParameters(Parameters):
    """The exact release takes no parameters."""


def card(_: NoneParameters) -> SpecCard:
    return no_protection_card()


ENTRY = MechanismEntry("none", "exact tables, no protection", NoneParameters, card)
