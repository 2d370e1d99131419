"""What a release read from its files may hold: values its mechanism could have produced.

A release's digests show that a file changed after sdclab wrote it, not who wrote it: they are
plain SHA-256, so anyone can edit a release and digest it again. Every reader therefore also checks
each value a consumer reads against what the release's mechanism could have produced with the
release's own recorded parameters (each mechanism's
:attr:`~sdclab.protection.base.Mechanism.check`). Two rules serve every mechanism that publishes
tables:

* each published count is one the mechanism publishes (:func:`counts_problem`): an exact count is
  a whole number of at least 0; a noisy one lies within the noise's reach of one;
* no cell needs more records than its geounit's total allows (:func:`totals_problem`): a cell of a
  person table counts at most the persons of its geounit (P1), a cell of a housing table at most
  its housing units (H1), each as the release publishes them.

A noise without a bound (discrete Laplace, discrete Gaussian) is taken to stay within its reach
(:func:`laplace_reach`, :func:`gaussian_reach`), beyond which a draw has a probability below
:data:`IMPOSSIBLE`. So a count no real release holds is refused before an attack sizes its work by
it. (These floating-point bounds judge values read from a file; the exact samplers in
:mod:`sdclab.core.noise` use none.)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from sdclab.core.arrays import BoolArray, FloatArray
from sdclab.core.census.model import Census
from sdclab.core.tables.definition import TableDef
from sdclab.release import Release

TrueRange = Callable[[str, str, FloatArray], tuple[FloatArray, FloatArray]]
"""(table, level, published counts) → the least and the greatest count of records each could
have come from (the least above the greatest where none could)."""

IMPOSSIBLE = 1e-40
"""A probability no draw is taken to meet: a value beyond a noise's reach (below) is refused as
not drawn from it. Over even 10¹² draws the chance of a genuine one beyond is below 10⁻²⁸."""


def laplace_reach(scale: float) -> float:
    """The |y| that the discrete Laplace of ``scale`` exceeds with probability at most
    :data:`IMPOSSIBLE`: P(|Y| ≥ t) = 2qᵗ/(1 + q) ≤ 2qᵗ, q = exp(−1/scale)."""
    return float(scale) * math.log(2 / IMPOSSIBLE)


def gaussian_reach(sigma2: float) -> float:
    """The |y| that the discrete Gaussian N_Z(0, σ²) exceeds with probability at most
    :data:`IMPOSSIBLE`: it is σ²-sub-Gaussian (Canonne, Kamath & Steinke 2020), so
    P(|Y| ≥ t) ≤ 2 exp(−t² / 2σ²)."""
    return math.sqrt(2 * float(sigma2) * math.log(2 / IMPOSSIBLE))


def total_of(census: Census, table: TableDef) -> TableDef | None:
    """The census's table whose one cell counts the records ``table`` counts: the total of
    persons (the US P1) for a person table, the first one-cell household table (the US H1,
    housing units) for a household table."""
    if table.records == "persons":
        return census.total_table
    return next(
        (t for t in census.tables.values() if t.records == table.records and t.n_cells == 1),
        None,
    )


def whole(counts: FloatArray) -> BoolArray:
    """Whether each count is a finite whole number."""
    return np.isfinite(counts) & (counts == np.round(counts))


def additive_range(reach: Callable[[str, str], float], nonnegative: bool) -> TrueRange:
    """The true counts behind counts published with additive noise of ``reach(table, level)``
    at most: whole numbers within the reach of a count of 0 or more (at least 0 where
    negatives were set to 0)."""

    def true_range(name: str, level: str, counts: FloatArray) -> tuple[FloatArray, FloatArray]:
        far = reach(name, level)
        ok = whole(counts) & (counts >= (0 if nonnegative else -far))
        return (
            np.where(ok, np.maximum(counts - far, 0), np.inf),
            np.where(ok, counts + far, -np.inf),
        )

    return true_range


def exact_range(_table: str, _level: str, counts: FloatArray) -> tuple[FloatArray, FloatArray]:
    """An exact tabulation's counts: each is its own true count, if a whole number ≥ 0."""
    ok = whole(counts) & (counts >= 0)
    return np.where(ok, counts, np.inf), np.where(ok, counts, -np.inf)


