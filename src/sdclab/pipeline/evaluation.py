"""Evaluation: the one place that sees both the truth and what was published or reconstructed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from sdclab.attacks.census_linkage import GEOUNIT, truth_frame
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.person_records import (
    PERSON_ATTRIBUTES,
    unknown_attributes,
    with_agebin,
)
from sdclab.core.census.records import CensusRecords
from sdclab.core.figures import NotMeasured, Value, measured
from sdclab.core.geography import Geography
from sdclab.core.size_classes import BLOCK_SIZE_CLASSES, size_class_label, size_class_of
from sdclab.core.tables.definition import Part, TableDef, part_query
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline.results.accuracy import (
    NO_CELLS,
    NO_CELLS_OF_SIZE,
    NO_CHILDREN,
    NO_DISTRIBUTION,
    NO_GEOUNITS,
    NO_INDICATOR,
    NO_POSITIVE_CELLS,
    NO_POSITIVE_TOTAL,
    NO_SHOWN_CELLS,
    RELATIVE_TOTAL_METRICS,
    LevelAccuracy,
    TableAccuracy,
    no_nonempty_figure,
)
from sdclab.pipeline.results.agreement import NO_TRUE_PERSON, Agreement, AgreementRates
from sdclab.release import Release

KEY = ("block", "sex", "race", "hispanic")


def block_size_counts(truth: Population) -> dict[str, dict[str, int]]:
    """Blocks and persons in each block-size class (blocks with no person are in none)."""
    sizes = (
        truth.persons.group_by("block")
        .len("persons")
        .with_columns(size_class_of(pl.col("persons")).alias("size_class"))
        .group_by("size_class")
        .agg(pl.len().alias("blocks"), pl.col("persons").sum())
    )
    found = {row["size_class"]: row for row in sizes.iter_rows(named=True)}
    out = {}
    for low, high in BLOCK_SIZE_CLASSES:
        row = found.get(size_class_label(low, high), {"blocks": 0, "persons": 0})
        out[size_class_label(low, high)] = {
            "blocks": int(row["blocks"]),
            "persons": int(row["persons"]),
        }
    return out


def not_applicable(records: pl.DataFrame, what: str) -> NotMeasured | None:
    """Why ``what`` cannot be measured on records with unknown attributes (None: it can)."""
    unknown = unknown_attributes(records)
    if not unknown:
        return None
    return NotMeasured(
        f"{what} needs sex, age, race and Hispanic origin; the release's tables do not "
        f"determine {', '.join(unknown)}"
    )


def agreement(reconstructed: pl.DataFrame, truth: Population) -> Agreement | NotMeasured:
    """One-to-one agreement of reconstructed with true records, by block-size class.

    Records are matched without replacement within each block: first on exact age (with sex,
    race and Hispanic origin), then the leftovers on the 38 agebins. The number of matches of a
    key is min(reconstructed, true) — what any one-to-one matching achieves at best.
    Records are never matched on an attribute they lack (null); when the release determines an
    attribute for no record at all, agreement is not measured and says why.
    """
    unknown = not_applicable(reconstructed, "agreement with the truth")
    if unknown is not None:
        return unknown
    cols = list(PERSON_ATTRIBUTES)
    true = with_agebin(truth.persons.select(cols))
    recon = with_agebin(reconstructed.select(cols).cast({c: true.schema[c] for c in cols}))
    exact = _matched(recon, true, [*KEY, "age"])
    left_r = _leftovers(recon, exact, "r")
    left_t = _leftovers(true, exact, "t")
    binned = (
        left_r.join(left_t, on=[*KEY, "agebin"], how="inner")
        .with_columns(matched=pl.min_horizontal("r", "t"))
        .group_by("block")
        .agg(pl.col("matched").sum().alias("agebin_matches"))
    )
    per_block = (
        true.group_by("block")
        .len("persons")
        .join(
            exact.group_by("block").agg(pl.col("matched").sum().alias("exact_matches")),
            on="block",
            how="left",
        )
        .join(binned, on="block", how="left")
        .fill_null(0)
        .with_columns(size_class=size_class_of(pl.col("persons")))
    )
    return agreement_by_size(per_block, recon.height)


RANK_SHARES = (0.01, 0.05, 0.10, 0.25, 0.50, 1.00)
"""The top shares of ranked records at which precision is reported."""


def ranked_precision(
    reconstructed: pl.DataFrame, truth: Population, seed: int = 0
) -> dict[str, Value] | NotMeasured:
    """Precision among the top k% of reconstructed records ranked by confidence (the share of
    further draws that hold them; ties in a seeded random order), for k in :data:`RANK_SHARES`.

    A record is right when it is matched one-to-one to a true person of its block, sex, agebin,
    race and Hispanic origin; within one such key the most confident records are matched first,
    so the curve is what an attacker who trusts the recurring records would get. Not measured,
    with the reason, for records without the attributes or without confidence.
    """
    unknown = not_applicable(reconstructed, "ranked precision")
    if unknown is not None:
        return unknown
    if "confidence" not in reconstructed.columns:
        return NotMeasured("the reconstruction drew no further solutions to rank by")
    cols = list(PERSON_ATTRIBUTES)
    true = with_agebin(truth.persons.select(cols)).group_by([*KEY, "agebin"]).len("true")
    recon = with_agebin(
        reconstructed.select(*cols, "confidence").cast({c: truth.persons.schema[c] for c in cols})
    )
    order = np.random.default_rng(seed).permutation(recon.height)
    ranked = (
        recon.with_columns(_tie=pl.Series(order))
        .sort(["confidence", "_tie"], descending=[True, False])
        .with_columns(_within=pl.int_range(pl.len()).over([*KEY, "agebin"]))
        .join(true, on=[*KEY, "agebin"], how="left", maintain_order="left")
        .with_columns(right=pl.col("_within") < pl.col("true").fill_null(0))
    )
    right = ranked["right"].to_numpy()
    n = len(right)
    return {
        f"top_{share:.0%}": measured(
            float(right[: max(1, int(np.ceil(share * n)))].mean()) if n else None,
            "no record ranked",
        )
        for share in RANK_SHARES
    }


def _matched(recon: pl.DataFrame, true: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    r = recon.group_by(key).len("r")
    t = true.group_by(key).len("t")
    return r.join(t, on=key, how="inner").with_columns(matched=pl.min_horizontal("r", "t"))


def _leftovers(records: pl.DataFrame, exact: pl.DataFrame, name: str) -> pl.DataFrame:
    """Records left after the exact pass, counted by key and agebin."""
    key = [*KEY, "age"]
    counts = records.group_by([*key, "agebin"]).len(name)
    return (
        counts.join(exact.select([*key, "matched"]), on=key, how="left")
        .with_columns(pl.col(name) - pl.col("matched").fill_null(0))
        .group_by([*KEY, "agebin"])
        .agg(pl.col(name).sum())
    )


def agreement_by_size(per_unit: pl.DataFrame, records: int) -> Agreement:
    """The agreement of ``records`` records from the matches of each geounit (``persons``,
    ``exact_matches``, ``agebin_matches``, ``size_class``): over all geounits and by class of
    their true size (:data:`BLOCK_SIZE_CLASSES`)."""

    def rates(frame: pl.DataFrame) -> AgreementRates:
        persons = int(frame["persons"].sum())
        exact = int(frame["exact_matches"].sum())
        binned = exact + int(frame["agebin_matches"].sum())
        return AgreementRates(
            blocks=frame.height,
            persons=persons,
            agree_exact_age=exact / persons if persons else NotMeasured(NO_TRUE_PERSON),
            agree_agebin=binned / persons if persons else NotMeasured(NO_TRUE_PERSON),
        )

    by_class = {
        size_class_label(low, high): rates(
            per_unit.filter(pl.col("size_class") == size_class_label(low, high))
        )
        for low, high in BLOCK_SIZE_CLASSES
    }
    return Agreement(all=rates(per_unit), by_block_size=by_class, records=records)


def block_agebin_agreement(reconstructed: pl.DataFrame, truth: Population) -> float | None:
    """Share of true persons matched one-to-one on {block, sex, agebin} alone (None when the
    release does not determine sex or age)."""
    if {"sex", "age"} & set(unknown_attributes(reconstructed)):
        return None
    cols = ["block", "sex", "age"]
    true = with_agebin(truth.persons.select(cols))
    recon = with_agebin(reconstructed.select(cols).cast({c: true.schema[c] for c in cols}))
    key = ["block", "sex", "agebin"]
    matched = recon.group_by(key).len("r").join(true.group_by(key).len("t"), on=key)
    total = int(matched.select(pl.min_horizontal("r", "t")).sum().item())
    return total / true.height if true.height else float(np.nan)


# ---------------------------------------------------------------------------------------------
# Accuracy of published tables
# ---------------------------------------------------------------------------------------------

RELATIVE_ERROR_THRESHOLDS = (0.1, 0.5, 1.0)
CELL_SIZE_CLASSES = ((0, 0), (1, 9), (10, 99), (100, None))
"""Classes of a cell's true count for its errors (a cell of true count 0 is its own class)."""


