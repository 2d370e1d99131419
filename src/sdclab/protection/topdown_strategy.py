"""The TopDown Algorithm's measurement strategy and budget (docs/topdown.md, *Products*).

The 2020 production strategy for the PL 94-171 persons histogram, as data: the measured queries
(each a partition of the 2,016 histogram cells, built with the catalogue's Kronecker machinery),
the global budget, the level shares and the per-query shares within each level — all exact
rationals, so that every σ² = 1/ρ reaches the exact sampler without rounding.

Each answer of query q at a geounit of level L gets N_Z(0, σ²) noise with
ρ_{q,L} = ρ_global · γ_L · α_{q,L} and σ² = 1/ρ_{q,L}: with bounded neighbours (replace one person)
a histogram query has Δ₂² = 2, so this is exactly ρ_{q,L}-zCDP; disjoint geounits of a level
compose in parallel, queries and levels sequentially, and a person's total is ρ_global.

The products, strategy files and the specification card are here too; the measurements and the
optimisation that turns them into consistent integer tables are in :mod:`sdclab.protection.topdown`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import LEVELS
from sdclab.core import accounting
from sdclab.core.accounting import SpecCard
from sdclab.core.domain import Schema
from sdclab.core.errors import InputError
from sdclab.core.fileio import read_toml
from sdclab.core.privacy import Invariant, Loss, person_guarantee

if TYPE_CHECKING:
    from sdclab.core.census.model import Census
from sdclab.censuses.us2010.catalog import HISPANIC, P12_AGE, RACE_DETAILED, SEXES
from sdclab.core.tables.definition import Dimension, Part, TableDef, all_codes, part_query

HHGQ = all_codes(schema.UNIT_TYPE)
VOTING_AGE = all_codes(schema.VOTING_AGE_ATTR)
HH_INST_LEVELS = Dimension(
    "unit_type",
    ("household", "institutional group quarters", "non-institutional group quarters"),
    np.array(
        [[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]], np.int8
    ),
)

PL94_QUERIES: dict[str, tuple[Dimension, ...]] = {
    "total": (),
    "hhgq": (HHGQ,),
    "hhinstlevels": (HH_INST_LEVELS,),
    "votingage": (VOTING_AGE,),
    "hispanic": (HISPANIC,),
    "cenrace": (RACE_DETAILED,),
    "hispanic*cenrace": (HISPANIC, RACE_DETAILED),
    "votingage*cenrace": (VOTING_AGE, RACE_DETAILED),
    "votingage*hispanic": (VOTING_AGE, HISPANIC),
    "votingage*hispanic*cenrace": (VOTING_AGE, HISPANIC, RACE_DETAILED),
    "detailed": (HHGQ, VOTING_AGE, HISPANIC, RACE_DETAILED),
    # rounder-only queries (never measured)
    "hhgq*hispanic": (HHGQ, HISPANIC),
    "hhgq*hispanic*cenrace": (HHGQ, HISPANIC, RACE_DETAILED),
}
"""The queries of the PL94 product by their production names: the 11 measured ones, then the two
the rounder also targets."""

_AGES = np.arange(schema.AGE_MAX + 1)
VOTING_AGE_OF_AGE = Dimension(
    "age",
    ("under 18", "18 and over"),
    np.stack([_AGES < schema.VOTING_AGE, _AGES >= schema.VOTING_AGE]).astype(np.int8),
)
DHC_QUERIES: dict[str, tuple[Dimension, ...]] = {
    "total": (),
    "hhgq": (HHGQ,),
    "votingage": (VOTING_AGE_OF_AGE,),
    "sex*agecat": (SEXES, P12_AGE),
    "sex*age": (SEXES, all_codes(schema.AGE)),
    "hispanic*cenrace": (HISPANIC, RACE_DETAILED),
    "votingage*hispanic*cenrace": (VOTING_AGE_OF_AGE, HISPANIC, RACE_DETAILED),
    "detailed": (HHGQ, SEXES, all_codes(schema.AGE), HISPANIC, RACE_DETAILED),
    # rounder-only
    "hhgq*sex*agecat": (HHGQ, SEXES, P12_AGE),
}
"""The queries of sdclab's DHC-persons-like product (sex × agecat uses the 23 age groups of P12)."""


