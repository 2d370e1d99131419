"""The exact release (mechanism ``none``): every table as tabulated, no protection at all."""

from __future__ import annotations

import numpy as np

from sdclab.accounting import SpecCard, no_protection_card
from sdclab.population import Population
from sdclab.protection.base import Mechanism, Parameters
from sdclab.release import Release, exact_release


class NoneParameters(Parameters):
    """The exact release takes no parameters."""


def card(_: NoneParameters) -> SpecCard:
    return no_protection_card()


def protect(population: Population, _: NoneParameters, __: np.random.Generator) -> Release:
    return exact_release(population)


MECHANISM = Mechanism(
    name="none",
    summary="exact tables, no protection",
    parameters=NoneParameters,
    guarantee=card,
    protect=protect,
)