EXACT_RULE = "an exact count is a whole number of at least 0"


def counts_problem(release: Release, true_range: TrueRange, rule: str) -> str | None:
    """The first published count of ``release`` that no count of records gives under
    ``true_range`` (``rule`` says which counts are possible, in words), then the first cell that
    needs more records than its geounit's total (:func:`totals_problem`); None if there is none."""
    for name, table in release.tables.items():
        for level in table.levels:
            matrix = table.matrix(level)
            counts = matrix.data.astype(np.float64)
            low, high = true_range(name, level, counts)
            impossible = np.flatnonzero(low > high)
            if impossible.size:
                entry = int(impossible[0])
                row = int(np.searchsorted(matrix.indptr, entry, side="right") - 1)
                return (
                    f"tables/{name}.parquet: {level} {table.geoids(level)[row]}, cell "
                    f"{int(matrix.indices[entry])}: a count of {_shown(counts[entry])} is not "
                    f"one mechanism {release.mechanism} publishes with its recorded parameters "
                    f"({rule})"
                )
    return totals_problem(release, true_range)


def totals_problem(release: Release, true_range: TrueRange) -> str | None:
    """The first geounit whose cells of a table mean more records than its total (P1 for
    persons, H1 for housing units, where the release publishes it there) allows under
    ``true_range`` — one cell above it, or, for a table that counts every record once, cells
    that add up to more than it or cannot add up to it, at the levels the total is published
    at (not a further geography's, such as a grid); None if there is none."""
    for name, table in release.tables.items():
        total_table = total_of(release.census, table.table)
        total = "" if total_table is None else total_table.name
        if total_table is None or total == name or total not in release.tables:
            continue
        if not bounded_by(table.table, total_table):
            continue
        partition = partitions(table.table, total_table)
        for level in (lv for lv in table.levels if lv in release.tables[total].levels):
            problem = _level_problem(release, name, total, level, true_range, partition)
            if problem is not None:
                return problem
    return None


def _level_problem(
    release: Release, name: str, total: str, level: str, true_range: TrueRange, partition: bool
) -> str | None:
    """:func:`totals_problem` for one table at one level."""
    table = release.tables[name]
    shown = release.tables[total].dense(level, suppressed=np.nan)[:, 0]
    fewest, most = true_range(total, level, np.nan_to_num(shown))
    matrix = table.matrix(level)
    least, greatest = true_range(name, level, matrix.data.astype(np.float64))
    needs = sp.csr_matrix((least, matrix.indices, matrix.indptr), shape=matrix.shape)
    where = f"tables/{name}.parquet: {level}"
    over = np.flatnonzero((needs.max(axis=1).toarray()[:, 0] > most) & ~np.isnan(shown))
    if over.size:
        row = int(over[0])
        cell = int(needs.getrow(row).toarray()[0].argmax())
        return (
            f"{where} {table.geoids(level)[row]}, cell {cell}: a count of "
            f"{_shown(matrix[row, cell])} means at least {_shown(needs[row, cell])} records, more "
            f"than {total} there ({_shown(shown[row])}) allows; mechanism {release.mechanism} "
            "publishes no such pair"
        )
    if not partition:
        return None
    # every record is in exactly one cell: the cells add up to the total
    whole_rows = ~np.isnan(shown) & (np.diff(table.suppressed(level).indptr) == 0)
    at_least = np.asarray(needs.sum(axis=1)).ravel()
    stored = sp.csr_matrix((greatest, matrix.indices, matrix.indptr), shape=matrix.shape)
    zeros = matrix.shape[1] - np.diff(matrix.indptr)
    at_most = np.asarray(stored.sum(axis=1)).ravel()
    at_most += zeros * true_range(name, level, np.zeros(1))[1][0]
    for rows, bound, word in (
        (np.flatnonzero((at_least > most) & whole_rows), at_least, "at least"),
        (np.flatnonzero((at_most < fewest) & whole_rows), at_most, "at most"),
    ):
        if rows.size:
            row = int(rows[0])
            return (
                f"{where} {table.geoids(level)[row]}: its cells add up to {word} "
                f"{_shown(bound[row])} records, but {total} there is {_shown(shown[row])} (every "
                f"record is in one cell); mechanism {release.mechanism} publishes no such tables"
            )
    return None


