"""SafeTab-H's post-processing: marginal aggregation, suppression (groups absent from T01001,
geounits without housing units), clamping and coterminous geographies, each after the noise."""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab import protection
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.censuses.us2010.safetab_groups import default_groups
from sdclab.core.errors import InputError
from sdclab.protection.safetab_h import SafeTabHParameters
from sdclab.protection.safetab_post import (
    HOUSING_INVARIANT,
    coterminous_counts,
    derived_margin,
)
from sdclab.protection.safetab_tables import T3_DERIVED, T4_DERIVED, group_histograms

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from safetab_h_post import NEW_STATE as STATE  # noqa: E402
from safetab_h_post import with_real_cases  # noqa: E402

MECHANISM = protection.get("safetab_h")
SEED = 5
KEYS = ["level", "geoid", "iteration_level", "iteration", "table", "cell"]


@pytest.fixture(scope="module")
def population() -> Population:
    """30,000 synthetic persons (one state of one county: the state, county and nation have one
    extent), with their first group-quarters facility and its residents moved into a tract of
    their own (no housing unit) and their last tract moved into a state of its own."""
    return with_real_cases(synthesize(30_000, seed=8))


def run(population: Population, **settings: object):
    return protection.run("safetab_h", population, dict(settings), SEED)


@pytest.fixture(scope="module")
def plain(population):
    return run(population)


def rows(release, level: str, geoid: str) -> pl.DataFrame:
    tables = release.artifacts["group_tables"]
    return (
        tables.filter((pl.col("level") == level) & (pl.col("geoid") == geoid))
        .drop("level", "geoid")
        .sort(KEYS[2:])
    )


def test_the_cases_are_in_the_geography(population):
    assert coterminous_counts(population.geography) == {
        "state=nation": 0,  # two states now
        "county=state": 2,  # the synthetic county, and the moved tract's
        "tract=county": 1,  # the moved tract
    }


def test_defaults_are_off_and_change_nothing(population, plain):
    p = SafeTabHParameters()
    assert (p.clamp, p.drop_no_housing, p.coterminous) == (False, False, False)
    off = run(population, clamp=False, drop_no_housing=False, coterminous=False)
    assert off.artifacts["group_tables"].equals(plain.artifacts["group_tables"])
    assert "coterminous_geounits" not in plain.notes
    assert "geounits_without_housing_dropped" not in plain.notes
    # measured apart, a county of its state's extent publishes other counts than the state
    assert not rows(plain, "county", STATE + "001").equals(rows(plain, "state", STATE))


def test_marginal_cells_are_sums_of_their_measured_cells(population):
    """Every derived cell equals the sum of the measured cells its definition lists (T3_DERIVED,
    T4_DERIVED, expanded down to measured cells), the measured cells clamped first."""
    release = run(population, clamp=True)
    tables = release.artifacts["group_tables"]
    checked = 0
    for table, derived_rules in (("T03", T3_DERIVED), ("T04", T4_DERIVED)):
        for k, rules in enumerate(derived_rules):
            part = tables.filter(pl.col("table") == f"{table}00{k + 1}")
            if not part.height or not rules:
                continue
            wide = part.pivot(on="cell", index=["level", "geoid", "iteration"], values="count")
            measured = part.filter(~pl.col("derived"))["cell"].unique().to_list()
            assert (wide.select([str(c) for c in measured]).to_numpy() >= 0).all()

            def leaves(cell: int, rules: dict[int, tuple[int, ...]] = rules) -> list[int]:
                return [x for c in rules[cell] for x in leaves(c)] if cell in rules else [cell]

            for cell in rules:
                parts = leaves(cell)
                assert set(parts) <= set(measured), (table, k, cell)
                total = sum(wide[str(c)] for c in parts)
                assert (wide[str(cell)] == total).all(), (table, k, cell)
                checked += 1
    assert checked >= 5


