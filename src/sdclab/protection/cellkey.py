"""The cell key method (CKM): post-tabular noise that is the same for the same contributors.

Every record carries a fixed key rk (``record_key``, integer 0..K−1). A published cell's key is the
sum of its contributors' keys modulo K; the p-table maps (true count, cell key) to a bounded
integer noise (docs/cellkey.md, *How it works*). Because the noise depends only on the contributor
set, identical cells get identical noise in every table and margin (SPSN), repeating a query gains
an attacker nothing, and zeros stay zero.

Tables are computed as linear queries twice over the same records: once counting them and once
summing rk + 1. Both matrices have the same sparsity pattern (every entry is a sum of positive
terms over the same contributors), so cell keys are ``(weighted − counts) mod K`` entry by entry,
for every table at every level, without a loop over cells.

The ESS 2021 recipe — targeted record swapping, then CKM on the swapped tables — is
``swap=swap`` (record keys travel with the records they belong to).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.columns import RECORD_KEY
from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.cell_model import CellBounds, bounds
from sdclab.core.census.model import Census, cells_moved
from sdclab.core.census.records import CensusRecords
from sdclab.core.diagnostics import Diagnostics, HiddenCells
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured
from sdclab.core.geography import Geography
from sdclab.core.privacy import Guarantee, Loss, add_remove_to_replace, compose, no_guarantee
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.relations import coverage
from sdclab.core.tables.tabulate import TableCounts, tabulate
from sdclab.protection import swapping
from sdclab.protection.base import Mechanism, NoisePublication, Unit, WorkloadParameters
from sdclab.protection.checks import counts_problem
from sdclab.protection.ptable import (
    OnsPTable,
    PTable,
    create_ptable,
    ons_10_5_ptable,
    ptable_from_frame,
    read_ptable,
)
from sdclab.protection.ptable_analysis import (
    delta_pairs,
    is_deterministic,
    is_invertible,
    preimage_bounds,
    smallest_shown,
)
from sdclab.release import Release, artifact_file

AnyPTable = PTable | OnsPTable

REPORTED_EPSILONS = (0.5, 1.0, 2.0, 4.0)
"""ε values at which the card lists δ_n(ε) per neighbouring count pair."""


EXACT_FLOAT = 2**53
"""Integers below this are exact in float64."""

PTABLE_PRESETS = ("ons-10-5", "maxent")
PTABLE_ARTIFACT = "ptable"


class CellKeyParameters(WorkloadParameters):
    """The p-table (a preset, a max-entropy design or a file), suppression, keys and swapping."""

    ptable: str = "ons-10-5"
    """"ons-10-5" (the ONS 10/5 table), "maxent" (built from bound and variance) or the path of a
    p-table CSV (long format or ONS format)"""
    bound: Annotated[int | None, Unit("count")] = Field(None, ge=1, le=100)
    """maxent (required there): D, the largest noise a cell can get (±D)"""
    variance: Annotated[Decimal | None, Unit("variance of a cell's noise")] = Field(
        None, gt=0, allow_inf_nan=False
    )
    """maxent (required there): V, the most noise variance a p-table row may have"""
    js: Annotated[int, Unit("count")] = Field(0, ge=0, le=100)
    """maxent: counts 1..js are never published (0: none excluded)"""
    pstay: Annotated[Decimal | None, Unit("probability 0–1")] = Field(None, gt=0, lt=1)
    """maxent: lower bound of p(i→i), the probability a count is published unchanged (default: no
    bound)"""
    threshold: Annotated[int, Unit("count")] = Field(0, ge=0, lt=EXACT_FLOAT)
    """published counts below this are suppressed, omitted like zeros (0: none); below 2^53, the
    counts that float64, in which the tables' counts are read, holds exactly"""
    key_space: Annotated[int | None, Unit("keys")] = Field(None, ge=2, le=2**32)
    """K: record keys are 0..K−1 and a cell key is their sum mod K (default: the ONS table's, else
    256)"""
    keys: Literal["stored", "drawn", "ids"] = "stored"
    """stored: the population's record_key (drawn once if it has none); drawn: fresh keys; ids:
    person_id / unit_id mod K, as ONS derives keys from ons_id"""
    swap: Literal["none", "swap", "swap-low", "swap-high"] = "none"
    """none, or targeted record swapping first with the defaults of swap, swap-low or swap-high,
    record keys travelling along (the ESS 2021 recipe)"""
    epsilon: Annotated[float, Unit("epsilon ((ε, δ)-DP)")] = Field(1.0, gt=0, le=50)
    """ε at which the card's δ is stated"""
    spsn: bool = True
    """same participants, same noise; false gives every published cell an independent uniform cell
    key (the no-SPSN baseline of the averaging attack; research only)"""

    @model_validator(mode="after")
    def _maxent_needs_design(self) -> CellKeyParameters:
        if self.ptable == "maxent" and (self.bound is None or self.variance is None):
            raise ValueError("ptable=maxent needs bound and variance")
        if self.ptable != "maxent" and (self.bound is not None or self.variance is not None):
            raise ValueError("bound and variance apply only with ptable=maxent")
        if self.ptable != "maxent" and (self.js or self.pstay is not None):
            raise ValueError(
                "js and pstay apply only with ptable=maxent (they shape a max-entropy p-table; "
                f"ptable={self.ptable} would ignore them)"
            )
        if self.bound is not None and self.variance is not None:
            check_reachable_variance(self.bound, self.variance)
        return self

    def table(self) -> AnyPTable:
        """The p-table these parameters name."""
        if self.ptable == "ons-10-5":
            return ons_10_5_ptable(self.key_space or 256)
        if self.ptable == "maxent":
            assert self.bound is not None and self.variance is not None
            pstay = None if self.pstay is None else float(self.pstay)
            return create_ptable(self.bound, float(self.variance), self.js, pstay)
        path = Path(self.ptable)
        if not path.is_file():
            raise InputError(f"ptable {self.ptable!r}: not ons-10-5, maxent or an existing file")
        return read_ptable(path)

    @property
    def ptable_file(self) -> bool:
        """Whether the p-table comes from a file (the release then publishes it)."""
        return self.ptable not in PTABLE_PRESETS

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if self.ptable_file:
            data["ptable"] = f"a file, published as {artifact_file(PTABLE_ARTIFACT)}"
        return data

    def resolved_key_space(self, table: AnyPTable) -> int:
        """K: an ONS table fixes it (max ckey + 1); a long-format table takes any K."""
        if isinstance(table, OnsPTable):
            if self.key_space is not None and self.key_space != table.key_space:
                raise InputError(
                    f"key_space {self.key_space} differs from the ONS p-table's "
                    f"{table.key_space} cell keys"
                )
            return table.key_space
        return self.key_space or 256


