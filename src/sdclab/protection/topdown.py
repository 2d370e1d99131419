"""The TopDown Algorithm (docs/topdown.md) for the `pl94` and `dhc` products: the mechanism.

1. Measure: every geounit's histogram answers the strategy's queries with exact discrete Gaussian
   noise, σ² = 1/ρ_{q,L} (bounded neighbours).
2. Post-process top-down: the root (the nation) is solved alone under its invariant total; then,
   level by level, each parent's children are solved jointly so that they are non-negative
   integers summing exactly to the parent and satisfying the invariants and constraints. Both
   steps are the engine, :mod:`sdclab.protection.topdown_engine`.
3. Output (this module): the block histograms as microdata (the MDF), every catalogue table that
   can be tabulated from the product's attributes, and the noisy measurements, with the checks of
   each in a release read from files.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab.censuses import is_us2010
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import LEVELS, FipsGeography, geoid_strings
from sdclab.censuses.us2010.population import Population
from sdclab.core import accounting, cell_model
from sdclab.core.arrays import IntArray
from sdclab.core.domain import Schema
from sdclab.core.errors import InputError
from sdclab.core.execution import Executor
from sdclab.core.geography import Geography
from sdclab.core.noise import SIGMA2_RANGE
from sdclab.core.query_noise import MEASUREMENT_CAVEAT, TABLE_CAVEAT, Answering, GaussianNoise
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import up_the_levels
from sdclab.protection import audit_plans
from sdclab.protection.base import (
    Mechanism,
    NoisePublication,
    Unit,
    WorkloadParameters,
)
from sdclab.protection.budgets import check_budget_range, decimal_text
from sdclab.protection.checks import exact_tables, gaussian_reach
from sdclab.protection.topdown_engine import block_query_rows, measure_blocks, topdown
from sdclab.protection.topdown_strategy import (
    PRODUCTS,
    Product,
    Strategy,
    census_product,
    load_strategy,
    parse_strategy,
    strategy_data,
    topdown_card,
)
from sdclab.release import MDF_ARTIFACT, Release, frame_problem, geoid_problem

if TYPE_CHECKING:
    from sdclab.core.census.model import Census


class TopDownParameters(WorkloadParameters):
    """``product`` (dhc or pl94), an optional total ``rho`` and ``strategy`` file."""

    product: Literal["dhc", "pl94"] = "dhc"
    """dhc: the person histogram with sex and single-year age (default ρ 15.3); pl94: the
    redistricting histogram with voting age (production strategy, ρ ≈ 2.556)"""
    rho: Annotated[Decimal | None, Unit("zCDP rho")] = Field(None, gt=0, allow_inf_nan=False)
    """total budget, keeping the strategy's level and query shares (default: the strategy file's ρ,
    else the product's)"""
    strategy: Path | dict[str, Any] | None = None
    """a TOML strategy file of level and query shares (default: the product's strategy; in a
    release: its content, as a table)"""
    measurements: bool = True
    """true: publish the noisy measurements file; false: leave it out"""
    workers: Annotated[int | None, Unit("processes")] = Field(None, ge=1)
    """worker processes (local: default all cores; dask-local: the cluster's)"""
    executor: str | None = None
    """local (default), dask://HOST:PORT or dask-local[:N]"""
    checkpoint: Path | None = None
    """directory keeping each level's finished parents (a re-run resumes)"""
    delta: Annotated[float, Unit("delta (approximate DP)")] = Field(1e-10, gt=0, lt=1)
    """δ at which (ε, δ) is also reported"""

    EXECUTION: ClassVar[frozenset[str]] = frozenset({"workers", "executor", "checkpoint"})
    US_SETTINGS: ClassVar[frozenset[str]] = frozenset({"product"})
    FILE_SETTINGS: ClassVar[dict[str, tuple[str, ...]]] = {"strategy": ()}

    def resolve(self) -> tuple[Product, Strategy]:
        product = self.product_of()
        rho = Fraction(self.rho) if self.rho is not None else None
        if isinstance(self.strategy, dict):
            return product, parse_strategy(self.strategy, product, rho, "parameter strategy")
        if self.strategy is not None:
            return product, load_strategy(self.strategy, product, rho)
        return product, product.default if rho is None else product.default.with_rho(rho)

    def product_of(self) -> Product:
        """The product measured: ``product`` for the US census, a declared census's own (its
        workload's tables measured)."""
        if is_us2010(self.census):
            return PRODUCTS[self.product]
        workload = None if self.tables is None else tuple(self.workload_names())
        return declared_product(self.census, workload)

    def published(self) -> tuple[list[str], dict[str, str]]:
        """The tables a release publishes, and why it publishes none of the others (the product
        does not determine them, or the workload leaves them out)."""
        product = self.product_of()
        if product.census is not None:
            return declared_tables(product)
        tables, omitted = product_tables(product)
        names = list(tables)
        if self.tables is not None:
            chosen = set(self.workload_names())
            omitted |= {n: "not in the workload" for n in names if n not in chosen}
            names = [n for n in names if n in chosen]
        return names, omitted

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if self.strategy is not None:
            data["strategy"] = strategy_data(self.resolve()[1])
        return data

    @model_validator(mode="after")
    def _within_sampler_range(self) -> TopDownParameters:
        if self.tables is not None:
            names, omitted = self.published()
            lost = [n for n in self.workload_names() if n not in names]
            if lost:
                raise ValueError(f"tables: TopDown does not publish {lost[0]} ({omitted[lost[0]]})")
        _, strategy = self.resolve()
        variances = [
            strategy.sigma2(q, lv) for lv in strategy.levels for q in strategy.measured(lv)
        ]
        rho = self.rho if self.rho is not None else strategy.rho
        check_budget_range("rho", rho, variances, SIGMA2_RANGE, "variance")
        return self


