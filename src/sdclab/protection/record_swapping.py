"""Targeted record swapping over a declared census, as European offices ran it for 2021
(sdcMicro's recordSwap; docs/swapping.md, *Targeted record swapping*).

Its settings extend the declared census's targeted swapping (:mod:`.swapping_declared`):
``risk_levels`` (risk counted at each level of a hierarchy; a household at risk swaps across the
highest level where it is), ``k_anonymity`` (at risk: a member's combination seen fewer than k
times there), ``similar`` (an ordered similarity profile a donor shares, its last variable
dropped while no donor is found) and ``carry_along`` (household attributes of the place,
exchanged with the units). Selection is recordSwap's: every household at risk is swapped,
whatever the rate, and the rest of each bottom unit's share of the rate is drawn with
probability proportional to risk (:func:`pair_records`). Donors are drawn as recordSwap draws
them too: with probability proportional to their risk at the level swapped across. When none is
given, the declared swap draws as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.census.model import Census
from sdclab.core.census.records import CensusRecords
from sdclab.protection.swap_pairs import (
    RETRIES,
    Pairs,
    Targeting,
    group_ids,
    pair_in_rounds,
    pair_within,
    size_key,
)

TRS_SETTINGS = ("risk_levels", "k_anonymity", "similar", "carry_along")
"""The targeted record swapping settings of a declared census (none given: the declared swap)."""

SIZE = "size"
"""The name of the household's size in a similarity profile."""


class RecordSwapParameters(Protocol):
    """What targeted record swapping reads of the swap's parameters."""

    risk_level: str | None
    matching_attributes: tuple[str, ...] | None
    risk_levels: tuple[str, ...] | None
    k_anonymity: int | None
    similar: tuple[str, ...] | None
    carry_along: tuple[str, ...] | None


@dataclass(frozen=True)
class RecordSwap:
    """Targeted record swapping's settings, checked against the census."""

    levels: tuple[str, ...]
    """the levels risk is counted at, top-down (given, or the risk level alone)"""
    hierarchy: bool
    """true: a household swaps across the highest level where it is at risk (risk_levels given)"""
    k_anonymity: int | None
    similar: tuple[str, ...]
    """the similarity profile, first variable first; it falls back by dropping the last"""
    carry_along: tuple[str, ...]

    @property
    def profiles(self) -> tuple[tuple[str, ...], ...]:
        """The profiles tried in turn: the whole one, then without its last variable, and so on
        down to its first variable alone."""
        return tuple(self.similar[:m] for m in range(len(self.similar), 0, -1))


def risk_variable_problem(census: Census, name: str) -> str | None:
    """Why ``name`` is no risk variable of ``census`` (None: it is): an attribute, or an
    attribute's breakdown that puts each code in one category (``AGE.L``: age counted in its
    broad groups)."""
    attribute, _, breakdown = name.partition(".")
    if attribute not in census.attributes:
        return (
            f"expected attributes of census {census.name} ({', '.join(census.attributes)}), "
            f"got {name!r}"
        )
    known = census.attribute(attribute).breakdowns
    if breakdown and (breakdown not in known or not known[breakdown].is_partition):
        recodes = [b for b, v in known.items() if v.is_partition]
        return (
            f"{name!r}: attribute {attribute} has no breakdown {breakdown!r} that is a recode "
            f"(each code in one category); its recodes: {', '.join(recodes) or 'none'}"
        )
    return None


def risk_column(records: CensusRecords, name: str) -> IntArray:
    """Each person's value of the risk variable ``name``: an attribute's code, or its category
    in the breakdown ``ATTRIBUTE.BREAKDOWN`` names."""
    attribute, _, breakdown = name.partition(".")
    codes = records.columns("persons")[attribute]
    if not breakdown:
        return codes
    membership = records.census.attribute(attribute).breakdown(breakdown).membership
    return membership.argmax(axis=0)[codes].astype(np.int64)