def accuracy(release: Release, truth: Population) -> dict[str, dict[str, TableAccuracy]]:
    """Error of every published table at every level against the exact tabulation of the truth
    (:func:`table_accuracy`), by table and level.

    Over every cell of all geounits of the level, zeros included, a withheld (suppressed) cell's
    error being its true count: mean absolute error, root mean squared error, bias (mean signed
    error); the same over the cells whose true count is positive (non-empty: a mechanism that
    never perturbs zeros is not flattered by them), the mean absolute error by class of the true
    count (0, 1–9, 10–99, 100+); the two mean absolute errors over the shown cells alone; the
    share suppressed; the share of negative counts among the shown cells; over cells whose true
    count is positive: share with |relative error| above 10/50/100%; cells whose true count is 0
    but published otherwise; the mean total variation and Hellinger distance between each
    geounit's true and published distribution over the table's cells (a withheld cell read as
    0). Whether parent cells add up is :func:`additivity`.
    """
    exact = tabulate(truth, evaluated_tables(release))
    out: dict[str, dict[str, TableAccuracy]] = {}
    for name, counts in exact.items():
        published = release.table(name)
        out[name] = {}
        for level in release.census.table(name).levels:
            true = counts.counts[level][1]
            if true.shape != published.matrix(level).shape:
                raise ValueError(
                    f"{name} at {level}: the population has {true.shape[0]} geounits, the "
                    f"release {published.matrix(level).shape[0]}: not the release's population"
                )
            out[name][level] = table_accuracy(
                name, level, published.matrix(level), published.suppressed(level), true
            )
    return out