@lru_cache(maxsize=8)
def declared_product(census: Census, workload: tuple[str, ...] | None = None) -> Product:
    """A declared census's TopDown product (:func:`census_product`), built once per census and
    workload."""
    return census_product(census, workload)


MECHANISM = Mechanism(
    "topdown",
    "the 2020 census TopDown Algorithm (zCDP measurements, consistent integer tables)",
    TopDownParameters,
    example={"product": "pl94"},
    any_census=True,
)
MECHANISM.define("cell_model")(cell_model.post_processed)


@MECHANISM.define("rescale")
def rescale(p: TopDownParameters, factor: Fraction) -> dict[str, str]:
    """The strategy's total ρ times ``factor`` (its shares kept)."""
    _, strategy = p.resolve()
    return {"rho": decimal_text(strategy.rho * factor)}


@MECHANISM.define("guarantee")
def card(p: TopDownParameters) -> accounting.SpecCard:
    product, strategy = p.resolve()
    return topdown_card(product, strategy, p.delta)


# ---------------------------------------------------------------------------------------------
# Output: the MDF, the tables the product's attributes determine, the release
# ---------------------------------------------------------------------------------------------


def mdf(product: Product, blocks: sp.csr_matrix, geography: Geography) -> pl.DataFrame:
    """The Microdata Detail File: k identical person records for a block cell of count k."""
    matrix = blocks.tocsr()
    matrix.eliminate_zeros()
    counts = matrix.data.astype(np.int64)
    block_of_cell = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    cells = np.repeat(matrix.indices.astype(np.int64), counts)
    block = np.repeat(block_of_cell, counts)
    attributes = product.schema.decode(cells)
    columns: dict[str, Any] = {
        "person_id": np.arange(len(cells), dtype=np.int64),
        "block": geography.geoid_strings(geography.blocks[block], geography.levels[-1]),
    }
    for attr in product.schema.attributes:
        if product.census is not None:  # a declared census's codes, as text
            text = np.asarray(product.census.attribute(attr.name).codes, dtype=object)
            columns[attr.name] = pl.Series(text[attributes[attr.name] - attr.low], dtype=pl.String)
            continue
        columns[attr.name] = pl.Series(attributes[attr.name]).cast(
            pl.Int16 if attr.name == "age" else pl.Int8
        )
    return pl.DataFrame(columns)


