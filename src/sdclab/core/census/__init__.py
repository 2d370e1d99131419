"""The census as a value: attributes, geographies and tables declared as data."""

from sdclab.core.census.model import (
    DETAILED,
    RECORD_KINDS,
    Attribute,
    Breakdown,
    Census,
    Hierarchy,
    Reconstruction,
)

__all__ = [
    "DETAILED",
    "RECORD_KINDS",
    "Attribute",
    "Breakdown",
    "Census",
    "Hierarchy",
    "Reconstruction",
]