def record_swap_settings(
    params: RecordSwapParameters, census: Census, risk_level: str, matching: tuple[str, ...]
) -> RecordSwap | None:
    """The record swapping settings, or None when none is given; a wrong one is a ValueError
    naming it and what was expected."""
    if all(getattr(params, s) is None for s in TRS_SETTINGS):
        return None
    levels = census.geography.levels
    if params.risk_levels is not None and params.risk_level is not None:
        raise ValueError("risk_levels: give risk_level or risk_levels, not both")
    given = params.risk_levels if params.risk_levels is not None else (risk_level,)
    wrong = [v for v in given if v not in levels] or ([] if given else [""])
    if wrong:
        raise ValueError(f"risk_levels: expected some of {', '.join(levels)}, got {wrong[0]!r}")
    own = [a.name for a in census.attributes.values() if a.records == "households"]
    if params.similar is not None and params.matching_attributes is not None:
        raise ValueError("similar: give matching_attributes or similar, not both")
    similar = (SIZE, *matching) if params.similar is None else params.similar
    wrong = [v for v in similar if v not in (SIZE, *own)] or ([] if similar else [""])
    if wrong:
        raise ValueError(
            f"similar: expected {SIZE} or household attributes of census {census.name} "
            f"({', '.join(own) or 'it declares none'}), got {wrong[0]!r}"
        )
    carry = params.carry_along or ()
    wrong = [v for v in carry if v not in own]
    if wrong:
        raise ValueError(
            f"carry_along: expected household attributes of census {census.name} "
            f"({', '.join(own) or 'it declares none'}), got {wrong[0]!r}"
        )
    ordered = tuple(v for v in levels if v in given)
    return RecordSwap(
        ordered, params.risk_levels is not None, params.k_anonymity, tuple(similar), tuple(carry)
    )


def record_swap_recorded(
    recorded: dict[str, Any], chosen: RecordSwap | None, similar_given: bool
) -> dict[str, Any]:
    """The declared settings as recorded, with record swapping's when some were given: each
    given or its default, and never two that exclude each other (risk_levels replaces
    risk_level, similar replaces matching_attributes)."""
    if chosen is None:
        return recorded
    recorded = recorded | {"k_anonymity": chosen.k_anonymity, "carry_along": [*chosen.carry_along]}
    if chosen.hierarchy:
        recorded = {k: v for k, v in recorded.items() if k != "risk_level"}
        recorded["risk_levels"] = list(chosen.levels)
    if similar_given:
        recorded = {k: v for k, v in recorded.items() if k != "matching_attributes"}
        recorded["similar"] = list(chosen.similar)
    return recorded


def exact_depth(chosen: RecordSwap, levels: tuple[str, ...], matching_level: str) -> int:
    """The deepest level whose every area keeps all its statistics: the matching level, or the
    one above the highest risk level when households swap across it (−1: the census alone)."""
    depth = levels.index(matching_level)
    if chosen.hierarchy:
        depth = min(depth, levels.index(chosen.levels[0]) - 1)
    return depth


def record_swap_caveats(chosen: RecordSwap, declared: Any, params: Any) -> tuple[str, ...]:
    """What the card says of the risk, the donors and the carried-along attributes
    (``declared``: the swap's other settings, as ``DeclaredSwap`` holds them)."""
    rule = (
        f"a member's combination seen fewer than {chosen.k_anonymity} times in their unit"
        if chosen.k_anonymity
        else f"a member of risk at least {float(params.risk_threshold):g} there"
    )
    bottom = params.census.geography.bottom
    where = (
        "exchanges places with a donor in another unit of the highest level where it is at risk "
        f"(within the unit above, or within its {declared.matching_level} if narrower; a "
        f"household at risk nowhere: another {bottom} of its {declared.matching_level})"
        if chosen.hierarchy
        else f"exchanges places with a donor in another {bottom} of the same "
        f"{declared.matching_level}"
    )
    noisy = params.noisy_size_key
    profile = ", ".join(f"{v} (noised ±1)" if v == SIZE and noisy else v for v in chosen.similar)
    carried = ", ".join(chosen.carry_along)
    return (
        f"targeted record swapping: a person's risk is 1 / (persons in their unit sharing their "
        f"{', '.join(declared.risk_variables) or 'unit alone'}), counted in each "
        f"{', '.join(chosen.levels)}; a household is at risk at a level with {rule}; every "
        "household at risk somewhere is swapped, whatever the rate; each bottom unit's share of "
        "the rate left over is filled with its households drawn with probability proportional "
        "to their risk",
        f"each selected household {where}; the donor is drawn with probability proportional to "
        "its risk at the level crossed (below the risk levels: at the lowest of them), among "
        f"those sharing the similarity profile {profile}, or while none is found the profile "
        "without its last variable, down to its first alone",
        *(
            [f"carried along (they belong to the place: partners exchange them): {carried}"]
            if carried
            else []
        ),
    )