def _over_one_domain(
    table: TableDef, total: TableDef
) -> tuple[sp.csr_matrix, sp.csr_matrix] | None:
    """The two tables' queries over one domain: their shared schema, or the table's marginal
    domain when the total crosses no attribute the table does not (None: neither)."""
    if table.schema is total.schema:
        return table.query, total.query
    if table.records == total.records and set(total.crossed) <= set(table.crossed):
        return table.marginal_query, total.query_on(table.marginal)
    return None


def counts_all_of_kind(table: TableDef, total: TableDef) -> bool:
    """Whether ``total`` is one cell counting every record of ``table``'s kind and ``table``
    reads each record's cells off its codes (:attr:`TableDef.coding`): the two are then related
    without their queries, which a table crossing long code lists makes large."""
    whole = len(total.parts) == 1 and not total.parts[0].dimensions and not total.parts[0].universe
    return whole and table.coding is not None and table.records == total.records


def partitions(table: TableDef, total: TableDef) -> bool:
    """Whether every record ``total`` counts is in exactly one cell of ``table`` (its cells add
    up to the total)."""
    coding = table.coding or ()
    if counts_all_of_kind(table, total) and len(coding) == 1:  # (parts may split the total)
        return not coding[0].drops
    queries = _over_one_domain(table, total)
    if queries is None:
        return False
    query, total_query = queries
    within = np.asarray(total_query.sum(axis=0)).ravel() > 0
    cells_per_record = np.asarray(query.sum(axis=0)).ravel()
    return bool(np.all(cells_per_record[within] == 1) and np.all(cells_per_record[~within] == 0))


def bounded_by(table: TableDef, total: TableDef) -> bool:
    """Whether every cell of ``table`` counts each record at most once, and only records that
    ``total`` counts (person tables on the hhgq schema count persons, as P1 does)."""
    if counts_all_of_kind(table, total):
        return True  # (a coded table counts each record at most once per cell)
    queries = _over_one_domain(table, total)
    if queries is None:
        return table.schema.name == "person_hhgq" and total.name == "P1"
    query, total_query = queries
    counted = np.asarray(abs(query).sum(axis=0)).ravel() > 0
    within = np.asarray(total_query.sum(axis=0)).ravel() > 0
    return bool(query.max() <= 1 and np.all(within[counted]))


def _shown(value: float) -> str:
    """A count for a message: whole numbers without a decimal point."""
    return f"{value:.0f}" if np.isfinite(value) and value == round(value) else f"{value:g}"


def records_problem(release: Release) -> str | None:
    """Whether the person records a release publishes (its microdata, TopDown's MDF) are as
    many as its national P1 says, when it publishes both: its tables are tabulated from them."""
    persons = release.person_microdata
    if persons is None or "P1" not in release.tables or "nation" not in release.tables["P1"].levels:
        return None
    total = release.tables["P1"].dense("nation", suppressed=np.nan)[0, 0]
    if np.isnan(total) or total == persons.height:
        return None
    where = "artifacts/mdf.parquet" if release.microdata is None else "microdata/persons.parquet"
    return (
        f"{where} holds {persons.height:,} persons, but table P1 for the nation publishes "
        f"{_shown(total)}: mechanism {release.mechanism} tabulates its tables from these records"
    )


def exact_tables(release: Release, _parameters: object = None) -> str | None:
    """The check of a release whose tables are exact tabulations of the records it was made
    from (the confidential ones, swapped ones, TopDown's MDF): whole counts of at least 0, no
    cell above its geounit's total, and as many person records as P1 says."""
    return counts_problem(release, exact_range, EXACT_RULE) or records_problem(release)
