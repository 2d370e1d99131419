"""The US census geography: 15-digit FIPS block geocodes and the levels above them.

A block geocode is state(2) county(3) tract(6) block(4); the block group is the first digit of the
block number. Geocodes are int64 (15 digits fit), so the geounit of a block at any level is an
integer division, and strings appear only at the edges (files and labels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.core.geography import Geography

LEVELS = ("nation", "state", "county", "tract", "block_group", "block")
"""Geography levels from the top down."""

GEOID_LENGTH = {"nation": 0, "state": 2, "county": 5, "tract": 11, "block_group": 12, "block": 15}
"""Number of leading geocode digits that identify a geounit at each level."""

NATION_GEOID = "US"
BLOCK_DIGITS = 15


def check_level(level: str) -> str:
    """Return ``level`` if it is a known level, else raise ValueError naming the choices."""
    if level not in GEOID_LENGTH:
        raise ValueError(f"unknown geography level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


def levels_from(top: str, bottom: str) -> tuple[str, ...]:
    """The levels from ``top`` down to ``bottom`` inclusive."""
    i, j = LEVELS.index(check_level(top)), LEVELS.index(check_level(bottom))
    return LEVELS[i : j + 1]


def truncate(block_codes: npt.ArrayLike, level: str) -> npt.NDArray[np.int64]:
    """The integer geocode at ``level`` of each integer block geocode."""
    drop = BLOCK_DIGITS - GEOID_LENGTH[check_level(level)]
    return np.asarray(block_codes, dtype=np.int64) // (10**drop)


def geoid_strings(codes: npt.ArrayLike, level: str) -> pl.Series:
    """Zero-padded geoid strings for integer codes at ``level`` ('US' for the nation)."""
    codes = np.asarray(codes, dtype=np.int64)
    if check_level(level) == "nation":
        return pl.Series("geoid", [NATION_GEOID] * len(codes), dtype=pl.String)
    return pl.Series("geoid", codes).cast(pl.String).str.zfill(GEOID_LENGTH[level])


def parse_geoids(geoids: pl.Series, level: str) -> npt.NDArray[np.int64]:
    """Integer codes of geoid strings at ``level`` (the inverse of :func:`geoid_strings`)."""
    if check_level(level) == "nation":
        return np.zeros(len(geoids), dtype=np.int64)
    return geoids.cast(pl.Int64).to_numpy()


@dataclass(frozen=True)
class FipsGeography(Geography):
    """The US census geography: 15-digit FIPS block geocodes and :data:`LEVELS` above them."""

    levels: tuple[str, ...] = LEVELS

    @classmethod
    def from_block_codes(cls, block_codes: npt.ArrayLike) -> FipsGeography:
        return cls(np.unique(np.asarray(block_codes, dtype=np.int64)))

    def block_codes_at(self, level: str) -> npt.NDArray[np.int64]:
        return truncate(self.blocks, level)

    def geoid_strings(self, codes: npt.ArrayLike, level: str) -> pl.Series:
        return geoid_strings(codes, level)

    def parse_geoids(self, geoids: pl.Series, level: str) -> npt.NDArray[np.int64]:
        return parse_geoids(geoids, level)
