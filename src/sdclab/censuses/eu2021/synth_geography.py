"""Where the European generator's households live: NUTS regions, LAUs of heavy-tailed sizes and
1 km grid cells on an EPSG:3035-like plane.

LAU sizes are lognormal with a capital and a second city taking fixed shares, so that most
municipalities are small and one city is large, as in most EU countries. Each LAU is a compact
patch of 1 km cells around its centre, the number of cells growing more slowly than its population
(cities are dense), and its households crowd towards the centre."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from sdclab.censuses.eu2021.synth_draws import sample_pmf
from sdclab.core.arrays import IntArray

COUNTRY = "XX"
"""The fictional country's code (not an ISO code of any country)."""
LAUS_PER_NUTS3 = 40
MAX_NUTS3 = 60
NUTS3_PER_NUTS2 = 4
MAX_NUTS2 = 15
NUTS2_PER_NUTS1 = 3
MAX_NUTS1 = 5
"""Regions per LAU and per region above (chosen for illustration: 2,000 LAUs make 50 NUTS 3,
12 NUTS 2 and 4 NUTS 1 regions, the size of a mid-sized EU country)."""
NUTS_DIGITS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""NUTS codes add one character per level (1-9, then letters), as Eurostat's do."""

LAU_LOG_SD = 1.3
"""Standard deviation of log LAU size (lognormal; chosen for illustration so that most LAUs are
small and a few are large, as in most EU countries)."""
CITY_SHARES = (0.12, 0.04)
"""Shares of the population living in the capital (LAU 0) and in the second city (LAU 1);
chosen for illustration."""

ORIGIN_KM = (4000, 2500)
"""Easting and northing (km) of the country's south-west corner, in EPSG:3035's range."""
NUTS3_SPACING_KM = 60
"""Distance between neighbouring NUTS 3 centres, laid out on a square lattice."""
LAU_SCATTER_KM = 25
"""LAU centres lie within this distance (each axis) of their NUTS 3 centre."""
CELLS_SCALE = 0.6
CELLS_EXPONENT = 0.4
"""An LAU of p persons covers max(1, round(0.6 · p^0.4)) 1 km cells: 100 persons 4 cells,
36,000 persons 40 cells (chosen for illustration: cities are dense, villages sparse)."""
CENTRE_CONCENTRATION = 2.0
"""A household lives in cell ⌊cells · u^2⌋ of its LAU (u uniform, cells ordered from the centre
outwards), so central cells are the most populous."""


@dataclass(frozen=True)
class Geography:
    """Where each household lives and how the units nest."""

    lau: IntArray  # per household
    east_km: IntArray  # per household: the 1 km cell's south-west corner
    north_km: IntArray
    lau_persons: IntArray  # per LAU
    nuts3_of_lau: IntArray
    nuts2_of_nuts3: IntArray
    nuts1_of_nuts2: IntArray


def region_counts(laus: int) -> tuple[int, int, int]:
    """How many NUTS 1, 2 and 3 regions ``laus`` LAUs make (at least one of each)."""
    n3 = max(1, min(MAX_NUTS3, laus, round(laus / LAUS_PER_NUTS3)))
    n2 = max(1, min(MAX_NUTS2, n3, round(n3 / NUTS3_PER_NUTS2)))
    n1 = max(1, min(MAX_NUTS1, n2, round(n2 / NUTS2_PER_NUTS1)))
    return n1, n2, n3


def lau_weights(rng: np.random.Generator, laus: int) -> np.ndarray:
    """Each LAU's expected share of households: the cities' fixed shares, lognormal for the rest."""
    cities = np.asarray(CITY_SHARES[: max(0, laus - 1)], dtype=np.float64)
    rest = rng.lognormal(0.0, LAU_LOG_SD, size=laus - len(cities))
    return np.concatenate([cities, rest / rest.sum() * (1.0 - cities.sum())])


def place_households(rng: np.random.Generator, sizes: IntArray, laus: int) -> Geography:
    """LAUs, regions and grid cells for households of ``sizes`` persons (``laus`` at most one
    per household; every LAU gets at least one household)."""
    n_households = len(sizes)
    laus = max(1, min(laus, n_households))
    lau = np.empty(n_households, dtype=np.int64)
    order = rng.permutation(n_households)
    lau[order[:laus]] = np.arange(laus)
    lau[order[laus:]] = sample_pmf(rng, lau_weights(rng, laus), n_households - laus)
    persons = np.bincount(lau, weights=sizes, minlength=laus).astype(np.int64)
    n1, n2, n3 = region_counts(laus)
    nuts3 = _nuts3_of_lau(rng, laus, n3)
    east, north = _cells(rng, lau, persons, _lau_centres(rng, nuts3, n3))
    return Geography(lau, east, north, persons, nuts3, _split(n3, n2), _split(n2, n1))