RHO_GLOBAL = Fraction(542, 339) ** 2
"""The production persons budget: global_scale = 339/542, ρ = (542/339)² ≈ 2.556."""

LEVEL_SHARES = dict(
    zip(LEVELS, (Fraction(n, 4099) for n in (104, 1440, 447, 687, 1256, 165)), strict=True)
)
"""γ_L: the share of ρ_global spent at each level (nation, state, county, tract, BG, block)."""

F = Fraction
_SAME = {  # hispanic, votingage, hhinstlevels, hhgq, votingage*hispanic share one row
    "nation": F(26, 4097),
    "state": F(6, 4097),
    "county": F(10, 4097),
    "tract": F(5, 4102),
    "block_group": F(3, 4099),
    "block": F(5, 4097),
}
QUERY_SHARES: dict[str, dict[str, Fraction]] = {
    "nation": {
        "cenrace": F(52, 4097),
        "hispanic*cenrace": F(130, 4097),
        "votingage*cenrace": F(130, 4097),
        "votingage*hispanic*cenrace": F(26, 241),
        "detailed": F(189, 241),
    },
    "state": {
        "total": F(3773, 4097),
        "cenrace": F(6, 4097),
        "hispanic*cenrace": F(12, 4097),
        "votingage*cenrace": F(12, 4097),
        "votingage*hispanic*cenrace": F(2, 241),
        "detailed": F(230, 4097),
    },
    "county": {
        "total": F(3126, 4097),
        "cenrace": F(10, 4097),
        "hispanic*cenrace": F(28, 4097),
        "votingage*cenrace": F(28, 4097),
        "votingage*hispanic*cenrace": F(101, 4097),
        "detailed": F(754, 4097),
    },
    "tract": {
        "total": F(1567, 4102),
        "cenrace": F(4, 2051),
        "hispanic*cenrace": F(1933, 4102),
        "votingage*cenrace": F(10, 2051),
        "votingage*hispanic*cenrace": F(67, 4102),
        "detailed": F(241, 2051),
    },
    "block_group": {
        "total": F(1705, 4099),
        "cenrace": F(3, 4099),
        "hispanic*cenrace": F(1055, 4099),
        "votingage*cenrace": F(9, 4099),
        "votingage*hispanic*cenrace": F(24, 4099),
        "detailed": F(1288, 4099),
    },
    "block": {
        "total": F(5, 4097),
        "cenrace": F(9, 4097),
        "hispanic*cenrace": F(21, 4097),
        "votingage*cenrace": F(21, 4097),
        "votingage*hispanic*cenrace": F(71, 4097),
        "detailed": F(3945, 4097),
    },
}
"""α_{q,L}: production query shares within each level (strategy
ProductionCandidate20210527US_mult8_add02_dsepJune3). The nation measures no total (invariant)."""
for _level, _shares in QUERY_SHARES.items():
    for _query in ("hispanic", "votingage", "hhinstlevels", "hhgq", "votingage*hispanic"):
        _shares[_query] = _SAME[_level]


