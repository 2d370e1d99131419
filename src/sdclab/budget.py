"""Choosing a budget: the error a budget gives one query or table at one level, and the budget a
target error needs (docs/privacy.md, *Choosing a budget*).

Both directions use the exact noise distributions the specification cards use: the discrete
Gaussian N_Z(0, σ²) of TopDown and SafeTab-H and the discrete Laplace of the geometric
mechanism. The 95% margin of error is the smallest integer E with P(|X| ≤ E) ≥ 95%; the RMSE is
the square root of the exact variance. For TopDown the figure is the error of the *noisy
measurements*, before post-processing: of one measured query, or of a published table's cell as
the sum of the measured cells it is made of; the published tables' error differs (the
optimisation combines every measurement and levels, and rounds).

The cell key method has no budget: :func:`cell_key_noise` gives the noise of one cell under its
p-table instead.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import numpy as np
from scipy import optimize

from sdclab import accounting
from sdclab.errors import InputError
from sdclab.noise import SCALE_RANGE, SIGMA2_RANGE

if TYPE_CHECKING:
    from sdclab.census.model import Census
    from sdclab.protection.topdown_strategy import Product, Strategy

Target = Literal["budget", "moe", "rmse"]
ERROR_INDEX = {"moe": 1, "rmse": 2}
"""Where each target's figure sits in :meth:`QueryNoise.error`'s (spread, margin, RMSE)."""

MEASUREMENT_CAVEAT = (
    "the error of the noisy measurement, before post-processing (the published tables' error "
    "differs)"
)
TABLE_CAVEAT = (
    "the error of the sum of noisy measured cells the table's cell is made of, before "
    "post-processing (the published tables' error differs)"
)
SAFETAB_LEVELS = {
    "regional": "rho_regional",
    "detailed-national": "rho_detailed_national",
    "detailed-local": "rho_detailed_local",
}
"""SafeTab-H's iteration levels and region groups, by the parameter that budgets them."""


@dataclass(frozen=True)
class QueryNoise(ABC):
    """How one query's cells are noised, as a function of the mechanism's budget."""

    mechanism: str
    query: str
    level: str
    unit: str
    """The budget's unit: "rho (zCDP)" or "epsilon (pure DP)"."""
    caveat: str
    factor: float
    """σ² (or the Laplace scale) at a budget of 1: it falls as 1/budget."""

    SPREAD: ClassVar[str]
    SUPPORTED: ClassVar[tuple[Fraction, Fraction]]
    """The spreads the exact sampler draws from, as the mechanisms refuse any other."""

    def budgets(self) -> tuple[float, float]:
        """The lowest and highest budgets whose noise the exact sampler supports."""
        low, high = self.SUPPORTED
        return self.factor / float(high), self.factor / float(low)

    def check(self, budget: float, asked: str) -> None:
        """Refuse a budget (asked for, or found for ``asked``) outside :meth:`budgets`, in words."""
        lowest, highest = self.budgets()
        if not lowest <= budget <= highest:
            low, high = self.SUPPORTED
            raise InputError(
                f"{asked}: needs {self.SPREAD} {self.factor / budget:.6g}, outside the "
                f"{float(low):g}..{float(high):g} the exact sampler supports (the mechanism "
                f"refuses it too); budgets from {lowest:.6g} to {highest:.6g} can be asked"
            )

    @abstractmethod
    def error(self, budget: float) -> tuple[float, int, float]:
        """(the noise's spread, the 95% margin of error, the RMSE) at ``budget``."""

    def check_not_met_below(self, target: str, value: float) -> None:
        """Refuse a target that even the lowest supported budget meets: the smallest budget
        meeting it needs more noise than the exact sampler supports."""
        lowest, _ = self.budgets()
        error = self.error(lowest)[ERROR_INDEX[target]]
        if error <= value:
            raise InputError(
                f"{target} {value:g}: even the lowest budget the exact sampler supports, "
                f"{lowest:.6g}, meets it ({target} {error:.6g}); a smaller one would need "
                f"{self.SPREAD} above {float(self.SUPPORTED[1]):g}, which the mechanism refuses"
            )


@dataclass(frozen=True)
class Answering:
    """A measured query that answers every cell of a published table at a level: each cell is
    the sum of ``fewest`` to ``most`` of the query's cells there."""

    query: str
    fewest: int
    most: int

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "cells_summed": [self.fewest, self.most]}


