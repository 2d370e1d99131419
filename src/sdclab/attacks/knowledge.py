"""What an attacker may conclude about the true count behind every published cell.

The noise-aware reconstruction (docs/reconstruction.md) reads a release and nothing else: its
tables, the parameters it records and what its mechanism publishes about its noise. From them
each mechanism's model (its ``cell_model`` role, :mod:`sdclab.core.cell_model`) gives,
for every published cell, the range its true count must lie in (``low``..``high``: what the
mechanism could have turned into the published value) and the cost
per unit of the distance between the true count and the published one (``weight``: the negative
log-likelihood slope of the noise, 0 where every count in the range is as plausible):

* exact tables (none) and swapped microdata tabulated exactly (swapping, PSA): the published
  count is the count of the (swapped) records, ``low = high``;
* the cell key method: the counts the p-table (and the threshold) can turn into the published
  one — a published positive cell is a true positive one, a zero may hide 1..D (1..9 under the
  ONS 10/5 table); distance weight 1 (the p-table's mass is largest at no change);
* suppression: a shown positive count is exact, a shown 0 is 0..``small_cells`` (exactly 0 in
  an 18+ table whose group rule is stricter than the small-cell rule, and at a geounit whose P1
  is published as 0 when the size rule is stricter than the small-cell rule: a geounit of
  1..``small_cells`` persons would have had its tables withheld); a withheld cell is free, but
  without complementary suppression only the size rule withholds P1, so a geounit whose P1 is
  withheld has 1..``min_persons`` − 1 persons and no cell above that;
* geometric noise: any count ≥ 0, weight 1/scale of its table and level (the log-likelihood of
  the two-sided geometric; where negatives were set to 0, the censored likelihood of a 0 has the
  same slope);
* TopDown's tables: any count ≥ 0 (post-processing can move any cell), weight 1; and, where
  the release carries them, TopDown's noisy measurements at block and tract level
  (:func:`measurement_bounds`).

A suppressed (null) cell is NaN in ``published`` and yields no bound (low 0, high ∞, weight 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from sdclab.censuses.us2010 import schema
from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.cell_model import CellBounds, bounds
from sdclab.core.errors import InputError
from sdclab.release import Release

if TYPE_CHECKING:
    from sdclab.core.census.model import Census


def cell_bounds(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """The attacker's bounds on the true counts behind ``published``: geounits of ``level`` ×
    the cells of the tables ``names`` side by side (NaN where withheld)."""
    published = np.asarray(published, dtype=np.float64)
    from sdclab import protection  # the registry (its mechanisms read releases)

    entry = protection.MECHANISMS.get(release.mechanism)
    model = None if entry is None else entry.cell_model
    if model is None:
        modelled = sorted(n for n, m in protection.MECHANISMS.items() if m.cell_model)
        raise InputError(
            f"release ({release.mechanism}): the noise-aware attack has no model of this "
            f"mechanism's noise (it models {', '.join(modelled)})"
        )
    return model(release, names, level, published)


# ---------------------------------------------------------------------------------------------
# TopDown's noisy measurements
# ---------------------------------------------------------------------------------------------

MEASURED = ":"
"""Separates product and query in the name of a measured query (``dhc:detailed``)."""


def measured_name(product: str, query: str) -> str:
    return f"{product}{MEASURED}{query}"


WORKLOAD = "|"
"""Separates a declared census's name and the tables of a TopDown workload in the name of its
product (``toyland|T2,T3``): the workload decides the product's histogram."""


def declared_product_name(census: Census, workload: Sequence[str] | None) -> str:
    """The name of a declared census's TopDown product measuring ``workload`` (None: every
    table)."""
    return census.name if workload is None else f"{census.name}{WORKLOAD}{','.join(workload)}"


def is_measured(name: str) -> bool:
    """Whether ``name`` is a measured TopDown query rather than a catalogue table."""
    return MEASURED in name


@dataclass(frozen=True)
class MeasuredQuery:
    """A TopDown query projected onto the person domain.

    TopDown's histogram has the type of living quarters, which a person record of the
    reconstruction lacks. The query cells that differ only by it are summed into one *group*:
    the connected components of query cells that share a person cell, so that each group counts
    exactly the persons of a set of person cells, whatever their quarters. A group's noisy
    answer is the sum of its cells' (their exact variances add); a group measured in some of
    its cells only — TopDown measures a cell only where the parent's output is positive —
    bounds its count from below (the unmeasured cells hold any number).
    """

    query: sp.csr_matrix
    """Groups × person cells (0/1, a partition of the person domain)."""
    group_of_cell: IntArray
    """The group of every query cell."""
    cells_per_group: IntArray


def measured_query(name: str, census: Census | None = None) -> MeasuredQuery:
    """The projection of the measured query ``product:query`` onto the reconstruction's domain
    of ``census`` (default: the US 2010 census, whose products are named ``dhc`` and ``pl94``;
    a declared census's product is named after the census)."""
    from sdclab.censuses import is_us2010

    if census is None or is_us2010(census):
        return _us_measured_query(name)
    return _declared_measured_query(name, census)


@cache
def _us_measured_query(name: str) -> MeasuredQuery:
    from sdclab.protection.topdown_strategy import PRODUCTS

    product_name, query_name = name.split(MEASURED)
    product = PRODUCTS[product_name]
    query = product.query_matrix(query_name).tocsc()
    persons = schema.PERSON.decode(np.arange(schema.PERSON.size))
    persons["votingage"] = (persons["age"] >= schema.VOTING_AGE).astype(np.int64)
    touched = sp.csr_matrix((query.shape[0], schema.PERSON.size))
    for unit_type in schema.UNIT_TYPE.codes:
        quarters = np.full(schema.PERSON.size, unit_type)
        touched = touched + query[:, product.schema.cell_index({**persons, "unit_type": quarters})]
    return _grouped(name, touched)