@dataclass(frozen=True)
class Strategy:
    """A budget and its allocation over levels and queries."""

    rho: Fraction
    level_shares: dict[str, Fraction]
    query_shares: dict[str, dict[str, Fraction]]
    levels: tuple[str, ...] = LEVELS
    """The geography's levels from the top down (the US levels by default)."""

    def rho_of(self, query: str, level: str) -> Fraction:
        """ρ_{q,L} = ρ · γ_L · α_{q,L} (0 if the query is not measured at the level)."""
        return self.rho * self.level_shares[level] * self.query_shares[level].get(query, F(0))

    def sigma2(self, query: str, level: str) -> Fraction:
        """Noise variance 1/ρ_{q,L} of every cell of the query (bounded neighbours, Δ₂² = 2)."""
        return 1 / self.rho_of(query, level)

    def measured(self, level: str) -> list[str]:
        """The queries measured at ``level``, in a fixed order."""
        return [q for q in self.query_shares[level] if self.rho_of(q, level) > 0]

    def total_rho(self) -> Fraction:
        """A person's total ρ: the sum over levels and queries (each level's shares sum to 1)."""
        return sum(
            (self.rho_of(q, level) for level in self.levels for q in self.query_shares[level]),
            F(0),
        )

    def check(self, queries: Iterable[str] = PL94_QUERIES) -> None:
        """Shares must be non-negative and sum to one per level and over levels; queries known."""
        levels = set(self.levels)
        if set(self.level_shares) != levels or set(self.query_shares) != levels:
            raise ValueError(
                f"shares must be given for exactly the levels {', '.join(self.levels)}"
            )
        if self.rho <= 0:
            raise ValueError(f"rho must be positive, got {self.rho}")
        if sum(self.level_shares.values()) != 1:
            raise ValueError(f"level shares sum to {sum(self.level_shares.values())}, not 1")
        for level, shares in self.query_shares.items():
            unknown = set(shares) - set(queries)
            if unknown:
                raise ValueError(f"{level}: unknown queries {sorted(unknown)}")
            if any(v < 0 for v in shares.values()) or self.level_shares[level] < 0:
                raise ValueError(f"{level}: shares must not be negative")
            if sum(shares.values()) != 1:
                raise ValueError(f"{level}: query shares sum to {sum(shares.values())}, not 1")

    def with_rho(self, rho: Fraction) -> Strategy:
        return Strategy(rho, self.level_shares, self.query_shares, self.levels)

    def table(self, delta: float = 1e-10) -> list[dict[str, Any]]:
        """The privacy-loss accounting: per level (query "all") and per measured query, its
        share, ρ, σ and ε at ``delta`` alone — shares whose ε do not add up to the total ε (ρ
        adds under composition, ε does not)."""
        rows = []
        for level in self.levels:
            level_rho = sum((self.rho_of(q, level) for q in self.measured(level)), F(0))
            parts = [("all", F(1), level_rho, None)] + [
                (q, self.query_shares[level][q], self.rho_of(q, level), self.sigma2(q, level))
                for q in self.measured(level)
            ]
            for query, share, rho, sigma2 in parts:
                if rho == 0:
                    continue
                rows.append(
                    {
                        "level": level,
                        "query": query,
                        "share_of_level": str(share),
                        "level_share": str(self.level_shares[level]),
                        "rho": float(rho),
                        "sigma": None if sigma2 is None else float(sigma2) ** 0.5,
                        f"epsilon alone (delta {delta:g})": accounting.epsilon_for_delta(
                            float(rho), delta
                        ),
                    }
                )
        return rows


PRODUCTION = Strategy(RHO_GLOBAL, LEVEL_SHARES, QUERY_SHARES)


def _dhc_shares() -> dict[str, dict[str, Fraction]]:
    base = {
        "total": F(1, 10),
        "hhgq": F(1, 20),
        "votingage": F(1, 20),
        "sex*agecat": F(1, 10),
        "sex*age": F(1, 10),
        "hispanic*cenrace": F(1, 10),
        "votingage*hispanic*cenrace": F(1, 10),
        "detailed": F(2, 5),
    }
    nation = {**base, "detailed": F(1, 2)}
    del nation["total"]  # the national total is invariant
    return {level: dict(nation if level == "nation" else base) for level in LEVELS}


DHC_DEFAULT = Strategy(F(153, 10), LEVEL_SHARES, _dhc_shares())
"""sdclab's default DHC strategy: ρ = 15.30 (ε = 52.84 at δ = 10⁻¹⁰ by the standard conversion,
the figure quoted for the 2020 person products), production level shares, and within each level
total 1/10, hhgq 1/20, votingage 1/20, sex × P12 age groups 1/10, sex × single age 1/10,
hispanic × cenrace 1/10, votingage × hispanic × cenrace 1/10, detailed 2/5 (1/2 at the nation,
whose total is invariant)."""


