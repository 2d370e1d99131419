"""Stage 2 of the synthetic generator: geography, as runs of the person sequence.

Every level is a run of consecutive positions in the sequence of occupied units, measured in
persons: blocks are runs of lognormal length, block groups and tracts runs of bounded length,
counties groups of tracts and states groups of counties. A unit belongs to the block that contains
its midpoint, so the hierarchy nests by construction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sdclab.core.arrays import FloatArray, IntArray

# Geography: persons per geounit.
BLOCK_LOG_MEAN = 2.85
BLOCK_LOG_SD = 1.41
BLOCK_CAPACITY_MAX = 4_000.0
"""Lognormal block capacities in persons (capped), before units are packed into them. Packing
leaves some tiny blocks empty, so the parameters are tuned on the realised figures: mean ≈ 50
persons per populated block, ≈ 30% of populated blocks with 1–9 persons, ≈ 0.25% with 1,000+."""
TRACT_PERSONS = 4_000
TRACT_LOG_SD = 0.35
TRACT_PERSONS_RANGE = (1_500, 7_500)
"""Tract targets: lognormal around 4,000, clipped so realised tracts stay within 1,200–8,000."""
BLOCK_GROUP_PERSONS = 1_400
BLOCK_GROUP_WEIGHT_RANGE = (0.7, 1.3)
MAX_BLOCK_GROUPS_PER_TRACT = 9
MAX_BLOCKS_PER_BLOCK_GROUP = 1_000
COUNTY_PERSONS = 100_000
COUNTY_LOG_SD = 1.4
"""Counties: about one per 100,000 persons, with heavy-tailed sizes (2010: 3,143 counties, median
≈ 26,000, mean ≈ 98,000 persons)."""
STATE_PERSONS = 6_000_000
STATE_LOG_SD = 0.5
STATE_FIPS = (
    1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
    29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 44, 45, 46, 47, 48, 49, 50, 51, 53, 54,
    55, 56,
)  # fmt: skip
"""FIPS codes of the 50 states and DC, in order."""
MIN_TRACT_PERSONS = 100
"""Persons per tract at least when the number of tracts is given."""
MAX_TRACT_MEAN_PERSONS = 40_000
"""Persons per tract at most on average when the number of tracts is given (ten times the usual
size): a tract has at most 9 block groups, whose blocks must number fewer than 1,000."""
MAX_TRACTS_PER_COUNTY = 9_999
"""Tracts 000100 to 999900 of a county."""
MAX_COUNTIES_PER_STATE = 500
"""Counties 001 to 999 (odd) of a state."""


@dataclass(frozen=True)
class GeographyCounts:
    """How many tracts, counties and states to make (None: about one per
    :data:`TRACT_PERSONS`, :data:`COUNTY_PERSONS` and :data:`STATE_PERSONS` persons), so that a
    small population can still have a hierarchy to study."""

    tracts: int | None = None
    counties: int | None = None
    states: int | None = None

    def check(self, n: int) -> None:
        """ValueError in words for counts the population cannot hold."""
        tracts = self.tracts if self.tracts is not None else max(1, round(n / TRACT_PERSONS))
        counties = (
            self.counties
            if self.counties is not None
            else int(np.clip(round(n / COUNTY_PERSONS), 1, tracts))
        )
        if self.tracts is not None and not 1 <= self.tracts <= n // MIN_TRACT_PERSONS:
            raise ValueError(
                f"tracts {self.tracts}: expected 1 to {max(1, n // MIN_TRACT_PERSONS):,} for "
                f"{n:,} persons (at least {MIN_TRACT_PERSONS} persons per tract)"
            )
        if self.tracts is not None and n / self.tracts > MAX_TRACT_MEAN_PERSONS:
            raise ValueError(
                f"tracts {self.tracts}: at least {math.ceil(n / MAX_TRACT_MEAN_PERSONS):,} for "
                f"{n:,} persons (at most {MAX_TRACT_MEAN_PERSONS:,} persons per tract on average, "
                f"so that no block group exceeds {MAX_BLOCKS_PER_BLOCK_GROUP - 1} blocks)"
            )
        if self.counties is not None and not 1 <= self.counties <= tracts:
            raise ValueError(f"counties {self.counties}: expected 1 to {tracts} (the tracts)")
        if tracts > MAX_TRACTS_PER_COUNTY * counties:
            raise ValueError(
                f"counties {counties}: at least {math.ceil(tracts / MAX_TRACTS_PER_COUNTY)} for "
                f"{tracts:,} tracts (a county's tract codes hold at most {MAX_TRACTS_PER_COUNTY:,})"
            )
        if self.states is not None and not 1 <= self.states <= min(counties, len(STATE_FIPS)):
            raise ValueError(
                f"states {self.states}: expected 1 to {min(counties, len(STATE_FIPS))} (the "
                "counties, and at most the 50 states and DC)"
            )
        needed = math.ceil(counties / MAX_COUNTIES_PER_STATE)  # states
        given = self.counties is not None or self.states is not None  # else the size sets both
        if given and (self.states or 1) < needed:
            raise ValueError(
                f"counties {counties}: a state's county codes hold at most "
                f"{MAX_COUNTIES_PER_STATE}; give states {needed} or more"
            )

    def to_dict(self) -> dict[str, int]:
        """The counts given (for ``synth.json`` and digests; none given: empty)."""
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class GeographyPlan:
    """Candidate blocks in sequence (= geocode) order, before units are placed in them."""

    block_end: FloatArray
    """Cumulative capacity: block b covers sequence positions [block_end[b-1], block_end[b])."""
    block_code: IntArray
    """15-digit integer geocode of each block."""
    block_tract: IntArray
    """Tract index of each block."""
    n_tracts: int


def plan_geography(
    rng: np.random.Generator, n: int, counts: GeographyCounts | None = None
) -> GeographyPlan:
    """Blocks nested in block groups, tracts, counties and states for ``n`` persons."""
    counts = counts or GeographyCounts()
    tract_persons = tract_targets(rng, n, counts.tracts)
    bg_tract, bg_number, bg_end = block_group_targets(rng, tract_persons)
    block_end = block_capacities(rng, n)
    if counts.to_dict():  # counts asked for: every block group ends a block, so none is empty
        inner = bg_end[:-1][bg_end[:-1] < block_end[-1]]
        block_end = np.unique(np.concatenate([block_end, inner]))
    block_mid = block_end - np.diff(block_end, prepend=0.0) / 2
    block_bg = np.minimum(np.searchsorted(bg_end, block_mid, side="right"), len(bg_end) - 1)
    first_in_bg = np.searchsorted(block_bg, block_bg, side="left")
    block_number = np.arange(len(block_bg)) - first_in_bg
    if block_number.max() >= MAX_BLOCKS_PER_BLOCK_GROUP:
        raise RuntimeError("a block group received more than 999 blocks")
    tract_code = tract_codes(rng, tract_persons, counts.counties, counts.states)
    tract = bg_tract[block_bg]
    block_code = tract_code[tract] * 10_000 + bg_number[block_bg] * 1_000 + block_number
    return GeographyPlan(block_end, block_code, tract, len(tract_persons))


def tract_targets(rng: np.random.Generator, n: int, n_tracts: int | None = None) -> FloatArray:
    """Persons per tract: about TRACT_PERSONS each (or ``n_tracts`` tracts of the same spread
    around n / n_tracts), summing to ``n``."""
    mean = float(TRACT_PERSONS) if n_tracts is None else n / n_tracts
    n_tracts = n_tracts or max(1, round(n / TRACT_PERSONS))
    low, high = (mean * r / TRACT_PERSONS for r in TRACT_PERSONS_RANGE)
    raw = np.clip(mean * rng.lognormal(0.0, TRACT_LOG_SD, n_tracts), low, high)
    return np.asarray(n * raw / raw.sum(), dtype=np.float64)


def block_group_targets(
    rng: np.random.Generator, tract_persons: FloatArray
) -> tuple[IntArray, IntArray, FloatArray]:
    """Block groups of each tract: (tract index, number 1–9, cumulative end in persons)."""
    per_tract = np.clip(
        np.round(tract_persons / BLOCK_GROUP_PERSONS), 1, MAX_BLOCK_GROUPS_PER_TRACT
    ).astype(np.int64)
    bg_tract = np.repeat(np.arange(len(tract_persons)), per_tract)
    weight = rng.uniform(*BLOCK_GROUP_WEIGHT_RANGE, len(bg_tract))
    weight_in_tract = np.bincount(bg_tract, weights=weight)
    persons = tract_persons[bg_tract] * weight / weight_in_tract[bg_tract]
    first = np.cumsum(per_tract) - per_tract
    bg_number = np.arange(len(bg_tract)) - first[bg_tract] + 1
    end = np.cumsum(persons)
    end[-1] = np.inf
    return bg_tract, bg_number, end


def block_capacities(rng: np.random.Generator, n: int) -> FloatArray:
    """Cumulative lognormal block capacities covering the sequence positions [0, n)."""
    mean = float(np.exp(BLOCK_LOG_MEAN + BLOCK_LOG_SD**2 / 2))
    capacities = np.zeros(0)
    while capacities.sum() < n:
        batch = int(1.1 * (n - capacities.sum()) / mean) + 16
        drawn = np.minimum(rng.lognormal(BLOCK_LOG_MEAN, BLOCK_LOG_SD, batch), BLOCK_CAPACITY_MAX)
        capacities = np.concatenate([capacities, drawn])
    end = np.cumsum(capacities)
    needed = int(np.searchsorted(end, n, side="left")) + 1
    return np.asarray(end[:needed], dtype=np.float64)


def tract_codes(
    rng: np.random.Generator,
    tract_persons: FloatArray,
    n_counties: int | None = None,
    n_states: int | None = None,
) -> IntArray:
    """11-digit state+county+tract code of each tract: tracts grouped into counties, counties
    into states, numbered 000100, 000200, … within a county and 001, 003, … within a state (the
    numbers of counties and states follow the population's size unless given)."""
    n = float(tract_persons.sum())
    n_tracts = len(tract_persons)
    if n_counties is None:
        n_counties = int(np.clip(round(n / COUNTY_PERSONS), 1, n_tracts))
    county_weight = rng.lognormal(0.0, COUNTY_LOG_SD, n_counties)
    tracts_per_county = _allocate(rng, n_tracts, county_weight, MAX_TRACTS_PER_COUNTY)
    tract_county = np.repeat(np.arange(n_counties), tracts_per_county)
    county_persons = np.bincount(tract_county, weights=tract_persons, minlength=n_counties)

    if n_states is None:
        n_states = int(np.clip(round(n / STATE_PERSONS), 1, len(STATE_FIPS)))
        state_weight = rng.lognormal(0.0, STATE_LOG_SD, n_states)
        state_end = np.cumsum(state_weight) / state_weight.sum() * n
        county_mid = np.cumsum(county_persons) - county_persons / 2
        county_state = np.minimum(
            np.searchsorted(state_end, county_mid, side="right"), n_states - 1
        )
        _, county_state = np.unique(county_state, return_inverse=True)  # empty states vanish
    else:  # as many states as asked, each with a county at least
        state_weight = rng.lognormal(0.0, STATE_LOG_SD, n_states)
        counties_per_state = _allocate(rng, n_counties, state_weight, MAX_COUNTIES_PER_STATE)
        county_state = np.repeat(np.arange(n_states), counties_per_state)
    county_number = np.arange(n_counties) - np.searchsorted(county_state, county_state, side="left")
    if county_number.max() >= MAX_COUNTIES_PER_STATE:
        raise RuntimeError(f"a state received more than {MAX_COUNTIES_PER_STATE} counties")
    tract_number = np.arange(n_tracts) - np.searchsorted(tract_county, tract_county, side="left")
    state = np.asarray(STATE_FIPS, dtype=np.int64)[county_state[tract_county]]
    county = 2 * county_number[tract_county] + 1
    return np.asarray(state * 10**9 + county * 10**6 + 100 * (tract_number + 1), dtype=np.int64)


def _allocate(rng: np.random.Generator, items: int, weight: FloatArray, cap: int) -> IntArray:
    """``items`` shared among groups in proportion to ``weight``: at least one and at most
    ``cap`` each (needs len(weight) ≤ items ≤ cap · len(weight)). What a draw puts above the
    cap is drawn again among the groups below it."""
    counts = 1 + rng.multinomial(items - len(weight), weight / weight.sum())
    while (over := counts > cap).any():
        excess = int((counts[over] - cap).sum())
        counts[over] = cap
        room = np.where(counts < cap, weight, 0.0)
        counts += rng.multinomial(excess, room / room.sum())
    return np.asarray(counts, dtype=np.int64)


def place_in_blocks(sizes: IntArray, block_end: FloatArray) -> IntArray:
    """Block index of each unit: the block whose capacity run contains the unit's midpoint."""
    midpoint = np.cumsum(sizes) - sizes / 2
    return np.searchsorted(block_end, midpoint, side="right").astype(np.int64)