@dataclass(frozen=True)
class GaussianNoise(QueryNoise):
    """σ² = factor / budget (TopDown: 1/(ρ·share); SafeTab-H: s/(2ρ)) for each measured cell; a
    figure's cell is the sum of ``terms`` of them (a published table's cell), so its noise is the
    sum of ``terms`` independent N_Z(0, σ²)."""

    terms: int = 1
    table: str | None = None
    """The published table whose cell the figure is for (None: the measured query itself)."""
    answering: tuple[Answering, ...] = ()
    """Every query measured at the level that answers the table's cells: ``query`` is the one
    whose cell summing the most measured cells has the least variance."""

    SPREAD = "noise of variance σ²"
    SUPPORTED = SIGMA2_RANGE

    def error(self, budget: float) -> tuple[float, int, float]:
        """(σ² of a measured cell, the 95% margin of error, the RMSE) at ``budget``."""
        sigma2 = self.factor / budget
        rmse = math.sqrt(self.terms * accounting.discrete_gaussian_variance(sigma2))
        return sigma2, accounting.gaussian_margin_of_error(sigma2, terms=self.terms), rmse

    def budget_for(self, target: str, value: float) -> float:
        """The smallest budget whose margin of error (``moe``) or RMSE is at most ``value``."""
        self.check_not_met_below(target, value)  # then σ² stays inside the range
        if target == "moe":
            sigma2 = accounting.gaussian_variance_for_margin(int(value), terms=self.terms)
        else:
            sigma2 = _solve(
                lambda s: self.terms * accounting.discrete_gaussian_variance(s) - value**2
            )
        return _meeting(self, target, value, self.factor / sigma2)


@dataclass(frozen=True)
class LaplaceNoise(QueryNoise):
    """Scale = factor / ε (the table's sensitivity over its share of ε)."""

    SPREAD = "noise of scale"
    SUPPORTED = SCALE_RANGE

    def error(self, budget: float) -> tuple[float, int, float]:
        """(the scale, the 95% margin of error, the RMSE) at ``budget``."""
        scale = self.factor / budget
        q = math.exp(-1 / scale)
        rmse = math.sqrt(2 * q) / -math.expm1(-1 / scale)  # 1 − q without cancellation
        return scale, accounting.laplace_margin_of_error(scale), rmse

    def budget_for(self, target: str, value: float) -> float:
        """The smallest ε whose margin of error (``moe``) or RMSE is at most ``value``.

        Solved for t = −ln q = ε / factor, where q = e^{−1/scale}: the RMSE in closed form,
        the margin's tail in t (both exact to the last digits, where q itself is too near 1)."""
        if target == "moe":  # P(|X| > E) = 2q^{E+1}/(1+q) ≤ 5%, rising with q, falling in t
            m = int(value)

            def log_excess(t: float) -> float:
                return math.log(2 / 0.05) - (m + 1) * t - math.log1p(math.exp(-t))

            t = optimize.brentq(log_excess, 1e-300, 1e3, xtol=1e-300, rtol=1e-15)
        else:  # variance 2q/(1−q)² = v: the root q < 1 is v / (v + 1 + √(2v + 1))
            v = value**2
            t = math.log1p((1 + math.sqrt(2 * v + 1)) / v)
        self.check_not_met_below(target, value)
        return _meeting(self, target, value, self.factor * t)


Noise = GaussianNoise | LaplaceNoise


def _meeting(noise: Noise, target: str, value: float, budget: float) -> float:
    """``budget`` raised by the root finder's last few ulps where they leave the target missed
    (the error at the root itself may land on the wrong side of it)."""
    noise.check(budget, f"{target} {value:g}")
    for _ in range(64):
        if noise.error(budget)[ERROR_INDEX[target]] <= value * (1 + 1e-12):
            return budget
        budget *= 1 + 1e-12
    raise AssertionError(f"no budget near {budget:g} meets {target} {value:g}")


def _solve(excess: Any) -> float:
    """The σ² where ``excess`` (rising in σ²) crosses 0."""
    low, high = 1e-9, 1.0
    while excess(high) < 0:  # the caller has checked that the range's top is enough
        low, high = high, 2 * high
    return float(optimize.brentq(excess, low, high, xtol=1e-13, rtol=1e-13))


P = TypeVar("P")


