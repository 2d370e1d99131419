"""Targeted swapping's pairing, whatever the census: which households exchange places.

The US census (:mod:`sdclab.protection.swapping`) and a declared one
(:mod:`sdclab.protection.swapping_declared`) differ in how they read a household's risk, its
areas and what its partner must share; once those are arrays (:class:`Candidates`), selection
and pairing are the same draws in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import polars as pl

from sdclab.core.arrays import BoolArray, FloatArray, IntArray

RETRIES = 3
"""How many scopes an unpaired candidate tries in all before it is passed over."""

DATA_DEPENDENT_SELECTION = (
    "households are selected by their risk, computed from the confidential data, so the "
    "selection itself depends on the data (data-dependent design)"
)
"""Why targeted swapping has no formal guarantee (its card's words, for any census)."""


class Targeting(Protocol):
    """The settings selection and pairing read (the swap's parameters, whatever the census)."""

    @property
    def rate(self) -> Decimal: ...
    @property
    def risk_threshold(self) -> Decimal: ...
    @property
    def noisy_size_key(self) -> bool: ...
    @property
    def max_rounds(self) -> int: ...


@dataclass(frozen=True)
class Candidates:
    """What pairing reads of the households, one entry per household."""

    risk: FloatArray
    """The household's risk (its members' largest): at or above the threshold, swapped first."""
    size: IntArray
    """Persons in the household: the matching key (noised if asked)."""
    unit: IntArray
    """The household's bottom geounit: a donor lives in another one."""
    scopes: tuple[IntArray, ...]
    """The household's area in each donor scope, narrowest first: a donor lives in the same one."""
    alike: tuple[IntArray, ...]
    """What partners share besides the size key (the US: the number of adults)."""


def group_ids(*columns: IntArray) -> IntArray:
    """0..G−1 numbering of the distinct rows of the given columns (no arithmetic packing)."""
    _, group = np.unique(np.stack(columns), axis=1, return_inverse=True)
    return group.reshape(-1).astype(np.int64)


def size_key(size: IntArray, noisy: bool, rng: np.random.Generator) -> IntArray:
    """Household size, perturbed by −1/0/+1 w.p. 1/4, 1/2, 1/4 if noisy."""
    key = size.copy()
    if noisy:
        step = rng.integers(0, 4, size=len(size))  # 0 → −1, 3 → +1, else keep
        key += (step == 3).astype(np.int64) - (step == 0).astype(np.int64)
    return key


def pair_within(
    groups_a: IntArray,
    groups_b: IntArray,
    rng: np.random.Generator,
    weights_b: FloatArray | None = None,
) -> tuple[IntArray, IntArray]:
    """Random one-to-one pairs (i, j) with groups_a[i] == groups_b[j], as many as possible.

    Each group's ``b`` side is taken uniformly at random, or, with ``weights_b``, drawn without
    replacement with probability proportional to its weight (the largest weight / Exp(1) keys
    of the group, Efraimidis–Spirakis: record swapping's donors, drawn in proportion to risk);
    the ``a`` side is always in random order, so who gets which drawn ``b`` is uniform."""
    order_a = np.lexsort((rng.permutation(len(groups_a)), groups_a))
    tie_b = (
        rng.permutation(len(groups_b))
        if weights_b is None
        else -weights_b / rng.exponential(size=len(groups_b))  # ascending: largest key first
    )
    order_b = np.lexsort((tie_b, groups_b))
    ga, gb = groups_a[order_a], groups_b[order_b]
    rank_a = np.arange(len(ga)) - np.searchsorted(ga, ga, side="left")
    rank_b = np.arange(len(gb)) - np.searchsorted(gb, gb, side="left")
    frame_a = pl.DataFrame({"g": ga, "r": rank_a, "i": order_a})
    frame_b = pl.DataFrame({"g": gb, "r": rank_b, "j": order_b})
    pairs = frame_a.join(frame_b, on=["g", "r"], how="inner")
    return pairs["i"].to_numpy(), pairs["j"].to_numpy()


def pair_targeted(
    households: Candidates,
    weights: tuple[Fraction, ...],
    params: Targeting,
    rng: np.random.Generator,
) -> tuple[IntArray, IntArray]:
    """(initiators, donors): which households exchange places.

    Candidates are taken in priority order (risk ≥ threshold first, each tier in random order).
    Each draws a donor scope (with ``weights``, one per scope) and is paired at random with a
    free household of the same matching key in the same scope area but another bottom unit. A
    candidate left unpaired tries again with a fresh scope (RETRIES attempts in all); meanwhile
    the next candidates are taken, until the target number of pairs is reached, no candidate is
    left, or ``max_rounds`` rounds have run (the achieved rate is then below the target, which
    only the diagnostics say).
    """
    n = len(households.risk)
    target = round(Fraction(params.rate) * n / 2)
    high = households.risk >= float(params.risk_threshold)
    priority = np.lexsort((rng.permutation(n), ~high))
    key = size_key(households.size, params.noisy_size_key, rng)
    groups = [group_ids(area, key, *households.alike) for area in households.scopes]
    p = np.array([float(w) for w in weights])
    p = p / p.sum()

    def pair_round(active: IntArray, used: BoolArray) -> tuple[BoolArray, list[Pairs]]:
        scope = rng.choice(len(groups), size=active.size, p=p)
        paired = np.zeros(active.size, dtype=bool)
        found: list[Pairs] = []
        for s, group in enumerate(groups):
            mine = np.flatnonzero((scope == s) & ~paired)
            pool = np.flatnonzero(~used)
            if not mine.size or not pool.size:
                continue
            i, j = pair_within(group[active[mine]], group[pool], rng)
            a, d = active[mine[i]], pool[j]
            elsewhere = households.unit[a] != households.unit[d]
            used[d[elsewhere]] = True
            paired[mine[i[elsewhere]]] = True
            found.append((a[elsewhere], d[elsewhere]))
        return paired, found

    return pair_in_rounds(priority, target, params.max_rounds, pair_round)


Pairs = tuple[IntArray, IntArray]
"""(initiators, donors) of some pairs."""


def pair_in_rounds(
    priority: IntArray,
    target: int,
    max_rounds: int,
    pair_round: Callable[[IntArray, BoolArray], tuple[BoolArray, list[Pairs]]],
    taken: BoolArray | None = None,
) -> Pairs:
    """Pairs made round by round: each round takes, in ``priority`` order, as many free
    candidates as pairs are still wanted besides those waiting from earlier rounds, reserves
    them (no one's donor this round) and lets ``pair_round(active, used)`` pair them (it marks
    the donors it takes as used and says which candidates it paired). A candidate left unpaired
    waits for the next round (RETRIES attempts in all), then is freed to be a donor; the rounds
    stop at ``target`` pairs, with no candidate left, or after ``max_rounds``. ``priority`` is
    every household or some of them; ``taken`` (one per household) marks those already swapped
    in an earlier pass, never anyone's donor (default: none)."""
    used = np.zeros(len(priority), dtype=bool) if taken is None else taken.copy()
    attempts = np.zeros(len(used), dtype=np.int64)
    pairs: list[Pairs] = []
    done, pointer, waiting = 0, 0, np.zeros(0, dtype=np.int64)
    for _ in range(max_rounds):
        rest = priority[pointer:]
        free = np.flatnonzero(~used[rest])
        take = max(target - done - len(waiting), 0)
        fresh = rest[free[:take]]
        pointer += int(free[take - 1]) + 1 if 0 < take <= len(free) else len(rest) * (take > 0)
        active = np.concatenate([waiting, fresh])
        if not active.size or done >= target:
            break
        used[active] = True  # reserved: not a donor for anyone this round
        paired, found = pair_round(active, used)
        pairs.extend(found)
        done += sum(len(a) for a, _ in found)
        left = active[~paired]
        attempts[left] += 1
        waiting = left[attempts[left] < RETRIES]
        used[left[attempts[left] >= RETRIES]] = False  # given up: free to be someone's donor
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([a for a, _ in pairs]), np.concatenate([d for _, d in pairs])


def swap_figures(
    initiators: IntArray,
    donors: IntArray,
    risk: FloatArray,
    params: Targeting,
    high: BoolArray | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The swap's publishable notes (parameters and invariants) and its confidential
    diagnostics: what moved, and how the risky (``high``, default: risk at or above the
    threshold) households fared (evaluation only)."""
    n = len(risk)
    moved = 2 * len(initiators)
    high = risk >= float(params.risk_threshold) if high is None else high
    swapped = np.zeros(n, dtype=bool)
    swapped[np.concatenate([initiators, donors])] = True
    notes = {"households": n, "target_swap_rate": float(params.rate)}
    diagnostics = {
        "pairs": len(initiators),
        "moved": moved,
        "achieved_swap_rate": moved / max(n, 1),
        "high_risk_households": int(high.sum()),
        "swap_rate_high_risk": float(swapped[high].mean()) if high.any() else 0.0,
        "swap_rate_other": float(swapped[~high].mean()) if (~high).any() else 0.0,
    }
    return notes, diagnostics