@lru_cache(maxsize=32)
def _declared_measured_query(name: str, census: Census) -> MeasuredQuery:
    """A declared census's measured query: each product cell counts in the reconstruction cell
    of its attributes (the reconstruction's attributes are among the product's, see
    :func:`measured_queries`)."""
    from sdclab.protection.topdown import declared_product

    product_name, query_name = name.split(MEASURED)
    workload = product_name.split(WORKLOAD)[1].split(",") if WORKLOAD in product_name else None
    product = declared_product(census, None if workload is None else tuple(workload))
    query = product.query_matrix(query_name).tocsc()
    domain = census.reconstruction_domain
    cells = product.schema.decode(np.arange(product.schema.size))
    target = domain.cell_index({a: cells[a] for a in domain.names})
    projection = sp.csr_matrix(
        (np.ones(product.schema.size), (np.arange(product.schema.size), target)),
        shape=(product.schema.size, domain.size),
    )
    return _grouped(name, (query @ projection).tocsr())


def _grouped(name: str, touched: sp.csr_matrix) -> MeasuredQuery:
    """Query cells × person cells ``touched`` as groups: the connected components of query cells
    that share a person cell."""
    n_cells, n_persons = touched.shape
    graph = sp.bmat([[None, touched], [touched.T, None]], format="csr")
    _, label = connected_components(graph, directed=False)
    groups, group_of_person = np.unique(label[n_cells:], return_inverse=True)
    group_of_cell = np.searchsorted(groups, label[:n_cells])
    if not np.array_equal(groups[group_of_cell], label[:n_cells]):
        raise AssertionError(f"a cell of {name} counts no person")
    matrix = sp.csr_matrix(
        (np.ones(n_persons), (group_of_person, np.arange(n_persons))),
        shape=(len(groups), n_persons),
    )
    return MeasuredQuery(matrix, group_of_cell, np.bincount(group_of_cell, minlength=len(groups)))


def exact_variance(sigma2: pl.Series) -> FloatArray:
    """The exact variance of N_Z(0, σ²) for every stated σ² (below σ² when σ is small)."""
    from sdclab.core.accounting import discrete_gaussian_variance

    distinct, index = np.unique(sigma2.to_numpy(), return_inverse=True)
    return np.array([discrete_gaussian_variance(float(v)) for v in distinct])[index]


def measured_queries(release: Release, level: str) -> tuple[str, ...]:
    """The measured queries the release publishes at ``level`` (none without measurements, nor
    for a declared census whose reconstruction solves for an attribute outside TopDown's
    histogram: no measured cell then counts the persons of a set of reconstruction cells)."""
    from sdclab.censuses import is_us2010
    from sdclab.protection.topdown import MEASUREMENTS_ARTIFACT, declared_product

    frame = release.artifacts.get(MEASUREMENTS_ARTIFACT)
    if frame is None or frame.height == 0:  # only TopDown declares this artifact
        return ()
    census = release.census
    if release.origin is not None:  # measured over the mechanism's census, not an attack target's
        return ()
    if is_us2010(census):
        product = release.parameters.get("product", "dhc")
    else:
        workload = release.parameters.get("tables")
        product = declared_product_name(census, workload)
        solved = census.reconstruction_domain.names
        measured = declared_product(census, None if workload is None else tuple(workload))
        if not set(solved) <= set(measured.schema.names):
            return ()
    asked = frame.filter(pl.col("level") == level)["query"].unique().sort().to_list()
    return tuple(measured_name(product, q) for q in asked)


def measurement_bounds(
    release: Release, names: Sequence[str], level: str
) -> tuple[FloatArray, CellBounds]:
    """(the noisy answers, their bounds): geounits of ``level`` × the groups of the measured
    queries ``names`` side by side; NaN where no cell of a group was measured.

    The noise is discrete Gaussian; its likelihood is quadratic, which an integer program over
    HiGHS cannot hold, so the distance is weighted L1 at 1/σ of the group (a Laplace stand-in
    with the same scale), one-sided for a group measured in part.
    """
    from sdclab.protection.topdown import MEASUREMENTS_ARTIFACT

    frame = release.artifacts[MEASUREMENTS_ARTIFACT].filter(pl.col("level") == level)
    geography = release.geography
    n_units = geography.n_units(level)
    codes = geography.codes(level)
    parts = []
    for name in names:
        projected = measured_query(name, release.census)
        rows = frame.filter(pl.col("query") == name.split(MEASURED)[1])
        unit = np.searchsorted(codes, geography.parse_geoids(rows["geoid"], level))
        group = projected.group_of_cell[rows["cell"].to_numpy()]
        sums = np.zeros((3, n_units, len(projected.cells_per_group)))  # noisy, variance, cells
        columns = (rows["noisy"].to_numpy(), exact_variance(rows["variance"]), np.ones(rows.height))
        for i, column in enumerate(columns):
            np.add.at(sums[i], (unit, group), column)
        parts.append((sums, projected.cells_per_group))
    value, variance, measured = np.concatenate(
        [np.zeros((3, n_units, 0))] + [p[0] for p in parts], axis=2
    )
    complete: BoolArray = measured == np.concatenate([np.zeros(0)] + [p[1] for p in parts])
    published = np.where(measured > 0, value, np.nan)
    weight = np.where(measured > 0, 1.0 / np.sqrt(np.maximum(variance, 1e-12)), 0.0)
    measured_bounds = bounds(
        published,
        np.zeros_like(published),
        np.full_like(published, np.inf),
        weight,
        np.where(complete, weight, 0.0),
    )
    return published, measured_bounds