MECHANISM = Mechanism(
    "cellkey",
    "cell key method: p-table noise keyed by the contributors (same people, same noise)",
    CellKeyParameters,
    any_census=True,
)


def check_reachable_variance(bound: int, variance: Decimal) -> None:
    """Refuse a variance the max-entropy p-table cannot reach at ``bound`` (it is not clamped).

    The construction bounds each row's variance by V, and the entropy of zero-mean noise on
    −D..D is largest for the uniform distribution, of variance D(D+1)/3: a larger V leaves the
    constraint slack and the table uniform, with less variance than asked for. A ValueError
    states the limit and what to change.
    """
    largest = Fraction(bound * (bound + 1), 3)
    target = Fraction(variance)
    if target <= largest:
        return
    whole = largest.denominator == 1
    shown = str(largest.numerator) if whole else f"{int(largest * 10**4) / 10**4:.4f}"  # down
    needed = next((d for d in range(bound + 1, 101) if Fraction(d * (d + 1), 3) >= target), None)
    raise ValueError(
        f"ptable=maxent cannot reach variance={variance} with bound={bound}: the largest variance "
        f"of a max-entropy p-table with bound={bound} is {'' if whole else 'just above '}{shown}, "
        f"D(D+1)/3, the uniform noise on -{bound}..{bound}; lower variance to at most {shown}"
        + (f" or raise bound to {needed} or more" if needed is not None else "")
    )


# ---------------------------------------------------------------------------------------------
# Keys and perturbation
# ---------------------------------------------------------------------------------------------