@dataclass(frozen=True)
class Product:
    """A TopDown person product: its histogram, its queries, default strategy and solve passes.

    Passes follow production: children at the levels between the top and the bottom are solved
    total first, then everything else; the root and the bottom level in one pass. The US
    products (``pl94``, ``dhc``) carry housing-type constraints; a declared census's product
    (:func:`census_product`) has one kind of record, persons, and no structural zeros.
    """

    name: str
    schema: Schema
    queries: dict[str, tuple[Dimension, ...]]
    default: Strategy
    rounder_queries: tuple[str, ...]
    """What the rounder's last pass targets (after the total)."""
    levels: tuple[str, ...] = LEVELS
    """The geography's levels from the top down."""
    invariant_levels: tuple[str, ...] = ("nation", "state")
    """The levels whose geounits' total population is invariant."""
    census: Census | None = field(default=None, compare=False)
    """The declared census whose tables the product measures (None: a US product)."""
    matrices: Mapping[str, sp.csr_matrix] = field(default_factory=dict, compare=False, repr=False)
    """A declared census product's query matrices, by query name (a US product builds its own
    from :attr:`queries`)."""
    workload: tuple[str, ...] | None = None
    """A declared census product's workload: the tables it measures and publishes (None: every
    table over its histogram)."""

    @property
    def query_names(self) -> tuple[str, ...]:
        """Every query of the product, in its order."""
        return tuple(self.matrices or self.queries)

    @property
    def housing_types(self) -> bool:
        """Whether the histogram crosses the eight housing types (the US products)."""
        return self.census is None

    def query_matrix(self, name: str) -> sp.csr_matrix:
        """Sparse 0/1 matrix (query cells × histogram cells); of a declared census, any of its
        tables over the histogram (what another workload of the census measures)."""
        if self.matrices:
            if name not in self.matrices and self.census is not None:
                return self.census.table(name).query_on(self.schema).astype(np.int64).tocsr()
            return self.matrices[name]
        return _query_matrix(self.name, name)

    def l2_passes(self, level: str, measured: Iterable[str]) -> tuple[tuple[str, ...], ...]:
        rest = tuple(q for q in measured if q != "total")
        if level in (self.levels[0], self.levels[-1]):
            return (("total", *rest),)
        return (("total",), rest)

    def rounder_passes(self, level: str) -> tuple[tuple[str, ...], ...]:
        if level in (self.levels[0], self.levels[-1]):
            return (("total", *self.rounder_queries),)
        return (("total",), self.rounder_queries)

    def structural_zeros(self) -> npt.NDArray[np.bool_]:
        """Cells no geounit may fill: minors in nursing facilities (constraint nurse_nva_0);
        none in a declared census's product."""
        if not self.housing_types:
            return np.zeros(self.schema.size, dtype=bool)
        cells = self.schema.decode(np.arange(self.schema.size))
        minor = (
            cells["votingage"] == 0 if "votingage" in cells else cells["age"] < schema.VOTING_AGE
        )
        return (cells["unit_type"] == NURSING) & minor


NURSING = 3


@cache
def _query_matrix(product: str, name: str) -> sp.csr_matrix:
    p = PRODUCTS[product]
    return part_query(p.schema, Part(p.queries[name])).astype(np.int64).tocsr()


PRODUCTS = {
    "pl94": Product(
        "pl94",
        schema.PL94,
        PL94_QUERIES,
        PRODUCTION,
        ("hhgq", "hhgq*hispanic", "hhgq*hispanic*cenrace", "detailed"),
    ),
    "dhc": Product(
        "dhc",
        schema.DHC,
        DHC_QUERIES,
        DHC_DEFAULT,
        ("hhgq", "hhgq*sex*agecat", "votingage*hispanic*cenrace", "detailed"),
    ),
}