def _facts(columns: dict[str, IntArray]) -> dict[str, IntArray]:
    """Derived attributes any product or table schema may need."""
    out = dict(columns)
    if "age" in out and "votingage" not in out:
        out["votingage"] = (out["age"] >= schema.VOTING_AGE).astype(np.int64)
    return out


def _represent(target: Schema, facts: dict[str, IntArray]) -> IntArray:
    """A cell of ``target`` consistent with ``facts``, filling what the facts lack by a fixed choice
    (sex male, age 0 or 18 by voting age, relationship householder or group-quarters resident)."""
    n = len(next(iter(facts.values())))
    values = {}
    for attr in target.attributes:
        if attr.name in facts:
            values[attr.name] = facts[attr.name]
        elif attr.name == "age":
            values["age"] = np.where(facts["votingage"] == 1, schema.VOTING_AGE, 0)
        elif attr.name == "relationship":
            values["relationship"] = np.where(facts["unit_type"] > 0, schema.GQ_RESIDENT, 0)
        else:
            values[attr.name] = np.full(n, attr.codes[0])
    return target.cell_index(values)


def _possible(target: Schema, facts: dict[str, IntArray]) -> npt.NDArray[np.bool_]:
    """Cells of a table schema that a person can occupy (group-quarters residents live in GQs)."""
    if "relationship" in facts and "unit_type" in facts:
        return (facts["relationship"] == schema.GQ_RESIDENT) == (facts["unit_type"] > 0)
    return np.ones(len(facts[target.names[0]]), bool)


def product_tables(product: Product) -> tuple[dict[str, sp.csr_matrix], dict[str, str]]:
    """The catalogue tables the product determines, as (table cells × product cells) matrices.

    A table can be tabulated when its query gives the same answer for every person the product
    cannot tell apart (e.g. a PL94 record knows voting age, not single age or sex): its query then
    factors through the product's attributes. Returns the matrices and, for the others, why not.
    """
    from sdclab.censuses.us2010.catalog import CATALOG

    own = _facts(product.schema.decode(np.arange(product.schema.size)))
    known = set(own)
    tables: dict[str, sp.csr_matrix] = {}
    omitted: dict[str, str] = {}
    for name, table in CATALOG.items():
        target = table.schema
        facts = _facts(target.decode(np.arange(target.size)))
        lacking = [a for a in target.names if a not in known]
        if target is schema.UNIT:
            omitted[name] = "a housing-unit table (TopDown's person products hold persons only)"
            continue
        shared = {k: v for k, v in facts.items() if k in known}
        representative = _represent(target, shared)
        query = table.query.tocsc()
        possible = np.flatnonzero(_possible(target, facts))
        if (query[:, possible] != query[:, representative[possible]]).nnz:
            omitted[name] = f"needs {', '.join(lacking)}, which the {product.name} product lacks"
            continue
        to_target = _represent(target, own)
        tables[name] = query[:, to_target].tocsr()
    return tables, omitted


def tabulate_run(
    product: Product, histograms: dict[str, sp.csr_matrix], geography: Geography
) -> dict[str, PublishedTable]:
    """Every table the product determines, at each of its levels."""
    from sdclab.censuses.us2010.catalog import CATALOG
    from sdclab.core.tables.tabulate import TableCounts

    if product.census is not None:
        return census_tables(product, histograms[geography.levels[-1]], geography)
    matrices, _ = product_tables(product)
    geoids = {level: geoid_strings(geography.codes(level), level) for level in LEVELS}
    out = {}
    for name, matrix in matrices.items():
        table = CATALOG[name]
        counts = {
            level: (geography.codes(level), (histograms[level] @ matrix.T).tocsr())
            for level in table.levels
        }
        out[name] = PublishedTable.from_counts(TableCounts(table, counts, geoids))
    return out


def census_tables(
    product: Product, blocks: sp.csr_matrix, geography: Geography
) -> dict[str, PublishedTable]:
    """A declared census's tables that the product's histogram determines, at each of their
    levels, summed up from the bottom level's histograms (TopDown's are consistent)."""
    assert product.census is not None
    geoids = {level: geography.geoids(level) for level in geography.levels}
    out = {}
    for name in declared_tables(product)[0]:
        table = product.census.table(name)
        counts = (blocks @ table.query_on(product.schema).T).tocsr()
        out[name] = PublishedTable.from_counts(up_the_levels(geography, table, counts, geoids))
    return out