def evaluated_tables(release: Release) -> list[str]:
    """The release's tables that its census defines: those whose accuracy is measured."""
    return [n for n in release.tables if n in release.census.tables]


def additivity(release: Release) -> dict[str, dict[str, Value]]:
    """By table (:func:`evaluated_tables`) and parent level, the share of parent cells whose
    children do not add up to them (:func:`_additivity`), or why none was compared."""
    return {
        name: {
            parent: measured(share, NO_CHILDREN)
            for parent, share in _additivity(release.table(name), release.geography).items()
        }
        for name in evaluated_tables(release)
    }


def table_accuracy(
    table: str,
    level: str,
    published: sp.csr_matrix,
    suppressed: sp.csr_matrix,
    true: sp.csr_matrix,
) -> TableAccuracy:
    """Errors of ``table`` at ``level`` over every cell, a withheld (suppressed) cell counted as
    what a user has of it — nothing, so its error is its true count — and kept in every
    denominator: withholding a true 0 costs nothing, withholding a count costs that count. The
    mean absolute errors over the shown cells alone are beside them (``*_shown``), with the
    share withheld.

    ``published`` holds 0 at the ``suppressed`` cells; ``true`` is the exact tabulation."""
    n_cells = published.shape[0] * published.shape[1]
    n_shown = n_cells - suppressed.nnz
    released = published.astype(np.float64)
    released = released - released.multiply(suppressed)  # nothing is read from a withheld cell
    truth = sp.csr_matrix(true, dtype=np.float64)
    truth.eliminate_zeros()
    error = (released - truth).tocsr()
    withheld_error = np.abs(error.multiply(suppressed).tocsr().data)
    withheld_truth = truth.multiply(suppressed).tocsr()
    rows, cols = truth.nonzero()
    truth_values = _values(truth, rows, cols)
    positive = truth_values > 0
    nonempty_error = _values(error, rows, cols)[positive]
    relative = np.abs(nonempty_error) / truth_values[positive]
    n_positive = int(positive.sum())
    n_positive_shown = n_positive - int((withheld_truth.data > 0).sum())
    abs_error = np.abs(error.data)
    # cells published non-zero whose true count is 0
    false_positive = (released != 0).nnz - (released != 0).multiply(truth != 0).nnz
    shown_abs = abs_error.sum() - withheld_error.sum()
    shown_nonempty_abs = np.abs(nonempty_error).sum() - withheld_error.sum()

    distances = _distances(released, truth)
    return TableAccuracy(
        table=table,
        level=level,
        cells=n_cells,
        shown_cells=n_shown,
        nonempty_cells=n_positive,
        nonempty_shown_cells=n_positive_shown,
        mae=_over(n_cells, NO_CELLS, lambda: abs_error.sum() / n_cells),
        rmse=_over(n_cells, NO_CELLS, lambda: np.sqrt((error.data**2).sum() / n_cells)),
        bias=_over(n_cells, NO_CELLS, lambda: error.data.sum() / n_cells),
        mae_nonempty=_over(n_positive, NO_POSITIVE_CELLS, lambda: np.abs(nonempty_error).mean()),
        rmse_nonempty=_over(
            n_positive, NO_POSITIVE_CELLS, lambda: np.sqrt((nonempty_error**2).mean())
        ),
        bias_nonempty=_over(n_positive, NO_POSITIVE_CELLS, lambda: nonempty_error.mean()),
        mae_shown=_over(n_shown, NO_SHOWN_CELLS, lambda: shown_abs / n_shown),
        mae_nonempty_shown=_over(
            n_positive_shown,
            no_nonempty_figure(n_shown),
            lambda: shown_nonempty_abs / n_positive_shown,
        ),
        mae_by_true_count=_error_by_true_count(
            n_cells - n_positive, abs_error, nonempty_error, truth_values[positive]
        ),
        max_abs_error=_over(n_cells, NO_CELLS, lambda: abs_error.max(initial=0.0)),
        negative_share=_over(n_shown, NO_SHOWN_CELLS, lambda: (released.data < 0).sum() / n_shown),
        suppressed_share=suppressed.nnz / n_cells if n_cells else 0.0,
        share_rel_error_above={
            f"{int(t * 100)}pct": measured(
                float((relative > t).sum() / n_positive) if n_positive else None,
                NO_POSITIVE_CELLS,
            )
            for t in RELATIVE_ERROR_THRESHOLDS
        },
        false_positive_cells=int(false_positive),
        distance_geounits=int(distances["distance_geounits"]),
        tv_mean=measured(distances["tv_mean"], NO_DISTRIBUTION),
        hellinger_mean=measured(distances["hellinger_mean"], NO_DISTRIBUTION),
    )