def test_only_groups_present_in_t01001_appear(population, plain):
    published = plain.artifacts["group_tables"].select("level", "geoid", "iteration").unique()
    present = []
    for gh in group_histograms(population, default_groups()):
        geo, it = np.nonzero(gh.t01001 > 0)
        geoids = population.geography.geoids(gh.geo_level)
        present.append(
            pl.DataFrame(
                {
                    "level": pl.Series([gh.geo_level] * len(geo), dtype=pl.String),
                    "geoid": geoids.gather(geo),
                    "iteration": pl.Series(gh.codes).gather(it),
                }
            )
        )
    expected = pl.concat(present)
    assert published.height == expected.height
    assert published.join(expected, on=["level", "geoid", "iteration"], how="anti").height == 0


def test_geounits_without_housing_units_are_dropped(population, plain):
    tract = population.units.filter(pl.col("unit_type") > 0)["block"].str.slice(0, 11)
    gq_tract = [t for t in tract.unique().to_list() if t[5:11] == "999900"]
    assert len(gq_tract) == 1
    assert rows(plain, "tract", gq_tract[0]).height  # its group-quarters persons are in T01001
    dropped = run(population, drop_no_housing=True)
    assert dropped.notes["geounits_without_housing_dropped"] == 1
    assert rows(dropped, "tract", gq_tract[0]).height == 0
    # every other cell is the plain release's, same noise
    kept = plain.artifacts["group_tables"].filter(
        ~((pl.col("level") == "tract") & (pl.col("geoid") == gq_tract[0]))
    )
    assert dropped.artifacts["group_tables"].sort(KEYS).equals(kept.sort(KEYS))
    assert MECHANISM.check(dropped, SafeTabHParameters(drop_no_housing=True)) is None
    card = dropped.card
    assert HOUSING_INVARIANT in card.guarantee.invariants
    assert card.guarantee.loss == plain.card.guarantee.loss


@pytest.mark.parametrize("t01001", ["exact", "noisy"])
def test_coterminous_units_publish_their_parents_counts(population, plain, t01001):
    release = run(population, coterminous=True, t01001=t01001)
    assert release.notes["coterminous_geounits"]["tract=county"] == 1
    state, county = rows(release, "state", STATE), rows(release, "county", STATE + "001")
    tract = release.artifacts["group_tables"].filter(
        (pl.col("level") == "tract") & pl.col("geoid").str.starts_with(STATE)
    )
    assert state.height and county.equals(state)
    assert tract.drop("level", "geoid").sort(KEYS[2:]).equals(state)
    if t01001 == "exact":  # the state's own cells are the plain release's: only copies change
        assert state.equals(rows(plain, "state", STATE))
        others = ~pl.col("geoid").str.starts_with(STATE) & (pl.col("level") != "county")
        same = release.artifacts["group_tables"].filter(others).sort(KEYS)
        assert same.equals(plain.artifacts["group_tables"].filter(others).sort(KEYS))
    else:
        totals = release.artifacts["group_totals"]

        def of(level: str, geoid: str) -> pl.DataFrame:
            mine = totals.filter((pl.col("level") == level) & (pl.col("geoid") == geoid))
            return mine.drop("level", "geoid").sort("iteration_level", "iteration")

        assert of("state", STATE).height
        assert of("county", STATE + "001").equals(of("state", STATE))
    p = SafeTabHParameters(coterminous=True, t01001=t01001)
    assert MECHANISM.check(release, p) is None
    assert (
        release.card.guarantee.loss
        == MECHANISM.guarantee(SafeTabHParameters(t01001=t01001)).guarantee.loss
    )
    assert any(c.startswith("coterminous (post-processing") for c in release.card.caveats)