def _parse(
    mechanism: str, settings: dict[str, Any], kind: type[P], census: Census | None = None
) -> P:
    """The mechanism's parameters from ``settings`` for ``census`` (default: the US 2010
    census), through its own parser (a problem is one InputError in words)."""
    from sdclab import protection
    from sdclab.censuses import is_built_in

    entry = protection.get(mechanism)
    if census is not None and not entry.any_census and not is_built_in(census):
        raise InputError(
            f"mechanism {mechanism}: its budget is for the US 2010 census's tables, not census "
            f"{census.name}'s"
        )
    parameters = entry.parse(settings, census)
    assert isinstance(parameters, kind)
    return parameters


def topdown_noise(
    query: str, level: str, settings: dict[str, Any], census: Census | None = None
) -> GaussianNoise:
    """The noise of a TopDown query at a level: σ² = 1/(ρ_global · γ_level · α_query,level); or,
    for a table the product publishes, of one of its cells (:func:`topdown_table_noise`)."""
    from sdclab.protection.topdown import TopDownParameters

    product, strategy = _parse("topdown", settings, TopDownParameters, census).resolve()
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
    from sdclab.protection.topdown import declared_tables

    published, omitted = declared_tables(product)
    census = product.census
    return {n: census.table(n).query_on(product.schema) for n in published}, omitted


@cache
def _us_product_tables(product: str) -> tuple[dict[str, Any], dict[str, str]]:
    from sdclab.protection.topdown import product_tables
    from sdclab.protection.topdown_strategy import PRODUCTS

    return product_tables(PRODUCTS[product])


def _published(product: Product, level: str) -> list[str]:
    """The tables the product publishes at ``level``, in the census's order."""
    from sdclab.tables.catalog import CATALOG

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


def geometric_noise(
    table: str, level: str, settings: dict[str, Any], census: Census | None = None
) -> LaplaceNoise:
    """The noise of a table at a level (a US table's name in either case): scale = Δ₁ / (ε · its
    share of ε)."""
    from sdclab.protection.geometric import GeometricParameters, allocation, scale_of

    p = _parse("geometric", {**settings, "epsilon": 1}, GeometricParameters, census)
    levels = p.census.geography.levels
    if level not in levels:
        raise InputError(f"level {level!r}: expected one of {', '.join(levels)}")
    shares = allocation(p)
    tables = p.census.tables
    name = table.upper() if table.upper() in tables else table
    if (name, level) not in shares:
        there = ", ".join(t for t, lv in shares if lv == level)
        problem = (
            f"table {name} is not published at {level} level"
            if name in tables
            else f"table {table!r}: not a {_table_kind(p.census)}"
        )
        raise InputError(f"{problem}; the geometric release publishes at {level}: {there}")
    table = name
    scale = scale_of(tables[table], shares[table, level], p.neighbours)
    what = "the error of every published cell"
    if p.nonnegative:
        what += ", before negative counts are set to 0 (which biases small cells upward)"
    return LaplaceNoise("geometric", table, level, "epsilon (pure DP)", what, float(scale))


def _table_kind(census: Census) -> str:
    """ "catalogue table" (the US census's) or "table of census NAME"."""
    from sdclab.censuses import is_built_in

    return "catalogue table" if is_built_in(census) else f"table of census {census.name}"


def safetab_noise(
    level: str, settings: dict[str, Any], census: Census | None = None
) -> GaussianNoise:
    """The noise of SafeTab-H's T03/T04 cells at an iteration level: σ² = s / (2ρ)."""
    from sdclab.protection.safetab_h import SafeTabHParameters

    if level not in SAFETAB_LEVELS:
        raise InputError(f"level {level!r}: SafeTab-H's levels are {', '.join(SAFETAB_LEVELS)}")
    p = _parse("safetab_h", settings, SafeTabHParameters, census)
    return GaussianNoise(
        "safetab_h",
        "T03/T04",
        level,
        f"rho (zCDP) of each of T03 and T04 ({SAFETAB_LEVELS[level]})",
        "the error of a measured cell, before clamping",
        p.stability / 2,
    )


def _geometric(
    query: str | None, level: str, settings: dict[str, Any], census: Census | None
) -> Noise:
    if query is None:
        raise InputError("geometric: give the table (--query P12)")
    return geometric_noise(query, level, settings, census)


NOISES: dict[str, Any] = {
    "topdown": lambda query, level, settings, census: topdown_noise(
        query or "total", level, settings, census
    ),
    "geometric": _geometric,
    "safetab_h": lambda query, level, settings, census: safetab_noise(level, settings, census),
}
"""How each mechanism with a budget to choose noises one query at one level."""