@dataclass(frozen=True)
class RecordCandidates:
    """What record swapping's pairing reads, one entry per household (levels top-down)."""

    risk: FloatArray
    """the household's largest member risk over the levels (1 / count)"""
    high: BoolArray
    """at risk at some level: swapped whatever the rate"""
    level: IntArray
    """index into ``units`` of the level the household swaps across"""
    units: tuple[IntArray, ...]
    """each household's unit at each swap level: a donor lives in another one"""
    scopes: tuple[IntArray, ...]
    """each household's area in which a donor is sought, for each swap level"""
    profiles: tuple[tuple[IntArray, ...], ...]
    """the similarity profiles' columns, the whole profile first"""
    home: IntArray
    """each household's bottom unit: the rate's pairs are shared out over them"""
    donor_risk: tuple[FloatArray, ...]
    """each household's weight as a donor at each swap level: its risk at that level"""


def household_levels(
    records: CensusRecords, chosen: RecordSwap, variables: tuple[str, ...], threshold: float
) -> tuple[FloatArray, BoolArray, IntArray, dict[str, FloatArray]]:
    """Each household's risk (its members' largest 1 / count over the levels), whether it is at
    risk at some level, the depth of the highest level where it is (the bottom if none), and
    its risk at each risk level (recordSwap's per-level risk: donors are drawn by it)."""
    assert records.households is not None
    levels = records.census.geography.levels
    block = records.block_index("persons")
    n = records.n_households
    risk, high = np.zeros(n), np.zeros(n, dtype=bool)
    by_level: dict[str, FloatArray] = {}
    depth = np.full(n, len(levels) - 1, dtype=np.int64)
    for level in reversed(chosen.levels):  # bottom-up: the highest risky level is set last
        unit = records.geography.block_codes_at(level)[block]
        group = group_ids(unit, *(risk_column(records, v) for v in variables))
        fewest = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(fewest, records.households, np.bincount(group)[group])
        level_risk = 1.0 / fewest
        by_level[level] = level_risk
        at_risk = fewest < chosen.k_anonymity if chosen.k_anonymity else level_risk >= threshold
        if chosen.hierarchy:
            depth[at_risk] = levels.index(level)
        high |= at_risk
        risk = np.maximum(risk, level_risk)
    return risk, high, depth, by_level