def _over(n: int, reason: str, figure: Callable[[], Any]) -> Value:
    """``figure()``, a figure over ``n`` cells, or not measured for ``reason`` when there are
    none (``figure`` is not called then: it would divide by 0)."""
    return measured(float(figure()) if n else None, reason)


def _error_by_true_count(
    n_zero: int,
    abs_error: np.ndarray,
    nonempty_error: np.ndarray,
    positive_truth: np.ndarray,
) -> dict[str, Value]:
    """The mean absolute error over the cells of each class of true count
    (:data:`CELL_SIZE_CLASSES`): ``abs_error`` of every cell with an error, ``nonempty_error``
    and ``positive_truth`` of the cells whose true count is positive, ``n_zero`` cells whose true
    count is 0 (they hold the error not on a positive cell)."""
    out: dict[str, Value] = {}
    for low, high in CELL_SIZE_CLASSES:
        label = "0" if high == 0 else size_class_label(low, high)
        if low == 0:
            zero_error = abs_error.sum() - np.abs(nonempty_error).sum()
            out[label] = measured(float(zero_error / n_zero) if n_zero else None, NO_CELLS_OF_SIZE)
            continue
        inside = positive_truth >= low
        if high is not None:
            inside &= positive_truth <= high
        mae = float(np.abs(nonempty_error[inside]).mean()) if inside.any() else None
        out[label] = measured(mae, NO_CELLS_OF_SIZE)
    return out