def _split(children: int, parents: int) -> IntArray:
    """Consecutive children in near-equal runs, one run per parent (each parent gets one)."""
    return (np.arange(children) * parents // children).astype(np.int64)


def _nuts3_of_lau(rng: np.random.Generator, laus: int, n3: int) -> IntArray:
    """The capital in NUTS 3 region 0, one LAU in each other region, the rest anywhere."""
    first = np.concatenate([[0], 1 + rng.permutation(n3 - 1)])
    rest = rng.integers(0, n3, size=laus - n3)
    return np.concatenate([first, rest]).astype(np.int64)


def _lau_centres(rng: np.random.Generator, nuts3: IntArray, n3: int) -> tuple[IntArray, IntArray]:
    """Each LAU's centre cell (km): NUTS 3 centres on a square lattice, LAUs scattered round
    theirs, the capital at its region's centre."""
    side = math.ceil(math.sqrt(n3))
    half = NUTS3_SPACING_KM // 2
    east = ORIGIN_KM[0] + half + (nuts3 % side) * NUTS3_SPACING_KM
    north = ORIGIN_KM[1] + half + (nuts3 // side) * NUTS3_SPACING_KM
    scatter = rng.integers(-LAU_SCATTER_KM, LAU_SCATTER_KM + 1, size=(2, len(nuts3)))
    scatter[:, 0] = 0
    return (east + scatter[0]).astype(np.int64), (north + scatter[1]).astype(np.int64)


def _spiral(n: int) -> IntArray:
    """The first ``n`` cell offsets (east, north) of a square, nearest the centre first."""
    radius = math.ceil(math.sqrt(n)) // 2 + 1
    axis = np.arange(-radius, radius + 1)
    offsets = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    distance = np.hypot(offsets[:, 0], offsets[:, 1])
    angle = np.arctan2(offsets[:, 1], offsets[:, 0])
    return offsets[np.lexsort((angle, distance))][:n].astype(np.int64)


def _cells(
    rng: np.random.Generator,
    lau: IntArray,
    persons: IntArray,
    centres: tuple[IntArray, IntArray],
) -> tuple[IntArray, IntArray]:
    """Each household's 1 km cell: one of its LAU's cells, the central ones the most likely."""
    cells = np.maximum(1, np.rint(CELLS_SCALE * persons**CELLS_EXPONENT)).astype(np.int64)
    offsets = _spiral(int(cells.max()))
    u = rng.random(len(lau)) ** CENTRE_CONCENTRATION
    k = np.minimum((cells[lau] * u).astype(np.int64), cells[lau] - 1)
    return centres[0][lau] + offsets[k, 0], centres[1][lau] + offsets[k, 1]


def region_codes(geography: Geography) -> dict[str, list[str]]:
    """Codes of every unit of each admin level, by unit number: XX, XX1, XX11, XX111, XX_00001."""
    nuts1 = [COUNTRY + NUTS_DIGITS[i] for i in range(len(np.unique(geography.nuts1_of_nuts2)))]
    nuts2 = _child_codes(nuts1, geography.nuts1_of_nuts2)
    nuts3 = _child_codes(nuts2, geography.nuts2_of_nuts3)
    laus = [f"{COUNTRY}_{i:05d}" for i in range(len(geography.lau_persons))]
    return {"nuts1": nuts1, "nuts2": nuts2, "nuts3": nuts3, "lau": laus}


def _child_codes(parents: list[str], parent_of: IntArray) -> list[str]:
    """Each child's code: its parent's and its rank among the parent's children."""
    rank = np.arange(len(parent_of)) - np.searchsorted(parent_of, parent_of, side="left")
    return [parents[p] + NUTS_DIGITS[r] for p, r in zip(parent_of, rank, strict=True)]


def grid_codes(east_km: pl.Expr, north_km: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """INSPIRE grid codes of the 1 km cell and of the 10 km square it lies in."""
    one = pl.format("CRS3035RES1000mN{}000E{}000", north_km, east_km)
    ten = pl.format("CRS3035RES10000mN{}0000E{}0000", north_km // 10, east_km // 10)
    return one, ten