def record_candidates(
    records: CensusRecords,
    chosen: RecordSwap,
    variables: tuple[str, ...],
    matching_level: str,
    params: Targeting,
    rng: np.random.Generator,
) -> RecordCandidates:
    """The households' risk, swap levels, donor areas, donor weights and similarity profiles
    (the size key drawn, noised if asked, as the declared swap draws it).

    recordSwap weights a donor at a level by its risk at that level (``sampleDonor`` walks the
    donors in the order of their risk at the level / Exp(1)); so here. Its lowest level is always
    a risk level; here the bottom (where the rate is filled) may lie below the lowest risk
    level, and its donors are weighted by their risk there, the largest over the levels (counts
    only shrink down the hierarchy), which the fill draws use too."""
    assert records.households is not None
    levels = records.census.geography.levels
    threshold = float(params.risk_threshold)
    risk, high, depth, by_level = household_levels(records, chosen, variables, threshold)
    home = records.block_index("households")
    swap_depths = np.sort(np.unique(depth))
    match = levels.index(matching_level)
    units, scopes, donor_risk = [], [], []
    for d in swap_depths.tolist():
        units.append(records.geography.block_codes_at(levels[d])[home])
        donor_risk.append(by_level.get(levels[d], risk))
        scope = min(match, d - 1)
        whole = np.zeros(len(home), dtype=np.int64)
        scopes.append(whole if scope < 0 else records.geography.block_codes_at(levels[scope])[home])
    size = np.bincount(records.households, minlength=records.n_households)
    key = {SIZE: size_key(size, params.noisy_size_key, rng), **records.household_attributes}
    return RecordCandidates(
        risk,
        high,
        np.searchsorted(swap_depths, depth),
        tuple(units),
        tuple(scopes),
        tuple(tuple(key[v] for v in profile) for profile in chosen.profiles),
        home,
        tuple(donor_risk),
    )


