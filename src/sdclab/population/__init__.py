"""The confidential input: persons and units (housing units and group-quarters facilities)."""

from sdclab.population.contract import PERSONS, UNITS, ColumnSpec, Population

__all__ = ["PERSONS", "UNITS", "ColumnSpec", "Population"]