def load_strategy(path: Path, product: Product, rho: Fraction | None = None) -> Strategy:
    """A strategy from a TOML file: ``rho`` (optional), ``[level_shares]`` and one
    ``[query_shares.<level>]`` table per level; shares are exact fractions written as strings
    ("104/4099") or decimals. Anything malformed is an :class:`InputError` naming the file."""
    return parse_strategy(read_toml(path, "strategy file"), product, rho, str(path))


def parse_strategy(
    data: Any, product: Product, rho: Fraction | None = None, where: str = "strategy"
) -> Strategy:
    """A strategy from the data of a strategy file (or of :func:`strategy_data`)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: not a valid {product.name} strategy (expected a table)")
    try:
        strategy = Strategy(
            _fraction(data.get("rho", rho if rho is not None else product.default.rho)),
            {k: _fraction(v) for k, v in data["level_shares"].items()},
            {
                lv: {q: _fraction(v) for q, v in qs.items()}
                for lv, qs in data["query_shares"].items()
            },
            product.levels,
        )
        strategy.check(product.query_names)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise InputError(f"{where}: not a valid {product.name} strategy ({exc})") from None
    return strategy if rho is None else strategy.with_rho(rho)


def strategy_data(strategy: Strategy) -> dict[str, Any]:
    """A strategy as the data of a strategy file, every number an exact fraction in text."""
    return {
        "rho": str(strategy.rho),
        "level_shares": {level: str(s) for level, s in strategy.level_shares.items()},
        "query_shares": {
            level: {q: str(s) for q, s in shares.items()}
            for level, shares in strategy.query_shares.items()
        },
    }


def _fraction(value: Any) -> Fraction:
    """A share or budget as an exact fraction: a float is the decimal it prints as (0.1 is 1/10)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Fraction | Decimal):
        raise TypeError(f"{value!r} is not a number")
    if isinstance(value, Decimal) and not value.is_finite():
        raise ValueError(f"{value} is not a finite number")
    return Fraction(str(value)) if isinstance(value, float) else Fraction(value)


def topdown_card(product: Product, strategy: Strategy, delta: float = 1e-10) -> SpecCard:
    """The specification card of a TopDown product's person measurements."""
    if product.housing_types:
        invariants: tuple[Invariant, ...] = (
            Invariant("total population", "nation, state"),
            Invariant(
                "housing units and occupied group-quarters facilities by type", "every block"
            ),
        )
        caveats: tuple[str, ...] = (
            "Structural constraints (hhgq bounds from the facility counts, no minors in nursing "
            "facilities) are public knowledge, not extra leakage beyond the invariants.",
            "Budgets of other products (units, the other person product) add to this one.",
        )
    else:
        invariants = (Invariant("total population", f"every {product.levels[0]}"),)
        caveats = (
            "A table this run does not publish (one on another geography, or crossing an "
            "attribute outside the histogram) released apart would add its own budget.",
        )
    guarantee = person_guarantee(
        Loss("zcdp", rho=strategy.total_rho()), "replace", invariants=invariants
    )
    return SpecCard(
        mechanism=f"topdown ({product.name} persons)",
        domain="census edited files (person records after editing and imputation)",
        multiverse="datasets sharing the invariants",
        guarantee=guarantee,
        covers=f"the {product.name} person histogram at every level, its microdata (MDF) and every "
        "table tabulated from it, and the noisy measurements",
        caveats=(
            "The allocation's epsilon of a level or query is that part's loss alone: the parts' "
            "rho add up to the total, their epsilon do not.",
            *caveats,
            "The protection unit is the post-imputation person (a person record of the edited "
            "file): the guarantee protects edited and imputed records, not the raw responses.",
        ),
        allocation=tuple(strategy.table(delta)),
    )


# ---------------------------------------------------------------------------------------------
# A declared census's product
# ---------------------------------------------------------------------------------------------

MAX_CENSUS_CELLS = 1 << 22
"""The largest histogram TopDown measures for a declared census (4,194,304 cells; the US DHC
product has 233,856): every geounit's detailed query is a vector of this length."""