def pair_records(
    households: RecordCandidates, params: Targeting, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """(initiators, donors): which households exchange places, in recordSwap's two passes.

    First every household at risk somewhere seeks a donor, in random order, whatever the rate
    (so more than the rate may move). Then each bottom unit's share of round(rate·n/2) pairs
    (:func:`area_quotas`), less the risky initiators living there, is filled with households
    of the unit drawn with probability proportional to their risk (:func:`fill_draws`). Each
    seeks a donor in another unit of its swap level within its area, on each similarity profile
    in turn (whole first): left unpaired on one (after RETRIES draws), it tries the next. Its
    donor is drawn among the free households of its group with probability proportional to
    their risk at the level it swaps across (``donor_risk``), as recordSwap draws donors.
    """
    n = len(households.risk)
    pair_round = _round_pairing(households, rng)
    risky = pair_risky(households, params.max_rounds, pair_round, rng)
    taken = households.high.copy()  # swapped, or at risk and left without a donor: stay
    taken[np.concatenate(risky)] = True
    area = np.unique(households.home, return_inverse=True)[1].reshape(-1)
    quota = area_quotas(area, round(Fraction(params.rate) * n / 2), rng)
    wanted = quota - np.bincount(area[risky[0]], minlength=quota.size)
    fill = fill_draws(households.risk, area, wanted, taken, rng)
    filled = pair_in_rounds(fill, fill.size, params.max_rounds, pair_round, taken)
    return np.concatenate([risky[0], filled[0]]), np.concatenate([risky[1], filled[1]])


def pair_risky(
    households: RecordCandidates,
    max_rounds: int,
    pair_round: Callable[[IntArray, BoolArray], tuple[BoolArray, list[Pairs]]],
    rng: np.random.Generator,
) -> Pairs:
    """Pairs for every risky household that can find a donor, level by level top-down (as
    recordSwap: those at risk at a level are all through before the next level's start). At
    each level, in passes, a random half of those still unswapped initiate while the others may
    be their donors (recordSwap's risky households are donors to those of other units), until
    none is left or a pass pairs none. Those left without a donor stay where they are: unlike
    recordSwap, they are not offered as donors at lower levels, where they would move without
    crossing the level they are at risk at."""
    taken = np.zeros(len(households.high), dtype=bool)
    pairs: list[Pairs] = []
    for level in range(len(households.units)):
        left = np.flatnonzero(households.high & (households.level == level))
        for _ in range(max_rounds):
            left = left[~taken[left]]
            if not left.size:
                break
            found = pair_in_rounds(
                rng.permutation(left), (left.size + 1) // 2, max_rounds, pair_round, taken
            )
            if not found[0].size:
                break
            pairs.append(found)
            taken[np.concatenate(found)] = True
        taken[left] = True  # left without a donor: stays put, nobody's donor at a lower level
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([a for a, _ in pairs]), np.concatenate([d for _, d in pairs])


def area_quotas(area: IntArray, target: int, rng: np.random.Generator) -> IntArray:
    """Pairs asked of each area (0..A−1): ``target`` shared out in proportion to its
    households, rounded down, the pairs left over given one each to areas drawn uniformly
    (recordSwap's distributeDraws), so the quotas add up to ``target`` exactly."""
    counts = np.bincount(area)
    quota = target * counts // max(len(area), 1)
    extra = rng.choice(counts.size, size=target - int(quota.sum()), replace=False)
    quota[extra] += 1
    return quota


def fill_draws(
    risk: FloatArray,
    area: IntArray,
    wanted: IntArray,
    excluded: BoolArray,
    rng: np.random.Generator,
) -> IntArray:
    """``wanted[a]`` households of each area ``a`` (none if it is not positive) among those not
    ``excluded``, drawn without replacement with probability proportional to ``risk``: the
    largest keys risk / Exp(1) of each area (Efraimidis–Spirakis, as recordSwap's randSample)."""
    free = np.flatnonzero(~excluded)
    key = risk[free] / rng.exponential(size=free.size)
    ranked = free[np.lexsort((-key, area[free]))]
    where = area[ranked]
    rank = np.arange(ranked.size) - np.searchsorted(where, where, side="left")
    return ranked[rank < np.maximum(wanted, 0)[where]]


def _round_pairing(
    households: RecordCandidates, rng: np.random.Generator
) -> Callable[[IntArray, BoolArray], tuple[BoolArray, list[Pairs]]]:
    """One pairing round for :func:`~sdclab.protection.swap_pairs.pair_in_rounds`: the active
    risky households take their donors first, then the others, level by level, profile by
    profile (whole first), each level's donors weighted by their risk there."""
    groups = [
        [group_ids(scope, *profile) for profile in households.profiles]
        for scope in households.scopes
    ]

    def pair_round(active: IntArray, used: BoolArray) -> tuple[BoolArray, list[Pairs]]:
        paired = np.zeros(active.size, dtype=bool)
        found: list[Pairs] = []
        for tier in (True, False):  # the risky households take their donors first
            ours = households.high[active] == tier
            for level, unit in enumerate(households.units):
                for group in groups[level]:
                    found.append(
                        _pair_profile(
                            active,
                            ours & (households.level[active] == level),
                            paired,
                            used,
                            group,
                            unit,
                            households.donor_risk[level],
                            rng,
                        )
                    )
        return paired, found

    return pair_round


def record_swap_diagnostics(
    initiators: IntArray, donors: IntArray, high: BoolArray
) -> dict[str, int]:
    """How the risky households fared (confidential: evaluation only): swapped, and left
    without a donor on every profile."""
    moved = np.zeros(len(high), dtype=bool)
    moved[np.concatenate([initiators, donors])] = True
    swapped = int((moved & high).sum())
    return {
        "high_risk_swapped": swapped,
        "high_risk_without_donor": int(high.sum()) - swapped,
    }


def _pair_profile(
    active: IntArray,
    eligible: BoolArray,
    paired: BoolArray,
    used: BoolArray,
    group: IntArray,
    unit: IntArray,
    weight: FloatArray,
    rng: np.random.Generator,
) -> tuple[IntArray, IntArray]:
    """Pairs of the ``eligible`` unpaired active households with free donors of the same
    ``group`` in another ``unit``, drawn with probability proportional to ``weight`` (RETRIES
    draws at most: a donor of the household's own unit is put back and drawn again); marks
    them paired and used."""
    initiators, donors = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for _ in range(RETRIES):
        mine = np.flatnonzero(eligible & ~paired)
        pool = np.flatnonzero(~used)
        if not mine.size or not pool.size:
            break
        i, j = pair_within(group[active[mine]], group[pool], rng, weight[pool])
        a, d = active[mine[i]], pool[j]
        elsewhere = unit[a] != unit[d]
        used[d[elsewhere]] = True
        paired[mine[i[elsewhere]]] = True
        initiators.append(a[elsewhere])
        donors.append(d[elsewhere])
        if elsewhere.all():
            break
    return np.concatenate(initiators), np.concatenate(donors)