def declared_tables(product: Product) -> tuple[list[str], dict[str, str]]:
    """A declared census's tables TopDown publishes, and why it publishes none of the others."""
    census = product.census
    assert census is not None
    main, published, omitted = census.geography, [], {}
    for table in census.tables.values():
        if table.records != "persons":
            omitted[table.name] = "a household table (TopDown's histogram holds persons)"
        elif census.geography_of(table.name) is not main:
            omitted[table.name] = (
                f"published on geography {census.table_geography[table.name]}, not TopDown's "
                f"{main.name}"
            )
        elif product.workload is not None and table.name not in product.workload:
            omitted[table.name] = "not in the workload"
        elif not set(table.crossed) <= set(product.schema.names):
            omitted[table.name] = "crosses an attribute outside TopDown's person histogram"
        else:
            published.append(table.name)
    return published, omitted


@MECHANISM.define("protect")
def protect(population: Population, p: TopDownParameters, rng: np.random.Generator) -> Release:
    """TopDown as a mechanism: population → release with MDF, tables and noisy measurements."""
    product, strategy = p.resolve()
    if population.geography.n_blocks == 0:
        raise InputError(
            "topdown: the population has no housing units or group quarters, so no geography "
            "to measure (TopDown needs at least one block)"
        )
    run = topdown(
        population,
        product,
        strategy,
        rng,
        workers=Executor.parse(p.executor, p.workers),
        keep_measurements=p.measurements,
        checkpoint=p.checkpoint,
    )
    names, omitted = p.published()
    return Release(
        mechanism="topdown",
        parameters=p.recorded(),
        card=topdown_card(product, strategy, p.delta),
        tables={
            n: t
            for n, t in tabulate_run(product, run.histograms, population.geography).items()
            if n in names
        },
        randomness={},
        input_digest=population.digest,
        geography=population.geography,
        artifacts={
            MDF_ARTIFACT: mdf(
                product, run.histograms[population.geography.levels[-1]], population.geography
            ),
            **({} if run.measurements is None else {MEASUREMENTS_ARTIFACT: run.measurements}),
        },
        notes={
            "product": product.name,
            "budget": strategy.table(),
            "tables_not_published": omitted,
            "problems_per_level": run.problems,
        },
    )


MEASUREMENTS_ARTIFACT = "measurements"
MEASUREMENT_COLUMNS = {
    "level": "string",
    "geoid": "string",
    "query": "string",
    "cell": "integer",
    "noisy": "number",
    "variance": "number",
}
"""The columns of the noisy measurements and their kinds."""


@MECHANISM.publishes(
    MDF_ARTIFACT,
    "the Microdata Detail File: one record per person (person_id, block and the "
    "product's attributes), k identical records for a block cell of count k",
)
def check_mdf(frame: pl.DataFrame, geography: Geography) -> str | None:
    """The MDF's columns are person_id, block and one product's attributes (integer codes in
    their ranges), its blocks this release's; a declared census's product's attributes are text
    (their codes are checked with the release's census, :func:`check_release`)."""
    if not isinstance(geography, FipsGeography):
        kinds = {c: "string" for c in frame.columns} | {"person_id": "integer"}
        return (
            f"columns {frame.columns}, expected person_id, block and the product's attributes"
            if frame.columns[:2] != ["person_id", "block"]
            else frame_problem(frame, kinds)
            or geoid_problem(frame, geography, level=geography.levels[-1], column="block")
        )
    expected = {
        name: ["person_id", "block", *product.schema.names] for name, product in PRODUCTS.items()
    }
    if frame.columns not in expected.values():
        shown = "; ".join(f"{', '.join(cols)} ({name})" for name, cols in expected.items())
        return f"columns {frame.columns}, expected those of a product: {shown}"
    columns = {c: "integer" for c in frame.columns} | {"block": "string"}
    problem = frame_problem(frame, columns) or geoid_problem(
        frame, geography, level="block", column="block"
    )
    if problem is not None:
        return problem
    product = next(p for name, p in PRODUCTS.items() if frame.columns == expected[name])
    for attribute in product.schema.attributes:
        outside = frame.filter(~pl.col(attribute.name).is_between(attribute.low, attribute.high))
        if outside.height:
            return (
                f"{attribute.name} {outside[attribute.name][0]} outside its codes "
                f"{attribute.low}..{attribute.high}"
            )
    return None