def _distances(released: sp.csr_matrix, truth: sp.csr_matrix) -> dict[str, Any]:
    """Mean total variation and Hellinger distance between each geounit's true and published
    distribution over the table's cells (a negative published count, and a withheld one, read
    as 0), over the geounits with a positive true or published total: one published empty where
    persons live (or the reverse) is at distance 1, the most there is; none for a table of one
    cell, which has no distribution to compare."""
    published = released.maximum(0).tocsr()
    true_total = np.asarray(truth.sum(axis=1)).ravel()
    published_total = np.asarray(published.sum(axis=1)).ravel()
    compared = (true_total > 0) | (published_total > 0)
    one_empty = (true_total > 0) != (published_total > 0)
    n = int(compared.sum()) if released.shape[1] > 1 else 0
    if not n:
        return {"distance_geounits": n, "tv_mean": None, "hellinger_mean": None}

    def shares(counts: sp.csr_matrix, totals: np.ndarray) -> sp.csr_matrix:
        inverse = np.divide(1.0, totals, out=np.zeros(len(totals)), where=totals > 0)
        return (sp.diags(inverse) @ counts).tocsr()

    p, q = shares(truth, true_total), shares(published, published_total)
    tv = np.where(one_empty, 1.0, 0.5 * np.asarray(abs(p - q).sum(axis=1)).ravel())
    root_gap = p.sqrt() - q.sqrt()
    gap = np.sqrt(0.5 * np.asarray(root_gap.multiply(root_gap).sum(axis=1)).ravel())
    hellinger = np.where(one_empty, 1.0, gap)
    return {
        "distance_geounits": n,
        "tv_mean": float(tv[compared].mean()),
        "hellinger_mean": float(hellinger[compared].mean()),
    }


def _additivity(published: PublishedTable, geography: Geography) -> dict[str, float | None]:
    """Share of parent cells that differ from the sum of their children's cells, per level.

    Only cells published (non-zero or suppressed) at the parent or at one of its children are
    counted, and of those only where the parent and all its children are shown (a suppressed
    cell is not a violation); None when there is no such cell.
    """
    out: dict[str, float | None] = {}
    levels = published.levels
    for parent, child in zip(levels[:-1], levels[1:], strict=True):
        step = geography.containment(parent, child)
        child_hidden = published.suppressed(child).astype(np.int64)
        child_rows = (published.matrix(child) != 0).astype(np.int64) + child_hidden
        parent_rows = (published.matrix(parent) != 0) + published.suppressed(parent)
        present = ((step @ child_rows) != 0) + parent_rows
        hidden = ((step @ child_hidden) != 0) + published.suppressed(parent)
        compared = present.astype(np.int8) - present.multiply(hidden).astype(np.int8)
        compared.eliminate_zeros()
        rows, cols = compared.nonzero()
        difference = published.matrix(parent).astype(np.float64) - step @ published.matrix(
            child
        ).astype(np.float64)
        differs = _values(difference.tocsr(), rows, cols) != 0
        out[parent] = float(differs.mean()) if len(rows) else None
    return out