def test_the_check_refuses_a_coterminous_unit_that_differs(population):
    release = run(population, coterminous=True)
    tables = release.artifacts["group_tables"]
    bumped = (pl.col("level") == "county") & (pl.col("geoid") == STATE + "001")
    release.artifacts["group_tables"] = tables.with_columns(
        count=pl.when(bumped).then(pl.col("count") + 1).otherwise(pl.col("count"))
    )
    problem = MECHANISM.check(release, SafeTabHParameters(coterminous=True))
    assert problem is not None and "parent's extent" in problem


def test_a_unit_keeps_its_own_cells_where_its_parents_level_is_not_measured(population):
    release = run(population, coterminous=True, rho_detailed_national=0)
    county = rows(release, "county", STATE + "001")
    assert county.filter(pl.col("iteration_level") == 2).height
    state = rows(release, "state", STATE)
    assert state.filter(pl.col("iteration_level") == 2).height == 0
    # level 1 is measured everywhere: copied
    assert county.filter(pl.col("iteration_level") == 1).equals(
        state.filter(pl.col("iteration_level") == 1)
    )
    tract = release.artifacts["group_tables"].filter(
        (pl.col("level") == "tract") & pl.col("geoid").str.starts_with(STATE)
    )
    assert tract.drop("level", "geoid").sort(KEYS[2:]).equals(county)


def test_derived_margin_and_the_card():
    rho, s = Fraction("0.142869"), 9
    assert derived_margin(rho, s, 1) == pytest.approx(1.96 * math.sqrt(9 / (2 * 0.142869)))
    assert derived_margin(rho, s, 4) == pytest.approx(2 * derived_margin(rho, s, 1))
    card = MECHANISM.guarantee(SafeTabHParameters())
    assert any("1.96·√(k·s/(2 rho))" in c for c in card.caveats)
    assert not any(c.startswith(("clamp", "coterminous", "drop_no")) for c in card.caveats)
    assert HOUSING_INVARIANT not in card.guarantee.invariants


def test_settings_parse_from_text_and_refuse_nonsense():
    p = MECHANISM.parse({"coterminous": "true", "drop_no_housing": "true"})
    assert p.coterminous and p.drop_no_housing
    with pytest.raises(InputError):
        MECHANISM.parse({"coterminous": "sometimes"})


def test_a_unit_whose_own_level_is_not_measured_gets_no_copy(population):
    """The parent measured, the child's level not (its ρ 0): nothing is copied into it, and
    the release passes its own check."""
    release = run(population, coterminous=True, rho_detailed_local=0)
    county = rows(release, "county", STATE + "001")
    assert county.filter(pl.col("iteration_level") == 2).height == 0
    assert rows(release, "state", STATE).filter(pl.col("iteration_level") == 2).height
    assert MECHANISM.check(release, MECHANISM.parse(release.parameters)) is None


def test_the_steps_read_no_person_data(population, plain):
    """Post-processing is a function of the noisy tables and public facts only: on the same
    noisy tables, a population whose persons' race, ethnicity and sex are shuffled gives the same
    output, every step on (the groups and tables are built from exactly those answers)."""
    from sdclab.protection.safetab_post import post_process

    rng = np.random.default_rng(0)
    race = ["race", "hispanic", "hispanic_origin", *[f"race_code{i}" for i in range(1, 9)]]
    persons = population.persons
    persons = persons.with_columns(persons[race][rng.permutation(persons.height)])
    persons = persons.with_columns(sex=persons["sex"].shuffle(seed=1))
    scrambled = Population(persons, population.units, population.blocks)
    assert not scrambled.persons.equals(population.persons)
    p = SafeTabHParameters(coterminous=True, drop_no_housing=True)
    tables = plain.artifacts["group_tables"]
    totals = [plain.artifacts["group_totals"]] if "group_totals" in plain.artifacts else []
    ours, our_totals, our_notes = post_process(tables, totals, population, p)
    theirs, their_totals, their_notes = post_process(tables, totals, scrambled, p)
    assert ours.equals(theirs) and our_notes == their_notes
    assert all(a.equals(b) for a, b in zip(our_totals, their_totals, strict=True))