@MECHANISM.publishes(
    MEASUREMENTS_ARTIFACT,
    "the noisy measurements (unless measurements=false): level, geoid, query, cell, "
    "noisy value and the discrete Gaussian's variance parameter",
)
def check_measurements(frame: pl.DataFrame, geography: Geography) -> str | None:
    """The measurements' columns and kinds; their geounits this release's."""
    return frame_problem(frame, MEASUREMENT_COLUMNS) or geoid_problem(frame, geography)


@MECHANISM.define("check")
def check_release(release: Release, p: TopDownParameters) -> str | None:
    """TopDown's tables are exact tabulations of its MDF (:func:`~.checks.exact_tables`), and
    its noisy measurements are what its recorded strategy draws (:func:`measurements_problem`)."""
    problem = exact_tables(release) or declared_mdf_problem(release, p)
    frame = release.artifacts.get(MEASUREMENTS_ARTIFACT)
    if problem is not None or frame is None or frame.height == 0:
        return problem
    persons = None
    total, top = release.census.total_table, release.geography.levels[0]
    if total is not None and total.name in release.tables and top in total.levels:
        persons = float(release.tables[total.name].dense(top, suppressed=np.nan).sum())
    where = f"artifacts/{MEASUREMENTS_ARTIFACT}.parquet"
    found = measurements_problem(frame, p, persons)
    return None if found is None else f"{where}: {found}"


def declared_mdf_problem(release: Release, p: TopDownParameters) -> str | None:
    """A declared census's MDF holds its product's attributes, each a code of the census."""
    product = p.product_of()
    frame = release.artifacts.get(MDF_ARTIFACT)
    if product.census is None or frame is None:
        return None
    where = f"artifacts/{MDF_ARTIFACT}.parquet"
    expected = ["person_id", "block", *product.schema.names]
    if frame.columns != expected:
        return f"{where}: columns {frame.columns}, expected {expected}"
    for name in product.schema.names:
        codes = product.census.attribute(name).codes
        unknown = frame.filter(~pl.col(name).is_in(codes))
        if unknown.height:
            return f"{where}: {name} {unknown[name][0]!r} is not one of the census's codes"
    return None


def measurements_problem(
    frame: pl.DataFrame, p: TopDownParameters, persons: float | None
) -> str | None:
    """Whether every noisy measurement is one the recorded strategy draws: a query it measures
    at that level, a cell of the query, the variance its ρ gives there, a whole number within
    the noise's reach (:func:`~sdclab.protection.checks.gaussian_reach`) of a count from 0 to
    the nation's ``persons`` (TopDown's invariant total), once per geounit, query and cell."""
    product, strategy = p.resolve()
    measured = pl.DataFrame(
        [
            {
                "level": level,
                "query": query,
                "sigma2": float(strategy.sigma2(query, level)),
                "reach": gaussian_reach(float(strategy.sigma2(query, level))),
                "cells": product.query_matrix(query).shape[0],
            }
            for level in strategy.levels
            for query in strategy.measured(level)
        ],
        schema={
            "level": pl.String,
            "query": pl.String,
            "sigma2": pl.Float64,
            "reach": pl.Float64,
            "cells": pl.Int64,
        },
    )
    rows = frame.join(measured, on=["level", "query"], how="left")
    unknown = rows.filter(pl.col("sigma2").is_null())
    if unknown.height:
        row = unknown.row(0, named=True)
        return f"query {row['query']!r} is not one the recorded strategy measures at {row['level']}"
    checks = (
        (
            (pl.col("cell") < 0) | (pl.col("cell") >= pl.col("cells")),
            lambda r: (
                f"cell {r['cell']} of query {r['query']} is not one of its {r['cells']} cells"
            ),
        ),
        (
            pl.col("variance") != pl.col("sigma2"),
            lambda r: (
                f"variance {r['variance']} of query {r['query']} at {r['level']} is not "
                f"the {r['sigma2']} the recorded rho and strategy give it"
            ),
        ),
        (
            ~pl.col("noisy").cast(pl.Float64).is_finite()
            | (pl.col("noisy").cast(pl.Float64) != pl.col("noisy").cast(pl.Float64).round()),
            lambda r: (
                f"noisy value {r['noisy']} of query {r['query']} at {r['level']} "
                f"{r['geoid']} is not a whole number (a count plus discrete Gaussian noise)"
            ),
        ),
    )
    for bad, message in checks:
        found = rows.filter(bad)
        if found.height:
            return message(found.row(0, named=True))
    noisy = pl.col("noisy").cast(pl.Float64)
    most = np.inf if persons is None else persons
    far = rows.filter((noisy < -pl.col("reach")) | (noisy > pl.col("reach") + most))
    if far.height:
        r = far.row(0, named=True)
        upper = "" if persons is None else f" to the nation's {persons:.0f} persons"
        return (
            f"noisy value {r['noisy']} of query {r['query']} at {r['level']} {r['geoid']} lies "
            f"beyond the noise's reach ({r['reach']:.4g}) of every count from 0{upper}"
        )
    if rows.select(pl.struct("level", "geoid", "query", "cell").is_duplicated().any()).item():
        return "a (level, geoid, query, cell) appears more than once"
    return None


