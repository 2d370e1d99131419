"""The exact release (mechanism ``none``): every table as tabulated, no protection at all."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sdclab.censuses.us2010.population import Population
from sdclab.core import cell_model
from sdclab.core.accounting import SpecCard, no_protection_card
from sdclab.protection.base import Mechanism, NoisePublication, WorkloadParameters
from sdclab.protection.checks import exact_tables
from sdclab.release import EXACT_TABULATION, Release, exact_release


class NoneParameters(WorkloadParameters):
    """The exact release takes only a workload: the tables to publish (default: every one)."""


MECHANISM = Mechanism("none", "exact tables, no protection", NoneParameters, any_census=True)
MECHANISM.define("check")(exact_tables)
MECHANISM.define("cell_model")(cell_model.exact)


@MECHANISM.define("guarantee")
def card(_: NoneParameters) -> SpecCard:
    return no_protection_card()


@MECHANISM.define("protect")
def protect(population: Population, p: NoneParameters, __: np.random.Generator) -> Release:
    if p.tables is None:
        return exact_release(population)
    return replace(exact_release(population, p.workload_names()), parameters=p.recorded())


@MECHANISM.define("noise")
def published_noise(_: NoneParameters) -> NoisePublication:
    return NoisePublication(distribution="none: every count is exact", published=("the card",))


@MECHANISM.define("unprotected")
def unprotected(_: Population, __: NoneParameters, ___: Release) -> str:
    return EXACT_TABULATION