CELL_KEY_ANSWER = (
    "sdclab budget cellkey [--set ptable=...] [--count N] gives the noise distribution of one "
    "cell under its p-table"
)


def noise_of(
    mechanism: str,
    query: str | None,
    level: str,
    settings: dict[str, Any],
    census: Census | None = None,
) -> Noise:
    """The noise of ``query`` at ``level`` under ``mechanism`` with ``settings``, for ``census``
    (default: the US 2010 census)."""
    make = NOISES.get(mechanism)
    if make is None:
        raise _no_budget(mechanism)
    return make(query, level, settings, census)


def _no_budget(mechanism: str) -> InputError:
    """The refusal of a mechanism without a budget to choose, saying what is answered."""
    return InputError(
        f"mechanism {mechanism!r}: budgets are chosen for {', '.join(NOISES)}; {CELL_KEY_ANSWER}"
    )


def check_question(
    mechanism: str, targets: Sequence[str], level: str | None, count: int | None
) -> None:
    """Refuse, before any work, a question the mechanism cannot answer: a budget or target
    error of the cell key method (it has no budget), a count for the others (their noise does
    not depend on it), no level or not exactly one of budget and target for the others."""
    if mechanism == "cellkey":
        if targets:
            asked = "/".join(f"--{t}" for t in targets)
            raise InputError(
                f"cellkey has no budget, so {asked} has nothing to find; {CELL_KEY_ANSWER}"
            )
        return
    if mechanism not in NOISES:
        raise _no_budget(mechanism)
    if count is not None:
        raise InputError(
            f"--count applies to cellkey only: {mechanism}'s noise does not depend on the count"
        )
    if level is None:
        raise InputError(f"{mechanism}: give the level (--level block)")
    if len(targets) != 1:
        raise InputError("give exactly one of --budget, --moe and --rmse")


def cell_key_noise(
    settings: dict[str, Any],
    count: int | None = None,
    level: str | None = None,
    table: str | None = None,
    census: Census | None = None,
) -> dict[str, Any]:
    """The noise of one published cell under the cell key method's p-table (``settings`` as
    ``protect`` takes them), for a cell key uniform on [0, 1) as on the card: of a large count
    (the symmetry row, or an ONS table's rows over one period of counts), or of ``count``.
    Every table at every level takes its noise from the same p-table; ``level`` and ``table``
    are only checked. The method has no budget: the card's reason is stated instead."""
    from sdclab.protection.cellkey import CellKeyParameters, card, noise_bound
    from sdclab.protection.ptable import OnsPTable, PTable, large_count_noise
    from sdclab.results import NotMeasured

    p = _parse("cellkey", settings, CellKeyParameters, census)
    levels, tables = p.census.geography.levels, p.census.tables
    if level is not None and level not in levels:
        raise InputError(f"level {level!r}: expected one of {', '.join(levels)}")
    if table is not None and table.upper() not in tables and table not in tables:
        raise InputError(f"table {table!r}: expected one of {', '.join(tables)}")
    if count is not None and count < 0:
        raise InputError(f"count {count}: expected a count of 0 or more")
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
        "moe_95": accounting.margin_of_error(values, probabilities),
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


def answer(noise: Noise, target: Target, value: float) -> dict[str, Any]:
    """The budget and its error for one query: at budget ``value``, or the smallest budget whose
    margin of error or RMSE is at most ``value``."""
    if not value > 0 and not (target == "moe" and value == 0):
        raise InputError(f"{target} {value:g}: expected a number above 0")
    if target == "moe" and value != int(value):
        raise InputError(f"moe {value:g}: a margin of error is a whole number of persons")
    if target == "budget":
        noise.check(value, f"budget {value:g}")
    budget = value if target == "budget" else noise.budget_for(target, value)
    spread, margin, rmse = noise.error(budget)
    out = {
        "mechanism": noise.mechanism,
        "query": noise.query,
        "level": noise.level,
        "asked": {target: value},
        "budget": budget,
        "unit": noise.unit,
        "sigma2" if isinstance(noise, GaussianNoise) else "scale": spread,
        "moe_95": margin,
        "rmse": rmse,
        "what": noise.caveat,
    }
    if isinstance(noise, GaussianNoise) and noise.table is not None:
        out |= {
            "table": noise.table,
            "measured_cells_summed": noise.terms,
            "answered_from": [a.to_dict() for a in noise.answering],
        }
    return out