def assign_record_keys(
    population: Population, key_space: int, rng: np.random.Generator
) -> Population:
    """The population with a uniform ``record_key`` in 0..K−1 on every person and unit."""
    persons = rng.integers(0, key_space, population.n_records("persons"))
    households = rng.integers(0, key_space, population.n_records("households"))
    return population.with_record_keys(persons, households)


def keys_from_ids(population: Population, key_space: int) -> Population:
    """Record keys as id mod K (ONS derives them from ``ons_id`` mod 4096)."""
    return population.with_record_keys(
        population.record_ids("persons") % key_space,
        population.record_ids("households") % key_space,
    )


def has_keys(population: Population) -> bool:
    """Whether the population stores record keys: in both tables, never in one alone (keys of
    one table would otherwise be silently replaced by drawn ones)."""
    persons = population.record_keys("persons") is not None
    units = population.record_keys("households") is not None
    if persons != units:
        holder, other = ("persons", "units") if persons else ("units", "persons")
        raise InputError(
            f"cellkey: the {holder} have a {RECORD_KEY.name} column but the {other} have none; "
            "give record keys in both tables or in neither"
        )
    return persons


def cell_noise(table: AnyPTable, counts: IntArray, cell_keys: IntArray, key_space: int) -> IntArray:
    """The p-table's noise for true ``counts`` with ``cell_keys`` in 0..K−1 (0 where count 0)."""
    if isinstance(table, OnsPTable):
        return table.noise(counts, cell_keys)
    return table.noise(counts, cell_keys / key_space)


def noise_bound(table: AnyPTable) -> int:
    """The largest |noise| the table can add (D)."""
    if isinstance(table, OnsPTable):
        return int(np.abs(table.pvalue).max())
    return int(table.D)


def blocked(table: AnyPTable) -> int:
    """js: published counts 1..js never occur (0 for ONS tables, whose threshold does that)."""
    return 0 if isinstance(table, OnsPTable) else int(table.js)


def keyed_tables(
    population: Population, names: list[str] | None, key_space: int
) -> tuple[dict[str, TableCounts], dict[str, TableCounts]]:
    """Counts and cell keys of every table at every level, on the same sparsity pattern.

    One tabulation of complex weights 1 + i·rk gives both at once (the count in the real part,
    the key sum in the imaginary part, exact while every sum stays below 2⁵³); otherwise the
    counts and the sums of rk + 1 are tabulated separately (both positive over the same
    contributors, so their patterns agree).
    """
    kinds = {t.records for t in population.census.select(names)}
    keys = {}
    for kind in kinds:
        stored = population.record_keys(kind)
        assert stored is not None  # (assigned before)
        keys[kind] = stored.astype(np.int64)
    largest = max((int(k.sum()) for k in keys.values()), default=0)
    records = sum(population.n_records(kind) for kind in ("persons", "households"))
    if largest + records < EXACT_FLOAT:
        mixed = {kind: np.ones(len(k)) + 1j * k for kind, k in keys.items()}
        return _split(tabulate(population, names, mixed), key_space)
    plain = tabulate(population, names)
    summed = tabulate(population, names, {kind: k + 1 for kind, k in keys.items()})
    cell_keys = {}
    for name, tc in plain.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            key_matrix = summed[name].counts[level][1]
            matrix.sort_indices()
            key_matrix.sort_indices()
            if not np.array_equal(matrix.indices, key_matrix.indices):
                raise AssertionError(f"{name} at {level}: key and count patterns differ")
            keyed = matrix.copy()
            keyed.data = (key_matrix.data - matrix.data) % key_space
            levels[level] = (codes, keyed)
        cell_keys[name] = TableCounts(tc.table, levels, tc.geoids)
    return plain, cell_keys


def _split(
    tables: dict[str, TableCounts], key_space: int
) -> tuple[dict[str, TableCounts], dict[str, TableCounts]]:
    """(counts, cell keys) from complex tables holding count + i·(key sum)."""
    plain, cell_keys = {}, {}
    for name, tc in tables.items():
        counts, keys = {}, {}
        for level, (codes, matrix) in tc.counts.items():
            n = matrix.copy()
            n.data = np.rint(matrix.data.real).astype(np.int64)
            k = matrix.copy()
            k.data = np.rint(matrix.data.imag).astype(np.int64) % key_space
            counts[level], keys[level] = (codes, n), (codes, k)
        plain[name] = TableCounts(tc.table, counts, tc.geoids)
        cell_keys[name] = TableCounts(tc.table, keys, tc.geoids)
    return plain, cell_keys