CENSUS_RHO = Fraction(153, 10)
"""A declared census's default total ρ: the DHC default's (the figure quoted for the 2020
person products), so that a first run is comparable with the US one."""


def measurable_tables(census: Census, workload: tuple[str, ...] | None) -> list[TableDef]:
    """The person tables of the census's main geography over person attributes (of the
    workload, if one is given): what TopDown's histogram can answer."""
    of_persons = {a.name for a in census.attributes.values() if a.records == "persons"}
    return [
        t
        for t in census.tables.values()
        if t.records == "persons"
        and census.geography_of(t.name) is census.geography
        and set(t.crossed) <= of_persons
        and (workload is None or t.name in workload)
    ]


def census_product(census: Census, workload: tuple[str, ...] | None = None) -> Product:
    """TopDown's product for a declared census: the histogram crossing every person attribute
    that a table of its main geography crosses, measuring the total, each of those tables at
    the levels it is published, and the detailed histogram. The default strategy splits ρ
    evenly over the levels and, within a level, over the queries it measures (the total is not
    measured at the top level, where it is invariant); a table whose query another already
    asks (a total table, say) is not measured twice, nor one that counts a person in more than
    one cell (a tally: its Δ₂² exceeds the 2 of every measured query, σ² = 1/ρ); both are still
    published, tabulated from the MDF. A ``workload`` measures and publishes its tables alone,
    over the histogram of the attributes they cross (a census of many topics has no histogram of
    them all that TopDown could measure at every geounit)."""
    tables = measurable_tables(census, workload)
    attributes = tuple(
        a.name
        for a in census.attributes.values()
        if a.records == "persons" and any(a.name in t.crossed for t in tables)
    )
    size = math.prod(census.attribute(a).size for a in attributes)
    if size > MAX_CENSUS_CELLS:
        raise InputError(
            f"topdown: the histogram crossing the attributes of census {census.name}'s tables "
            f"({', '.join(attributes)}) has {size:,} cells, more than the {MAX_CENSUS_CELLS:,} "
            "TopDown measures at every geounit (give it the tables to measure: tables = [...])"
        )
    domain = census.domain(attributes, f"{census.name} persons")
    matrices: dict[str, sp.csr_matrix] = {
        "total": sp.csr_matrix(np.ones((1, domain.size), dtype=np.int64))
    }
    published: dict[str, tuple[str, ...]] = {}
    detailed = sp.identity(domain.size, dtype=np.int64, format="csr")
    for table in tables:
        if table.name in ("total", "detailed"):
            raise InputError(
                f"topdown: census {census.name}'s table {table.name!r} is named like one of "
                "TopDown's own queries (total, detailed)"
            )
        matrix = table.query_on(domain).astype(np.int64).tocsr()
        if np.asarray(matrix.sum(axis=0)).max(initial=0) > 1:
            continue  # a person in several cells: Δ₂² above 2, so published from the MDF only
        if not any(_same(matrix, m) for m in (*matrices.values(), detailed)):
            matrices[table.name] = matrix
            published[table.name] = table.levels
    matrices["detailed"] = detailed
    levels = census.geography.levels
    at_level = {
        level: [
            q
            for q in matrices
            if (q == "total" and level != levels[0])
            or q == "detailed"
            or level in published.get(q, ())
        ]
        for level in levels
    }
    default = Strategy(
        CENSUS_RHO,
        {level: Fraction(1, len(levels)) for level in levels},
        {level: {q: Fraction(1, len(qs)) for q in qs} for level, qs in at_level.items()},
        levels,
    )
    return Product(
        name=census.name,
        schema=domain,
        queries={},
        default=default,
        rounder_queries=tuple(q for q in matrices if q != "total"),
        levels=levels,
        invariant_levels=levels[:1],
        census=census,
        matrices=matrices,
        workload=workload,
    )


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return a.shape == b.shape and (a != b).nnz == 0
