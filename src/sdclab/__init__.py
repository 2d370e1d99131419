"""sdclab: a laboratory for statistical disclosure control of census tables."""

__version__ = "0.1.0"
