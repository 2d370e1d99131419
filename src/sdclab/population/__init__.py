"""The confidential input: persons and units (housing units and group-quarters facilities)."""

from sdclab.population.columns import PERSONS, UNITS, ColumnSpec
from sdclab.population.contract import Population

__all__ = ["PERSONS", "UNITS", "ColumnSpec", "Population"]