@MECHANISM.define("query_noise")
def query_noise(p: TopDownParameters, query: str | None, level: str) -> GaussianNoise:
    """The noise of a TopDown query (default: the total) at a level, for ``sdclab budget``:
    σ² = 1/(ρ_global · γ_level · α_query,level); or, for a table the product publishes, of one
    of its cells (:func:`topdown_table_noise`)."""
    product, strategy = p.resolve()
    query = query or "total"
    if level not in strategy.level_shares:
        raise InputError(f"level {level!r}: expected one of {', '.join(strategy.level_shares)}")
    if query not in product.query_names:
        return topdown_table_noise(query, level, product, strategy)
    share = strategy.rho_of(query, level) / strategy.rho
    if share == 0:
        raise InputError(
            f"query {query!r} is not measured at {level} level "
            f"(measured there: {', '.join(strategy.measured(level))})"
        )
    return GaussianNoise(
        "topdown", query, level, "rho (zCDP)", MEASUREMENT_CAVEAT, float(1 / Fraction(share))
    )


def topdown_table_noise(
    name: str, level: str, product: Product, strategy: Strategy
) -> GaussianNoise:
    """The noise of one cell of a table the product publishes at ``level``, before
    post-processing: the sum of the noisy measured cells it is made of.

    Of the queries measured at the level that answer every cell of the table (each cell a sum of
    whole query cells), the figure takes the one whose cell summing the most measured cells has
    the least variance, and is for that cell (the table's worst under that query): every other
    cell of the table is a sum of fewer of them."""
    published = _published(product, level)
    table = name.upper() if product.census is None else name
    if table not in published:
        tables, omitted = _product_tables(product)
        what = f"the {product.name} product"
        if table in omitted:
            problem = f"table {table}: {what} does not publish it ({omitted[table]})"
        elif table in tables:
            problem = f"table {table} is not published at {level} level"
        else:
            queries = ", ".join(product.query_names)
            problem = f"query or table {name!r}: not a query of {what} ({queries})"
        raise InputError(f"{problem}; its tables at {level}: {', '.join(published)}")
    answering = [
        answer
        for query in strategy.measured(level)
        if (answer := _answering(product, table, query)) is not None
    ]
    if not answering:
        raise InputError(
            f"table {table} at {level}: no query measured there adds up to its cells "
            f"(measured: {', '.join(strategy.measured(level))})"
        )
    best = min(answering, key=lambda a: (a.most / strategy.rho_of(a.query, level), a.most))
    share = strategy.rho_of(best.query, level) / strategy.rho
    return GaussianNoise(
        "topdown",
        best.query,
        level,
        "rho (zCDP)",
        TABLE_CAVEAT,
        float(1 / Fraction(share)),
        terms=best.most,
        table=table,
        answering=tuple(answering),
    )