def independent_keys(
    cell_keys: dict[str, TableCounts], key_space: int, rng: np.random.Generator
) -> dict[str, TableCounts]:
    """Fresh uniform cell keys for every published cell (no SPSN)."""
    out = {}
    for name, tc in cell_keys.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            fresh = matrix.copy()
            fresh.data = rng.integers(0, key_space, len(fresh.data))
            levels[level] = (codes, fresh)
        out[name] = TableCounts(tc.table, levels, tc.geoids)
    return out


def perturb(
    plain: dict[str, TableCounts],
    cell_keys: dict[str, TableCounts],
    table: AnyPTable,
    key_space: int,
    threshold: int,
) -> dict[str, TableCounts]:
    """Published tables: every cell perturbed by the p-table, counts below ``threshold`` removed."""
    out: dict[str, TableCounts] = {}
    bound, js = noise_bound(table), blocked(table)
    for name, tc in plain.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            keys = cell_keys[name].counts[level][1].data
            noise = cell_noise(table, matrix.data, keys, key_space)
            published = matrix.data + noise
            check_published(name, level, matrix.data, published, bound, js)
            result = matrix.copy()
            result.data = np.where(published < threshold, 0, published)
            result.eliminate_zeros()
            levels[level] = (codes, result)
        out[name] = TableCounts(tc.table, levels, tc.geoids)
    return out


def check_published(
    name: str, level: str, true: IntArray, published: IntArray, bound: int, js: int
) -> None:
    """The mechanism's invariants: non-negative, |noise| ≤ D, never in 1..js."""
    if (published < 0).any():
        raise AssertionError(f"{name} at {level}: a negative published count")
    if (np.abs(published - true) > bound).any():
        raise AssertionError(f"{name} at {level}: noise beyond the bound {bound}")
    if js and ((published >= 1) & (published <= js)).any():
        raise AssertionError(f"{name} at {level}: a published count in 1..{js}")


# ---------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------


@MECHANISM.define("protect")
def protect(population: Population, p: CellKeyParameters, rng: np.random.Generator) -> Release:
    """Every table of the workload (default: of the census) at every level, perturbed by the
    p-table (after swapping, if asked)."""
    table = p.table()
    key_space = p.resolved_key_space(table)
    notes: dict[str, object] = {}
    source = population
    randomness: dict[str, object] = {}  # drawn keys: the stream is the only source
    if p.keys == "ids":
        source = keys_from_ids(population, key_space)
        notes["record_keys"] = f"person_id / unit_id mod {key_space}"
        randomness = {
            "source": f"record ids (person_id / unit_id mod {key_space})",
            "fit_for_publication": False,
            "note": "cell keys derived from record ids are only as secret as the ids, and "
            "sequential ids can be guessed: use stored or drawn record keys for publication",
        }
    elif p.keys == "drawn" or not has_keys(population):
        source = assign_record_keys(population, key_space, rng)
        notes["record_keys"] = f"drawn uniformly on 0..{key_space - 1} for this release" + (
            "" if p.keys == "drawn" else " (the population had no record_key column)"
        )
    else:
        notes["record_keys"] = "the population's record_key column"
        check_stored_keys(population, key_space)
        randomness = {
            "source": "the population's record_key column",
            "fit_for_publication": True,
            "note": "the cell keys are as secret as the stored record keys",
        }
    if p.swap != "none":
        preset = {"swap": swapping.SWAP, "swap-low": swapping.SWAP_LOW}.get(
            p.swap, swapping.SWAP_HIGH
        )
        census = population.census if isinstance(population, CensusRecords) else None
        swapped = swapping.swap_population(source, preset.parse({}, census), rng)
        source = swapped.population
        # not the swap's household count: an invariant of the swap, but H3 is perturbed here
        notes["swap"] = {
            "mechanism": p.swap,
            "target_swap_rate": swapped.notes["target_swap_rate"],
        }
    names = None if p.tables is None else p.workload_names()
    plain, cell_keys = keyed_tables(source, names, key_space)
    if not p.spsn:
        cell_keys = independent_keys(cell_keys, key_space, rng)
        notes["spsn"] = "off: every published cell has an independent uniform cell key"
    published = perturb(plain, cell_keys, table, key_space, p.threshold)
    notes["key_space"] = key_space
    notes["ptable"] = describe(table, p.pstay)
    if p.threshold:
        notes["absent_rows"] = (
            f"a cell absent from a table was published as 0 or was below the threshold "
            f"{p.threshold} (suppressed): the two are not distinguished"
        )
    return Release(
        mechanism="cellkey",
        parameters=p.recorded(),
        card=card(p, table),
        tables={name: PublishedTable.from_counts(tc) for name, tc in published.items()},
        randomness=randomness,
        artifacts={PTABLE_ARTIFACT: table.to_frame()} if p.ptable_file else {},
        input_digest=population.digest,
        geography=population.geography,
        notes=notes,
    )