def _values(matrix: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The entries of a sparse matrix at (rows, cols), as a flat array."""
    if not len(rows):
        return np.zeros(0, dtype=matrix.dtype)
    return np.asarray(matrix[rows, cols]).ravel()


TOTAL_SIZE_CLASSES = ((0, 0), *BLOCK_SIZE_CLASSES)
"""Classes of a geounit's true total for the detailed summary metrics."""


def geounit_totals(release: Release, truth: Population) -> dict[str, dict[str, dict[str, Value]]]:
    """The Census Bureau's detailed summary metrics of geounit totals (P1), per level, over every
    geounit whose total is shown and by class of its true total: geounits, MAE, RMSE, bias (mean
    signed error), and over geounits with a positive true total MAPE and MALPE (mean absolute and
    mean algebraic percentage error) and the shares off by more than 5% and 10%. Empty when the
    release publishes no total of persons (:func:`total_table`)."""
    name = total_table(release)
    if name is None:
        return {}
    exact = tabulate(truth, [name])[name]
    published = release.table(name)
    out: dict[str, dict[str, dict[str, Value]]] = {}
    for level in published.levels:
        shown = published.suppressed(level).toarray()[:, 0] == 0
        true = exact.counts[level][1].toarray()[:, 0].astype(np.float64)[shown]
        error = published.matrix(level).toarray()[:, 0].astype(np.float64)[shown] - true
        classes = {"all": np.ones(len(true), dtype=bool)}
        for low, high in TOTAL_SIZE_CLASSES:
            label = "0" if high == 0 else size_class_label(low, high)
            classes[label] = (true >= low) & (true <= (np.inf if high is None else high))
        out[level] = {label: _total_errors(true[m], error[m]) for label, m in classes.items()}
    return out


def total_table(release: Release) -> str | None:
    """The release's table of the total of persons (the US P1): the first of its census's
    person tables with one cell that crosses no attribute, if the release publishes it."""
    total = release.census.total_table
    return total.name if total is not None and total.name in release.tables else None


def _total_errors(true: np.ndarray, error: np.ndarray) -> dict[str, Value]:
    """The errors of the geounits' totals (``true``, ``error``: one per geounit), each not
    measured where there is no geounit (or, for a relative one, none with a positive total)."""
    n = len(true)
    positive = true > 0
    relative = error[positive] / true[positive]
    some = bool(positive.any())
    figures = {
        "geounits": n,
        "mae": float(np.abs(error).mean()) if n else None,
        "rmse": float(np.sqrt((error**2).mean())) if n else None,
        "bias": float(error.mean()) if n else None,
        "mape": float(100 * np.abs(relative).mean()) if some else None,
        "malpe": float(100 * relative.mean()) if some else None,
        "share_off_5pct": float((np.abs(relative) > 0.05).mean()) if some else None,
        "share_off_10pct": float((np.abs(relative) > 0.10).mean()) if some else None,
    }
    return {
        k: measured(v, NO_POSITIVE_TOTAL if k in RELATIVE_TOTAL_METRICS else NO_GEOUNITS)
        for k, v in figures.items()
    }


TRACT_INDICATORS: dict[str, tuple[str, dict[str, np.ndarray], dict[str, np.ndarray], float]] = {
    "sex_ratio": (
        "males per 100 females",
        {"sex": schema.SEX.codes == 1},
        {"sex": schema.SEX.codes == 2},
        100.0,
    ),
    "share_65_plus": (
        "share of persons aged 65 and over",
        {"age": schema.AGE.codes >= 65},
        {},
        1.0,
    ),
    "share_under_18": ("share of persons under 18", {"age": schema.AGE.codes < 18}, {}, 1.0),
}
"""Key indicators of a tract, each ``scale`` × numerator / denominator of persons matching the
masks (an empty mask: every person), as a user computes them from the published P12."""


def tract_indicators(release: Release, truth: Population) -> dict[str, dict[str, Value]]:
    """Error of the key indicators per tract computed from the published P12 (sex by age)
    against the truth: over the tracts whose true denominator is positive, the mean absolute
    error and the bias; a tract whose published denominator is not positive, or that has a
    suppressed cell, has no published indicator and is counted apart. Empty when the release
    publishes no P12 at tract level."""
    if release.census.name != "us2010":
        return {}  # indicators of the US census's P12 at tract level
    if "P12" not in release.tables or "tract" not in release.table("P12").levels:
        return {}
    table = CATALOG["P12"]
    published = release.table("P12")
    shown = np.asarray(published.suppressed("tract").sum(axis=1)).ravel() == 0
    released = published.matrix("tract").astype(np.float64)
    true = tabulate(truth, ["P12"])["P12"].counts["tract"][1].astype(np.float64)
    out = {}
    for name, (_, numerator, denominator, scale) in TRACT_INDICATORS.items():
        up, down = _cell_weights(table, numerator), _cell_weights(table, denominator)
        true_down = true @ down
        counted = true_down > 0
        published_down = released @ down
        defined = counted & shown & (published_down > 0)
        value = np.divide(released @ up, published_down, out=np.zeros(len(counted)), where=defined)
        truth_value = np.divide(true @ up, true_down, out=np.zeros(len(counted)), where=counted)
        error = scale * (value - truth_value)[defined]
        some = bool(defined.any())
        out[name] = {
            "tracts": int(counted.sum()),
            "undefined_tracts": int((counted & ~defined).sum()),
            "mae": measured(float(np.abs(error).mean()) if some else None, NO_INDICATOR),
            "bias": measured(float(error.mean()) if some else None, NO_INDICATOR),
        }
    return out


def _cell_weights(table: TableDef, universe: dict[str, np.ndarray]) -> np.ndarray:
    """The 0/1 weights of the table's cells whose sum counts the persons of ``universe``
    (ValueError if the table's cells do not determine that count)."""
    wanted = part_query(table.schema, Part((), universe)).toarray().ravel()
    query = table.query.toarray()
    inside = (query * (1 - wanted)[None, :]).sum(axis=1) == 0
    weights = inside.astype(np.float64)
    if not np.array_equal(weights @ query, wanted):
        raise ValueError(f"table {table.name}'s cells do not add up to the persons asked for")
    return weights


def summarise_accuracy(
    accuracy: Mapping[str, Mapping[str, TableAccuracy]],
) -> dict[str, LevelAccuracy]:
    """Mean absolute error per level, averaged over the tables published at that level (those
    with a cell there)."""
    by_level: dict[str, list[float]] = {}
    for levels in accuracy.values():
        for level, table in levels.items():
            if not isinstance(table.mae, NotMeasured):
                by_level.setdefault(level, []).append(table.mae)
    return {level: LevelAccuracy(level, float(np.mean(v)), len(v)) for level, v in by_level.items()}


def census_agreement(reconstructed: pl.DataFrame, records: CensusRecords) -> Agreement:
    """One-to-one agreement of reconstructed with true records, by geounit-size class, as
    :func:`agreement` gives it for the US census: matched within each geounit first on every
    attribute, then the leftovers on the categories of the resolved ones (its ``agree_agebin``
    counts both passes: equal to ``agree_exact_age`` when no attribute is resolved)."""
    census = records.census
    attributes = list(census.reconstruction.attributes)
    category = {
        a: np.argmax(census.attribute(a).breakdown(b).membership, axis=0)
        for a, b in census.reconstruction.resolved.items()
    }
    codes = {a: list(census.attribute(a).codes) for a in category}

    def coarse(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(
            pl.col(a).replace_strict(codes[a], category[a].tolist(), default=None) for a in category
        )

    key = [GEOUNIT, *attributes]
    true = truth_frame(records).select(key)
    recon = reconstructed.select(key)
    exact = _count_matches(recon, true, key)
    # the greedy second pass matches, per category key, min(reconstructed, true) in all
    binned = _count_matches(coarse(recon), coarse(true), key) if category else exact
    per_unit = (
        true.group_by(GEOUNIT)
        .len("persons")
        .join(exact.group_by(GEOUNIT).agg(exact_matches=pl.col("_m").sum()), on=GEOUNIT, how="left")
        .join(binned.group_by(GEOUNIT).agg(_binned=pl.col("_m").sum()), on=GEOUNIT, how="left")
        .fill_null(0)
        .with_columns(
            agebin_matches=pl.max_horizontal(pl.col("_binned") - pl.col("exact_matches"), 0),
            size_class=size_class_of(pl.col("persons")),
        )
    )
    return agreement_by_size(per_unit, recon.height)


def _count_matches(recon: pl.DataFrame, true: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """Per key: the most records a one-to-one matching pairs (null keys never match)."""
    r = recon.drop_nulls(key).group_by(key).len("r")
    t = true.drop_nulls(key).group_by(key).len("t")
    return r.join(t, on=key, how="inner").with_columns(_m=pl.min_horizontal("r", "t"))
