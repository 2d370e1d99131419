"""The confidential input: persons and units (housing units and group-quarters facilities)."""

from sdclab.censuses.us2010.population.columns import PERSONS, UNITS, ColumnSpec
from sdclab.censuses.us2010.population.contract import Population

__all__ = ["PERSONS", "UNITS", "ColumnSpec", "Population"]
