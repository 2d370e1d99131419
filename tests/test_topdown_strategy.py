"""TopDown's production strategy: queries, shares, budgets (docs/topdown.md, Production values)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from sdclab.censuses.us2010 import schema
from sdclab.core import accounting
from sdclab.protection.topdown_strategy import (
    PL94_QUERIES,
    PRODUCTION,
    PRODUCTS,
    QUERY_SHARES,
    Strategy,
    topdown_card,
)


def test_every_query_partitions_the_2016_cells():
    assert schema.PL94.size == 8 * 2 * 2 * 63 == 2016
    sizes = {
        "total": 1,
        "hhgq": 8,
        "hhinstlevels": 3,
        "votingage": 2,
        "hispanic": 2,
        "cenrace": 63,
        "hispanic*cenrace": 126,
        "votingage*cenrace": 126,
        "votingage*hispanic": 4,
        "votingage*hispanic*cenrace": 252,
        "detailed": 2016,
        "hhgq*hispanic": 16,  # rounder-only queries
        "hhgq*hispanic*cenrace": 1008,
    }
    for name in PL94_QUERIES:
        matrix = PRODUCTS["pl94"].query_matrix(name)
        assert matrix.shape == (sizes[name], 2016), name
        assert (np.asarray(matrix.sum(axis=0)) == 1).all(), name


def test_hhinstlevels_groups_the_gq_types():
    matrix = PRODUCTS["pl94"].query_matrix("hhinstlevels").toarray()
    hhgq = schema.PL94.decode(np.arange(2016))["unit_type"]
    assert (matrix[0] == (hhgq == 0)).all()
    assert (matrix[1] == np.isin(hhgq, [1, 2, 3, 4])).all()
    assert (matrix[2] == np.isin(hhgq, [5, 6, 7])).all()


@pytest.mark.parametrize(
    ("query", "level", "sigma"),
    [
        ("total", "state", 1.10),
        ("total", "county", 2.17),
        ("total", "tract", 2.47),
        ("total", "block_group", 1.75),
        ("total", "block", 89.2),
        ("hispanic*cenrace", "tract", 2.23),
        ("hispanic*cenrace", "block_group", 2.23),
        ("votingage*hispanic*cenrace", "nation", 11.95),
        ("votingage*hispanic*cenrace", "county", 12.06),
        ("votingage*hispanic*cenrace", "block_group", 14.77),
        ("votingage*hispanic*cenrace", "block", 23.7),
        ("detailed", "nation", 4.43),
        ("detailed", "state", 4.45),
        ("detailed", "county", 4.42),
        ("detailed", "tract", 4.46),
        ("detailed", "block_group", 2.02),
        ("detailed", "block", 3.18),
    ],
)
def test_noise_scales_match_the_published_table(query, level, sigma):
    """σ = 1/√ρ rounded as published (two decimals, one for the largest values)."""
    decimals = len(repr(sigma).split(".")[1])
    assert round(float(PRODUCTION.sigma2(query, level)) ** 0.5, decimals) == sigma


def test_budget_adds_up_and_converts_to_the_published_epsilon():
    PRODUCTION.check()
    assert PRODUCTION.total_rho() == Fraction(542, 339) ** 2
    assert "total" not in QUERY_SHARES["nation"]  # the national total is invariant
    rho = float(PRODUCTION.total_rho())
    assert accounting.epsilon_for_delta(rho, 1e-10) == pytest.approx(17.14, abs=0.005)
    assert "17.14" in topdown_card(PRODUCTS["pl94"], PRODUCTION).render()


def test_a_strategy_whose_shares_do_not_add_up_is_rejected():
    broken = {**QUERY_SHARES, "block": {**QUERY_SHARES["block"], "total": Fraction(1, 2)}}
    with pytest.raises(ValueError, match="block: query shares sum"):
        Strategy(PRODUCTION.rho, PRODUCTION.level_shares, broken).check()


def test_the_card_carries_the_budget_table_and_survives_a_round_trip():
    card = topdown_card(PRODUCTS["pl94"], PRODUCTION)
    queries = [row for row in card.allocation if row["query"] != "all"]
    levels = [row for row in card.allocation if row["query"] == "all"]
    rho = float(card.guarantee.loss.rho)
    assert sum(row["rho"] for row in queries) == pytest.approx(rho, rel=1e-12)
    assert sum(row["rho"] for row in levels) == pytest.approx(rho, rel=1e-12)
    epsilon = [row["epsilon alone (delta 1e-10)"] for row in levels]
    assert sum(epsilon) > card.common.epsilon  # shares' ε do not add up to the total
    assert "Budget allocation:" in card.render()
    back = type(card).from_dict(card.to_dict())
    assert back == card


def test_a_level_without_budget_measures_nothing():
    shares = {**PRODUCTION.level_shares}
    shares["nation"], shares["state"] = Fraction(0), shares["state"] + shares["nation"]
    strategy = Strategy(PRODUCTION.rho, shares, QUERY_SHARES)
    assert strategy.measured("nation") == [] and strategy.measured("state")