@MECHANISM.define("unprotected")
def unprotected(population: Population, p: CellKeyParameters, release: Release) -> str | None:
    """Why a cell key release protects nothing though its counts may differ from the exact
    ones: a p-table whose noise is a fixed, invertible function of the count, with no threshold
    that withholds a count of 1 or more (a threshold at or below every count the table shows
    withholds nothing), or stored record keys that are all equal (every cell key is then a
    function of the cell's count, and so is its noise)."""
    if p.ptable != "maxent":  # a max-entropy table has variance V > 0
        table = published_ptable(release, p)
        if is_invertible(table) and p.threshold <= smallest_shown(table):
            return (
                "the p-table gives every count one published value and no two counts the same "
                "one, and no count is withheld: anyone can undo the noise"
            )
    if p.keys == "stored" and p.spsn and has_keys(population):
        for kind, label in (("persons", "persons"), ("households", "units")):
            keys = population.record_keys(kind)
            if keys is not None and len(keys) > 1 and len(np.unique(keys)) == 1:
                return (
                    f"every one of the {label}' record keys is the same: a cell's key, and so "
                    "its noise, is a function of its count"
                )
    return None


def check_stored_keys(population: Population, key_space: int) -> None:
    """Stored keys must lie in 0..K−1 for the cell keys to be uniform."""
    for kind, label in (("persons", "persons"), ("households", "units")):
        keys = population.record_keys(kind)
        top = int(np.nan_to_num(keys).max(initial=0)) if keys is not None else 0
        if top >= key_space:
            raise InputError(
                f"{label}: record_key goes up to {top}, outside 0..{key_space - 1} "
                f"(set key_space to the keys' range)"
            )


def describe(table: AnyPTable, pstay: Decimal | None = None) -> dict[str, object]:
    """What the release notes say about its p-table, including where it does not honour its
    parameters: rows whose variance stays below V, rows where p(i→i) fell below ``pstay``."""
    if isinstance(table, OnsPTable):
        return {"format": "ONS", "key_space": table.key_space, "bound": noise_bound(table)}
    out: dict[str, object] = {"format": "long", "D": table.D, "V": table.V, "js": table.js}
    if table.flagged:
        rows = "row i = {} has" if len(table.flagged) == 1 else "rows i = {} have"
        out["rows_below_V"] = (
            f"{rows.format(row_list(table.flagged))} a variance below V = {table.V:g}: the noise "
            "of a small count cannot reach below -count"
        )
    if pstay is not None:
        stays = {}
        for i in range(1, table.i_max + 1):
            v, p = table.row(i)
            stays[i] = float(p[v == 0].sum())
        # the intervals are rounded to 8 decimals, so a bound met exactly may read 1e-8 below
        relaxed = [i for i, stay in stays.items() if stay < float(pstay) - 1e-8]
        if relaxed:
            out["pstay_relaxed"] = (
                f"p(i→i) is below pstay = {pstay} in rows i = {row_list(relaxed)} (down to "
                f"{min(stays[i] for i in relaxed):.4g}): the bound is relaxed in steps of 0.05 "
                "until the row reaches variance V, as the ptable package does"
            )
    return out


