"""The TopDown Algorithm's measurement strategy and budget (specs/topdown-safetab-h.md A.1, A.3).

The 2020 production strategy for the PL 94-171 persons histogram, as data: the measured queries
(each a partition of the 2,016 histogram cells, built with the catalogue's Kronecker machinery),
the global budget, the level shares and the per-query shares within each level — all exact
rationals, so that every σ² = 1/ρ reaches the exact sampler without rounding.

Each answer of query q at a geounit of level L gets N_Z(0, σ²) noise with
ρ_{q,L} = ρ_global · γ_L · α_{q,L} and σ² = 1/ρ_{q,L}: with bounded neighbours (replace one person)
a histogram query has Δ₂² = 2, so this is exactly ρ_{q,L}-zCDP; disjoint geounits of a level
compose in parallel, queries and levels sequentially, and a person's total is ρ_global.

The optimisation that turns the measurements into consistent integer tables, and the mechanism
itself, come with the TopDown issue; this module is the part they share with the accounting.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from sdclab import accounting, schema
from sdclab.accounting import Budget, SpecCard
from sdclab.geography import LEVELS, Geography
from sdclab.noise import discrete_gaussian
from sdclab.tables.catalog import HISPANIC, RACE_DETAILED, Dimension, Part, all_codes, part_query

HHGQ = all_codes(schema.UNIT_TYPE)
VOTING_AGE = all_codes(schema.VOTING_AGE_ATTR)
HH_INST_LEVELS = Dimension(
    "unit_type",
    ("household", "institutional group quarters", "non-institutional group quarters"),
    np.array(
        [[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]], np.int8
    ),
)

QUERIES: dict[str, tuple[Dimension, ...]] = {
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
}
"""The measured queries of the PL94 strategy, by their production names."""


def query_matrix(name: str) -> sp.csr_matrix:
    """Sparse 0/1 matrix (query cells × the 2,016 PL94 histogram cells)."""
    return part_query(schema.PL94, Part(QUERIES[name])).astype(np.int64)


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

    def rho_of(self, query: str, level: str) -> Fraction:
        """ρ_{q,L} = ρ · γ_L · α_{q,L} (0 if the query is not measured at the level)."""
        return self.rho * self.level_shares[level] * self.query_shares[level].get(query, F(0))

    def sigma2(self, query: str, level: str) -> Fraction:
        """Noise variance 1/ρ_{q,L} of every cell of the query (bounded neighbours, Δ₂² = 2)."""
        return 1 / self.rho_of(query, level)

    def total_rho(self) -> Fraction:
        """A person's total ρ: the sum over levels and queries (each level's shares sum to 1)."""
        return sum(
            (self.rho_of(q, level) for level in LEVELS for q in self.query_shares[level]),
            F(0),
        )

    def check(self) -> None:
        """Shares must be positive and sum to one per level and over levels; queries must exist."""
        if sum(self.level_shares.values()) != 1:
            raise ValueError(f"level shares sum to {sum(self.level_shares.values())}, not 1")
        for level, shares in self.query_shares.items():
            unknown = set(shares) - set(QUERIES)
            if unknown:
                raise ValueError(f"{level}: unknown queries {sorted(unknown)}")
            if sum(shares.values()) != 1:
                raise ValueError(f"{level}: query shares sum to {sum(shares.values())}, not 1")


PRODUCTION = Strategy(RHO_GLOBAL, LEVEL_SHARES, QUERY_SHARES)


def pl94_card(strategy: Strategy = PRODUCTION, delta: float = 1e-10) -> SpecCard:
    """The specification card of TopDown's PL94 persons measurements."""
    rho = float(strategy.total_rho())
    return SpecCard(
        mechanism="topdown (pl94 persons)",
        domain="census edited files (person records after editing and imputation)",
        multiverse="datasets sharing the invariants",
        invariants=(
            "state total populations",
            "housing units and occupied group-quarters facilities by type in every block",
        ),
        protection_unit="person record",
        neighbours=accounting.NEIGHBOUR_TEXT["bounded"],
        output_premetric="zCDP",
        budget=Budget(rho=rho),
        covers="the PL 94-171 person tables (and every product derived from its microdata)",
        caveats=(
            f"(epsilon, delta) at delta = {delta:g}: epsilon = "
            f"{accounting.epsilon_for_delta(rho, delta):.2f} (tight conversion)",
            "Budgets of other products (units, DHC) add to this one.",
        ),
    )


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """Noisy answers of one query at every geounit of one level (geounits × query cells)."""

    query: str
    level: str
    codes: np.ndarray
    noisy: np.ndarray
    sigma2: Fraction


def measure(
    block_histogram: sp.csr_matrix,
    geography: Geography,
    strategy: Strategy,
    rng: np.random.Generator,
) -> list[Measurement]:
    """Every query of the strategy at every level: exact answers plus N_Z(0, 1/ρ_{q,L}) noise.

    ``block_histogram`` is the blocks × 2,016 PL94 histogram (sdclab.tables.tabulate with
    schema.PL94). Noise comes from the exact discrete Gaussian sampler, one draw per answer.
    """
    out = []
    for level in LEVELS:
        histogram = (
            block_histogram if level == "block" else geography.aggregation(level) @ block_histogram
        )
        for query, share in strategy.query_shares[level].items():
            if share == 0:
                continue
            exact = (histogram @ query_matrix(query).T).toarray()
            sigma2 = strategy.sigma2(query, level)
            noise = discrete_gaussian(sigma2, exact.shape, rng)
            out.append(Measurement(query, level, geography.codes(level), exact + noise, sigma2))
    return out
