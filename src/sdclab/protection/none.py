"""The exact release (mechanism ``none``): every table as tabulated, no protection at all."""

from __future__ import annotations

import numpy as np

from sdclab import cell_model
from sdclab.accounting import SpecCard, no_protection_card
from sdclab.population import Population
from sdclab.protection.base import Mechanism, NoisePublication, Parameters
from sdclab.protection.checks import exact_tables
from sdclab.release import EXACT_TABULATION, Release, exact_release


class NoneParameters(Parameters):
    """The exact release takes no parameters."""


MECHANISM = Mechanism("none", "exact tables, no protection", NoneParameters, any_census=True)
MECHANISM.define("check")(exact_tables)
MECHANISM.define("cell_model")(cell_model.exact)


@MECHANISM.define("guarantee")
def card(_: NoneParameters) -> SpecCard:
    return no_protection_card()


@MECHANISM.define("protect")
def protect(population: Population, _: NoneParameters, __: np.random.Generator) -> Release:
    return exact_release(population)


@MECHANISM.define("noise")
def published_noise(_: NoneParameters) -> NoisePublication:
    return NoisePublication(distribution="none: every count is exact", published=("the card",))


@MECHANISM.define("unprotected")
def unprotected(_: Population, __: NoneParameters, ___: Release) -> str:
    return EXACT_TABULATION