def row_list(rows: tuple[int, ...] | list[int]) -> str:
    """``[1, 2, 3, 5]`` → ``"1-3, 5"``."""
    runs: list[list[int]] = []
    for row in sorted(rows):
        if runs and row == runs[-1][-1] + 1:
            runs[-1].append(row)
        else:
            runs.append([row])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


@MECHANISM.define("guarantee")
def card(p: CellKeyParameters, table: AnyPTable | None = None) -> SpecCard:
    """(ε, δ) per released cell from the p-table's neighbouring count pairs (docs/cellkey.md)."""
    table = table or p.table()
    rows: list[dict[str, object]] = []
    for eps in dict.fromkeys((*REPORTED_EPSILONS, p.epsilon)):
        deltas = delta_pairs(table, eps)
        worst = int(np.argmax(deltas))
        rows.append(
            {
                "epsilon": eps,
                "delta (max over pairs)": float(deltas.max()),
                "worst pair": f"({worst}, {worst + 1})",
                "delta, symmetry pair": float(deltas[-1]),
            }
        )
    delta = float(delta_pairs(table, p.epsilon).max())
    floor = float(delta_pairs(table, 50.0).max())
    guarantee, release_level = cell_guarantee(p, table, delta)
    return SpecCard(
        mechanism="cellkey",
        domain="person and unit records of the tabulated population",
        multiverse="a single universe: no published cell is exact by design "
        "(but zeros are published as zeros)",
        guarantee=guarantee,
        covers=(
            ("every table" if p.tables is None else f"the tables {', '.join(p.workload_names())}")
            + " of the swapped population, each cell perturbed by the p-table"
            if p.swap != "none"
            else "one released cell: its count's neighbouring pairs (n, n+1) under the p-table, "
            "with a uniformly distributed cell key"
        ),
        caveats=(
            release_level,
            f"Strict epsilon-DP is impossible with bounded noise: delta is at least {floor:.4g} "
            "whatever epsilon (the mass the neighbour cannot reach).",
            "The noise bound D and the p-table are public; combined with additive margins they "
            "allow the noise-bound and averaging attacks of `sdclab ckm-risk`.",
        ),
        allocation=tuple(rows),
    )


@lru_cache(maxsize=16)
def cells_per_person(census: Census, names: tuple[str, ...] | None = None) -> int:
    """t: the published cells one person record moves, over every table of the workload
    (``names``; default every table of the census) at every level (Bach's release-level view):
    the person tables' cells it is counted in, and the household-table cells its presence
    moves."""
    tables = census.select(names)
    person = sum(int(coverage(t).max()) * len(t.levels) for t in tables if t.records == "persons")
    unit = max(
        (
            sum(n * len(census.table(name).levels) for name, n in move.cells.items())
            for move in cells_moved(tables, census.household_changes)
        ),
        default=0,
    )
    return person + unit


def cell_guarantee(p: CellKeyParameters, table: AnyPTable, delta: float) -> tuple[Guarantee, str]:
    """The per-cell (ε, δ) as a guarantee, with why it does (or does not) compose over the cells
    a person is in, and what the release-level figure is where it does."""
    per_cell = Loss("approximate", epsilon=p.epsilon, delta=delta)
    t = cells_per_person(p.census, None if p.tables is None else tuple(p.workload_names()))
    if p.swap != "none":
        reason = (
            f"targeted swapping ({p.swap}) runs first and has no formal guarantee of its own; the "
            "joint guarantee of swapping followed by perturbation is an open problem (Bailie, "
            "Gong & Meng)"
        )
        return no_guarantee(reason, unit="household"), (
            f"The chain has no formal guarantee: {reason}. The cell key part alone gives, per "
            f"released cell of the swapped tables, {per_cell.text()}."
        )
    if is_deterministic(table):
        reason = (
            "the p-table publishes one value per count whatever the cell key (deterministic "
            "rounding, delta = 1): there is no randomness to compose"
        )
    elif p.spsn and p.keys == "ids":
        reason = (
            "keys=ids makes every record key, hence every cell key, a deterministic function of "
            "the data: there is no randomness to compose"
        )
    elif p.spsn:
        reason = (
            "cell keys are sums of the contributors' record keys modulo K (same participants, "
            "same noise): cells sharing contributors have dependent noise, so the per-cell "
            "guarantees do not compose by the standard theorem"
        )
    else:
        released = compose(*[per_cell] * t)
        replaced, step = add_remove_to_replace(released)
        text = (
            f"Independent cell keys (spsn=false): over the t = {t:,} cells a person is in, "
            f"basic composition gives epsilon = {float(released.epsilon or 0):.4g}, delta = "
            f"{float(released.delta or 0):.3g} for the release."
        )
        return (
            Guarantee(
                measure="approximate",
                unit="person",
                relation="add_remove",
                loss=released,
                person_replace=replaced,
                derivation=(f"basic composition over t = {t:,} cells: (tε, tδ)", step),
            ),
            text,
        )
    guarantee = Guarantee(
        measure="approximate",
        unit="person",
        relation="add_remove",
        loss=per_cell,
        person_replace=NotMeasured(reason),
        scope="cell",
    )
    return guarantee, (
        f"The guarantee is per released cell; a person is in t = {t:,} published cells, and no "
        f"release-level figure is stated: {reason}."
    )


