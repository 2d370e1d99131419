"""Household swapping: invariants, swap rates, targeting, and the PSA's privacy by brute force."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import random_population
from sdclab import protection
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core import accounting
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import TableCounts, tabulate
from sdclab.protection.households import Households, Swapped
from sdclab.protection.swapping import (
    psa_partners,
    psa_swap,
    swap_population,
)


@pytest.fixture(scope="module")
def county():
    return synthesize(20_000, seed=5)


def household_contents(population) -> Counter:
    """Multiset of households: (tenure, sorted member attributes) — geography and ids left out."""
    persons = population.persons.join(
        population.units.select("unit_id", "tenure", "unit_type"), on="unit_id"
    ).filter(pl.col("unit_type") == 0)
    members = persons.group_by("unit_id").agg(
        pl.col("tenure").first(),
        pl.concat_str("relationship", "sex", "age", "race", "hispanic", separator=":")
        .sort()
        .str.join("|")
        .alias("members"),
    )
    return Counter(zip(members["tenure"].to_list(), members["members"].to_list(), strict=True))


def person_attributes(population) -> Counter:
    cols = ["relationship", "sex", "age", "race", "hispanic"]
    return Counter(population.persons.select(cols).iter_rows())


def table_at(release_or_tables, name, levels):
    table = release_or_tables[name]
    if isinstance(table, TableCounts):  # an exact tabulation
        table = PublishedTable.from_counts(table)
    frame = table.frame(labels=False)
    return frame.filter(pl.col("level").is_in(levels)).sort("level", "geoid", "cell")


def check_invariants(population, release, exact_from_level: str, sizes_exact: bool = True):
    truth = tabulate(population)
    swapped = release.microdata
    assert household_contents(swapped) == household_contents(population)
    assert person_attributes(swapped) == person_attributes(population)
    # units never move: housing units, occupancy and group quarters per block are exact
    for name in ("H1", "H3", "P42"):
        assert table_at(release.tables, name, ["block"]).equals(table_at(truth, name, ["block"]))
    if sizes_exact:
        assert table_at(release.tables, "H13", ["block"]).equals(table_at(truth, "H13", ["block"]))
    levels = ["nation", "state", "county", "tract"]
    exact_levels = levels[: levels.index(exact_from_level) + 1]
    for name in ("P1", "P8", "P12", "P14", "H4"):
        assert table_at(release.tables, name, exact_levels).equals(
            table_at(truth, name, exact_levels)
        )
    # and something did move
    assert not table_at(release.tables, "P12", ["block"]).equals(table_at(truth, "P12", ["block"]))


def protect(name, population, seed, **settings):
    return protection.run(name, population, {k: str(v) for k, v in settings.items()}, seed)


def swap(name, population, seed, **settings) -> Swapped:
    """The swap alone, with its diagnostics (what moved: never in the release)."""
    params = protection.get(name).parse({k: str(v) for k, v in settings.items()})
    run = psa_swap if name == "psa" else swap_population
    return run(population, params, np.random.default_rng(seed))


@pytest.mark.parametrize("level", ["state", "county", "tract"])
def test_psa_invariants(county, level):
    release = protect("psa", county, 1, rate=0.2, matching_level=level)
    check_invariants(county, release, level)


def test_targeted_swap_invariants(county):
    check_invariants(county, protect("swap-low", county, 2), "tract")
    release = protect("swap", county, 3, rate=0.3, same_tract=0, same_county=1)
    check_invariants(county, release, "county")
    high = protect("swap-high", county, 4)
    check_invariants(county, high, "state", sizes_exact=False)


WIDEST = {"psa": None, "swap-low": "tract", "swap": "state"}
LEVELS = ["nation", "state", "county", "tract"]


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    name=st.sampled_from(["psa", "swap-low", "swap"]),
    level=st.sampled_from(["state", "county", "tract"]),
)
def test_invariants_hold_on_random_small_populations(seed, name, level):
    """Random populations span 2 states, 3 counties and 4 tracts: geography invariants bite."""
    population = random_population(seed, n_units=120)
    extra = {"rate": 0.4} if name != "swap-low" else {}
    if name == "swap":
        extra |= {"same_tract": 0, "same_county": 0, "same_state": 1}
    if name == "psa":
        extra |= {"matching_level": level}
    release = protect(name, population, seed, **extra)
    truth = tabulate(population)
    assert household_contents(release.microdata) == household_contents(population)
    assert person_attributes(release.microdata) == person_attributes(population)
    for table in ("H1", "H3", "H13", "P42"):
        assert table_at(release.tables, table, ["block"]).equals(table_at(truth, table, ["block"]))
    widest = WIDEST[name] or level
    exact = LEVELS[: LEVELS.index(widest) + 1]
    for table in ("P1", "P12", "P8", "H4"):
        assert table_at(release.tables, table, exact).equals(table_at(truth, table, exact)), table


def test_psa_selection_rate_is_binomial(county):
    for rate, seed in ((0.05, 11), (0.5, 12)):
        swapped = swap("psa", county, seed, rate=rate)
        n = swapped.notes["households"]
        selected = swapped.diagnostics["selected"]
        assert abs(selected - n * rate) <= 5 * math.sqrt(n * rate * (1 - rate))


def test_psa_card_uses_the_measured_largest_group(county):
    release = protect("psa", county, 13, rate=0.05)
    households = Households(county)
    b = max(Counter(households.size.tolist()).values())  # one state: groups are household sizes
    assert release.notes["largest_matching_group"] == b
    assert release.card.guarantee.loss.epsilon == pytest.approx(accounting.psa_epsilon(0.05, b))


@pytest.mark.parametrize("rate", [0.05, 0.13, 0.5])
def test_targeted_swap_hits_the_target_exactly(county, rate):
    swapped = swap("swap", county, 14, rate=rate, same_tract=0.5, same_county=0.5)
    n, moved = swapped.notes["households"], swapped.diagnostics
    assert moved["pairs"] == round(rate * n / 2)
    assert moved["achieved_swap_rate"] == pytest.approx(2 * moved["pairs"] / n)


def test_targeted_swap_prefers_high_risk_households(county):
    moved = swap("swap-low", county, 15).diagnostics
    assert moved["high_risk_households"] > 0
    assert moved["swap_rate_high_risk"] > 2 * moved["swap_rate_other"]


def test_swapping_is_reproducible_per_seed(county):
    a, b, c = (protect("swap-high", county, s) for s in (21, 21, 22))
    assert all(a.tables[n].equals(b.tables[n]) for n in a.tables)
    assert a.microdata.persons.equals(b.microdata.persons)
    assert not a.tables["P12"].equals(c.tables["P12"])


def test_released_microdata_carries_no_input_ids(county):
    release = protect("psa", county, 23, rate=0.5)
    assert release.microdata.persons["person_id"].to_list() == list(range(county.n_persons))
    original = county.persons.select("person_id", "age")
    joined = release.microdata.persons.select("person_id", "age").join(original, on="person_id")
    assert (joined["age"] == joined["age_right"]).mean() < 0.2  # ids no longer point at people
    units = release.microdata.units
    assert units["unit_id"].to_list() == list(range(county.n_units))
    # units are renumbered in block order, shuffled within blocks: ids say no more than blocks
    same = units.join(county.units, on="unit_id").filter(pl.col("block") == pl.col("block_right"))
    assert (same["occupied"] == same["occupied_right"]).mean() < 0.95


# ---------------------------------------------------------------------------------------------
# The PSA's guarantee, by exhaustive enumeration of the real selection/permutation code
# ---------------------------------------------------------------------------------------------


def output_distribution(records: tuple, rate: float, partners=psa_partners) -> dict[tuple, float]:
    """Exact P(output) of the PSA on one matching group.

    Every selection (weighted p^|S| (1−p)^(b−|S|), the law of the exact Bernoulli draws) and
    every ordering of the permutation keys (weighted 1/b!, the law of rng.permutation) is fed to
    the permutation code that protect_psa uses.
    """
    b = len(records)
    group = np.zeros(b, dtype=np.int64)
    dist: dict[tuple, float] = {}
    for mask in itertools.product([False, True], repeat=b):
        selected = np.array(mask)
        weight = rate ** selected.sum() * (1 - rate) ** (b - selected.sum())
        for order in itertools.permutations(range(b)):
            partner = partners(group, selected, np.array(order))
            out = [None] * b
            for i, j in enumerate(partner):
                out[j] = records[i]  # household i now lives where household j lived
            key = tuple(out)
            dist[key] = dist.get(key, 0.0) + weight / math.factorial(b)
    return dist


def worst_ratio_over_hamming(records: tuple, rate: float, partners=psa_partners) -> float:
    """max over datasets x, x' of one universe of D_Mult(P_x, P_x') / d(x, x')."""
    universe = sorted(set(itertools.permutations(records)))
    dists = {x: output_distribution(x, rate, partners) for x in universe}
    worst = 0.0
    for x, y in itertools.combinations(universe, 2):
        d = sum(a != b for a, b in zip(x, y, strict=True))
        for out in set(dists[x]) | set(dists[y]):
            px, py = dists[x].get(out, 0.0), dists[y].get(out, 0.0)
            if px == 0.0 or py == 0.0:
                return math.inf
            worst = max(worst, abs(math.log(px) - math.log(py)) / d)
    return worst


@pytest.mark.parametrize("b", [2, 3, 4])
@pytest.mark.parametrize("rate", [0.05, 0.3, 0.5, 0.8])
def test_psa_privacy_by_brute_force(b, rate):
    records = tuple("abcd"[:b])
    assert worst_ratio_over_hamming(records, rate) <= accounting.psa_epsilon(rate, b) + 1e-9


def test_brute_force_flags_a_broken_permutation():
    def rotate(group, selected, order):  # not uniform: always the same cyclic shift
        chosen = np.flatnonzero(selected)
        partner = np.arange(len(group))
        partner[chosen] = np.roll(chosen, 1)
        return partner

    assert worst_ratio_over_hamming(("a", "b", "c"), 0.5, rotate) > accounting.psa_epsilon(0.5, 3)


def test_protect_command(tmp_path):
    runner = CliRunner()
    pop, rel = tmp_path / "pop", tmp_path / "rel"
    assert (
        runner.invoke(app, ["synth", "-n", "3000", "--seed", "1", "--out", str(pop)]).exit_code == 0
    )
    result = runner.invoke(
        app,
        ["protect", str(pop), "-m", "psa", "--set", "rate=0.1", "--seed", "3", "--out", str(rel)],
    )
    assert result.exit_code == 0, result.output
    assert "epsilon" in result.output and (rel / "microdata" / "persons.parquet").exists()
    for args in (["-m", "psa", "--set", "rate=1.2"], ["-m", "swap", "--set", "same_tract=0.2"]):
        result = runner.invoke(app, ["protect", str(pop), *args, "--out", str(tmp_path / "bad")])
        assert result.exit_code == 2 and result.output.startswith("error: ")
        assert not (tmp_path / "bad").exists()


def test_targeted_partners_match_and_live_elsewhere(county):
    from sdclab.protection.swapping import SWAP_HIGH, SWAP_LOW, targeted_pairs

    households = Households(county)
    for entry, seed in ((SWAP_LOW, 1), (SWAP_HIGH, 2)):
        params = entry.parse({})
        a, d, _ = targeted_pairs(households, params, np.random.default_rng(seed))
        assert len(a) and len(np.unique(np.concatenate([a, d]))) == 2 * len(a)
        assert (households.block_code[a] != households.block_code[d]).all()
        assert (households.adults[a] == households.adults[d]).all()
        gap = np.abs(households.size[a] - households.size[d])
        assert gap.max() == (2 if params.noisy_size_key else 0)
        if entry is SWAP_LOW:
            assert (households.area("tract")[a] == households.area("tract")[d]).all()