def _product_tables(product: Product) -> tuple[dict[str, Any], dict[str, str]]:
    """The tables a TopDown product publishes, as (table cells × product cells) matrices, and
    why it publishes the others not."""
    if product.census is None:
        return _us_product_tables(product.name)
    published, omitted = declared_tables(product)
    census = product.census
    return {n: census.table(n).query_on(product.schema) for n in published}, omitted


@cache
def _us_product_tables(product: str) -> tuple[dict[str, Any], dict[str, str]]:
    return product_tables(PRODUCTS[product])


def _published(product: Product, level: str) -> list[str]:
    """The tables the product publishes at ``level``, in the census's order."""
    from sdclab.censuses.us2010.catalog import CATALOG

    tables = CATALOG if product.census is None else product.census.tables
    return [name for name in _product_tables(product)[0] if level in tables[name].levels]


def _answering(product: Product, table: str, query: str) -> Answering | None:
    """How the product's ``query`` answers the table's cells: each cell the sum of whole query
    cells, or None where one of its cells takes part of a query cell. A query's cells partition
    the histogram, so a table cell is the sum of the query cells it overlaps when it holds
    every histogram cell of each."""
    if product.census is None:
        return _us_answering(product.name, table, query)
    return _answers(_product_tables(product)[0][table], product.query_matrix(query), query)


@cache
def _us_answering(product: str, table: str, query: str) -> Answering | None:
    from sdclab.protection.topdown_strategy import PRODUCTS

    return _answers(
        _us_product_tables(product)[0][table], PRODUCTS[product].query_matrix(query), query
    )


def _answers(cells: Any, query_cells: Any, query: str) -> Answering | None:
    sizes = np.asarray(query_cells.sum(axis=1)).ravel()
    overlap = (cells @ query_cells.T).tocsr()  # histogram cells each table cell shares with each
    if not np.array_equal(overlap.data, sizes[overlap.indices]):
        return None
    summed = np.diff(overlap.indptr)
    if summed.max(initial=0) == 0:
        return None
    return Answering(query, int(summed.min()), int(summed.max()))


@MECHANISM.define("noise")
def published_noise(p: TopDownParameters) -> NoisePublication:
    _, strategy = p.resolve()
    return NoisePublication(
        distribution="discrete Gaussian on every cell of every measured query, independent; "
        "then consistent non-negative integer tables (post-processing)",
        published=(
            "parameters: rho and the strategy fix the variance of every query at every level",
            f"artifact {MEASUREMENTS_ARTIFACT}: every noisy measurement with its variance "
            "(unless measurements=false)",
        ),
        parameters={"rho": float(strategy.total_rho()), "queries": strategy.table()},
    )


@MECHANISM.define("audit_plan")
def audit_plan(settings: Mapping[str, Any], trials: int, seed: int) -> audit_plans.Trials:
    """TopDown's block-level noisy measurements of many blocks, each holding one person; in D′
    the person's record is changed to another cell of the same housing type (bounded)."""
    p = MECHANISM.parse({"product": "pl94"} | dict(settings))
    product, strategy = p.resolve()
    allowed = np.flatnonzero(~product.structural_zeros())
    a, b = int(allowed[0]), int(allowed[1])
    support = np.array([a, b])
    rows = block_query_rows(product, strategy, support)
    trials_d = measure_blocks(product, strategy, seed, rows, np.full(trials, a), 0)
    trials_dp = measure_blocks(product, strategy, seed, rows, np.full(trials, b), trials)
    columns = [product.query_matrix(q)[r][:, [a, b]].toarray() for q, r in rows.items()]
    shift = np.concatenate([c[:, 0] - c[:, 1] for c in columns]).astype(float)
    claimed = sum((strategy.rho_of(q, "block") for q in rows), Fraction(0))
    claim = audit_plans.Claim(
        "zcdp",
        float(claimed),
        "every block-level measurement",
        "bounded (one person record changed)",
    )
    return audit_plans.Trials(claim, trials_d, trials_dp, shift=shift)