@MECHANISM.define("diagnostics")
def diagnostics(population: Population, release: Release) -> tuple[Diagnostics, ...]:
    """Evaluation only: with a threshold, the non-empty true cells the release does not show, by
    level (published below the threshold — or emptied by a swap first). A reader cannot tell them
    from empty cells, so the release does not say how many there are."""
    if not CellKeyParameters.model_validate(release.parameters).threshold:
        return ()
    hidden = {level: 0 for level in release.geography.levels}
    for name, tc in tabulate(population, list(release.tables)).items():
        table = release.table(name)
        for level, (_, truth) in tc.counts.items():
            nonempty = truth != 0
            # published: a non-zero count or a suppressed cell (a null row of the file)
            shown = (table.matrix(level) != 0).maximum(table.suppressed(level))
            hidden[level] += nonempty.nnz - nonempty.multiply(shown).nnz
    levels = {level for table in release.tables.values() for level in table.levels}
    return (HiddenCells({lv: n for lv, n in hidden.items() if lv in levels}),)


@MECHANISM.define("noise")
def published_noise(p: CellKeyParameters) -> NoisePublication:
    design: dict[str, Any] = {"ptable": p.ptable} if p.ptable in PTABLE_PRESETS else {}
    if p.ptable == "maxent":
        design |= {"bound": p.bound, "variance": float(p.variance or 0), "js": p.js}
    return NoisePublication(
        distribution="integer noise looked up in the p-table by each cell's key (the sum of "
        "its contributors' record keys): the same contributors get the same noise"
        + ("" if p.spsn else "; spsn=false: every published cell draws its own key"),
        published=(
            "parameters: the p-table's design (a preset, or maxent's bound and variance)",
            f"artifact {PTABLE_ARTIFACT}: the p-table itself, when it came from a file",
            "not published: the record keys",
        ),
        parameters=design | {"threshold": p.threshold},
    )


def published_ptable(release: Release, params: CellKeyParameters) -> AnyPTable:
    """The p-table of a cell key release: the one it publishes (a p-table from a file) or the
    preset its parameters name."""
    if not params.ptable_file:
        return params.table()
    if PTABLE_ARTIFACT not in release.artifacts:
        raise InputError(f"the release publishes no {artifact_file(PTABLE_ARTIFACT)}")
    return ptable_from_frame(
        release.artifacts[PTABLE_ARTIFACT], Path(artifact_file(PTABLE_ARTIFACT))
    )


@MECHANISM.define("check")
def check_release(release: Release, p: CellKeyParameters) -> str | None:
    """Every count is one the release's p-table and threshold publish, and none means more
    records than its geounit's total allows; the p-table is published when it came from a
    file, and only then."""
    if p.ptable_file != (PTABLE_ARTIFACT in release.artifacts):
        return (
            f"{artifact_file(PTABLE_ARTIFACT)} is published only with a p-table from a file, and "
            f"then always; the recorded ptable is {p.ptable!r}"
        )
    table = published_ptable(release, p)

    def true_range(_table: str, _level: str, counts: FloatArray) -> tuple[FloatArray, FloatArray]:
        low, high = preimage_bounds(table, p.threshold, counts)
        return low.astype(np.float64), high.astype(np.float64)

    rule = "a count its p-table turns some count into" + (
        f", 0 or at least the threshold {p.threshold}" if p.threshold else ""
    )
    return counts_problem(release, true_range, rule)


@MECHANISM.publishes(
    PTABLE_ARTIFACT, "the p-table, when it came from a file (a preset is named by the parameters)"
)
def check_ptable(frame: pl.DataFrame, _: Geography | None = None) -> str | None:
    """Whether the frame is a p-table, checked as a p-table file is; the problem, or None."""
    where = Path(artifact_file(PTABLE_ARTIFACT))
    try:
        ptable_from_frame(frame, where)
    except InputError as exc:
        return exc.one_line().removeprefix(f"{where}: ")
    return None


@MECHANISM.define("cell_model")
def cell_model(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """The attacker's model: the counts the p-table (and the threshold) can turn into the
    published one, distance weight 1 (the p-table's mass is largest at no change)."""
    p = CellKeyParameters.model_validate(release.parameters)
    table = published_ptable(release, p)
    shown = np.nan_to_num(published, nan=0.0)
    if np.any(shown < 0) or np.any(shown != np.rint(shown)):
        raise InputError("release (cellkey): published counts must be non-negative integers")
    low, high = (bound.astype(np.float64) for bound in preimage_bounds(table, p.threshold, shown))
    impossible = ~np.isnan(published) & (low > high)
    if impossible.any():
        raise InputError(
            f"release (cellkey): a published count of {int(shown[impossible][0])} at {level} "
            "cannot come from its p-table; the release and its parameters disagree"
        )
    return bounds(published, low, high, np.ones_like(published))


@MECHANISM.define("cell_noise")
def one_cell_noise(p: CellKeyParameters, count: int | None) -> dict[str, Any]:
    """The noise of one published cell under the p-table, for a cell key uniform on [0, 1) as
    on the card: of a large count (the symmetry row, or an ONS table's rows over one period of
    counts), or of ``count``. Every table at every level takes its noise from the same p-table.
    The method has no budget: the card's reason is stated instead."""
    from sdclab.core.accounting import margin_of_error
    from sdclab.protection.ptable import large_count_noise

    ptable = p.table()
    if count is not None:
        values, probabilities = ptable.row(count)
        row = f"the row of a count of {count}"
    elif isinstance(ptable, PTable):
        values, probabilities = large_count_noise(ptable)
        row = f"the row of every count from {ptable.i_max} up (the symmetry row)"
        if ptable.i_max > 1:
            row += f"; counts 1 to {ptable.i_max - 1} have rows of their own (--count N)"
    else:
        values, probabilities = large_count_noise(ptable)
        row = (
            "the rows of counts 501 to 750 taken together, each count equally likely (rows "
            "repeat with period 250 above 750); a given count's noise differs (--count N)"
        )
    shown = probabilities > 0
    values, probabilities = values[shown], probabilities[shown]
    mean = float((values * probabilities).sum())
    common = card(p, ptable).common
    reason = common.reason if isinstance(common, NotMeasured) else common.text()
    return {
        "mechanism": "cellkey",
        "ptable": p.ptable,
        "count": count,
        "row": row,
        "noise": {int(v): float(q) for v, q in zip(values, probabilities, strict=True)},
        "mean": mean,
        "variance": float(((values - mean) ** 2 * probabilities).sum()),
        "max_abs": int(np.abs(values).max()),
        "bound": noise_bound(ptable),
        "moe_95": margin_of_error(values, probabilities),
        "stated_variance": None if isinstance(ptable, OnsPTable) else float(ptable.V),
        "budget": (
            f"none: {reason} (docs/cellkey.md, The card); the noise is the same for a cell of "
            "any table at any level"
        ),
        "what": (
            "the noise of one published cell for a cell key uniform on [0, 1), as on the card "
            f"(with K = {p.resolved_key_space(ptable)} integer keys each probability is the share "
            "of the keys k/K in its interval)"
        ),
    }
