"""SafeTab-H: iterations, stability, adaptive variants, the noise and the card."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from sdclab import protection
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.censuses.us2010.safetab_groups import Group, default_groups, iterations, stability
from sdclab.core import accounting
from sdclab.core.errors import InputError
from sdclab.pipeline.api import read_release
from sdclab.protection.safetab_h import (
    SafeTabHParameters,
    margin_coverage,
    margin_of_error,
    rho_for_margin,
    true_cells,
)
from sdclab.protection.safetab_tables import VARIANTS, variant
from sdclab.release import write_release


@pytest.fixture(scope="module")
def population():
    return synthesize(30_000, seed=8)


@pytest.fixture(scope="module")
def release(population):
    return protection.run("safetab_h", population, {}, 2)


def test_margin_of_error_is_exact_and_its_calibration_inverts_it():
    # the production level-1 budget: 1.96·σ = 49.999 (σ² = 650.8) covers 94.77% at ±49 but the
    # exact discrete Gaussian needs ±50, at 95.23%
    level1 = Fraction("0.006915")
    assert margin_of_error(level1, 9) == 50
    assert margin_coverage(level1, 9) == pytest.approx(0.9523, abs=5e-5)
    sigma2 = Fraction(9) / (2 * level1)
    assert 1 - accounting.gaussian_tail(sigma2, 49) < 0.95  # ±49 would undercover
    for moe in (1, 3, 11, 50, 100, 999):
        rho = rho_for_margin(moe, 9)
        assert margin_of_error(Fraction(rho), 9) == moe
        assert margin_of_error(Fraction(rho * 0.999), 9) == moe + 1  # the smallest such ρ
    assert margin_of_error(Fraction("1.9208"), 9) == 3
    assert margin_of_error(Fraction("0.142869"), 9) == 11


def test_every_margin_on_the_card_covers_at_least_95_percent():
    for t01001 in ("exact", "noisy"):
        card = protection.get("safetab_h").guarantee(SafeTabHParameters(t01001=t01001))
        for row in card.allocation:
            assert row["coverage"] >= 0.95, row
            sigma2 = row["sigma2"]
            assert 1 - accounting.gaussian_tail(sigma2, row["95% MOE"] - 1) < 0.95, row


def test_variant_selection_at_the_thresholds():
    counts = np.array([0, 970, 971, 4970, 4971, 19970, 19971, 10**6], dtype=float)
    assert variant(counts, (971, 4971, 19971)).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert variant(counts, (971,)).tolist() == [0, 0, 1, 1, 1, 1, 1, 1]


def test_stability_of_the_default_mapping_and_of_a_code_in_two_iterations(population, tmp_path):
    groups = default_groups()
    assert stability(groups, 1) == stability(groups, 2) == 9  # 1·8 + 1, as in production
    doubled = (*groups, Group("X1", "Chinese or Filipino", 2, "race", (4001, 4002)))
    assert stability(doubled, 2) == 2 * 8 + 1
    file = tmp_path / "iterations.toml"
    file.write_text(
        "".join(
            f'[[group]]\ncode = "{g.code}"\nname = "{g.name}"\nlevel = {g.level}\n'
            f'kind = "{g.kind}"\ncodes = {list(g.codes)}\n'
            for g in doubled
        )
    )
    with pytest.raises(InputError, match="stability 17 at level 2"):
        protection.run("safetab_h", population, {"iterations": str(file)}, 1)
    release = protection.run("safetab_h", population, {"iterations": str(file), "stability": 17}, 1)
    assert "X1C" in set(release.artifacts["group_tables"]["iteration"])


def test_membership_against_a_direct_reading_of_the_rules():
    groups = (
        Group("W", "White", 1, "race", (1000, 1001, 1002)),
        Group("A", "Asian", 1, "race", (4000, 4001)),
        Group("C", "Chinese", 1, "race", (4001,)),
        Group("H", "Hispanic", 1, "ethnicity", (1, 2)),
    )
    race = np.array(
        [[1001, 0, 0], [1001, 1002, 0], [1001, 4001, 0], [4001, 0, 0], [4000, 4001, 0]],
        dtype=np.int16,
    )
    origin = np.array([0, 1, 0, 2, 0])
    its = iterations(groups, 1, race, origin)
    got = {i: {its.codes[j] for j in its.membership[i].indices} for i in range(len(race))}
    assert got[0] == {"WA", "WC"}
    assert got[1] == {"WA", "WC", "H"}  # German and English: both white
    assert got[2] == {"WC", "AC", "CC"}  # white and Chinese: no "alone"
    assert got[3] == {"AA", "AC", "CA", "CC", "H"}
    assert got[4] == {"AA", "AC", "CC"}  # Asian + Chinese: Asian alone, Chinese in combination


def test_household_groups_follow_the_householder(population, release):
    """Independent check of the T03001/T04001 totals on the nation: households whose
    householder's codes put them in an iteration, counted record by record."""
    groups = {g.code: g for g in default_groups() if g.level == 1}
    head = population.householder_row[population.household_type > 0]
    codes = population.race_codes[head]
    expected = {}
    for g in ("R1", "R4"):
        members = set(groups[g].codes)
        alone = sum(all(c in members for c in row if c) for row in codes)
        combination = sum(any(c in members for c in row if c) for row in codes)
        expected[f"{g}A"], expected[f"{g}C"] = alone, combination
    truth = true_cells(population, release).filter(
        (pl.col("level") == "nation")
        & (pl.col("iteration_level") == 1)
        & (pl.col("cell") == 0)
        & pl.col("table").str.starts_with("T04")
    )
    got = dict(zip(truth["iteration"], truth["true"], strict=True))
    for code, count in expected.items():
        assert got[code] == count


def test_errors_follow_the_discrete_gaussian(population):
    errors = []
    for seed in (1, 2, 3):
        release = protection.run("safetab_h", population, {}, seed)
        cells = true_cells(population, release).filter(
            ~pl.col("derived") & (pl.col("iteration_level") == 2) & (pl.col("level") == "tract")
        )
        errors.append((cells["count"] - cells["true"]).to_numpy())
    x = np.concatenate(errors)
    sigma2 = Fraction(9) / (2 * Fraction("0.142869"))
    n = len(x)
    assert n > 1000
    variance = accounting.discrete_gaussian_variance(sigma2)
    assert abs(x.mean()) < 4 * math.sqrt(variance / n)
    for bound in (2, 5, 11):  # Pr(|x| ≤ b) against the exact distribution, binomial tolerance
        p = 1 - accounting.gaussian_tail(sigma2, bound)
        observed = (np.abs(x) <= bound).mean()
        assert abs(observed - p) < 4 * math.sqrt(p * (1 - p) / n), bound


def test_variants_derived_cells_and_absent_groups(population, release):
    tables = release.artifacts["group_tables"]
    assert set(tables["table"]) <= {"T03001", "T03002", "T03003", "T03004", "T04001", "T04002"}
    kinds = tables.with_columns(kind=pl.col("table").str.slice(0, 3))
    one_variant = kinds.group_by("level", "geoid", "iteration", "kind").agg(
        variants=pl.col("table").n_unique()
    )
    assert (one_variant["variants"] == 1).all()  # each group written once, in one variant
    sums = {
        "T03002": {"0": ("1", "6")},
        "T03003": {"1": ("2", "3"), "6": ("7", "8"), "0": ("1", "6")},
        "T03004": {"3": ("4", "5"), "1": ("2", "3"), "6": ("7", "8"), "0": ("1", "6")},
        "T04002": {"0": ("1", "2", "3")},
    }
    checked = 0
    for name, rules in sums.items():
        wide = tables.filter(pl.col("table") == name).pivot(
            on="cell", index=["level", "geoid", "iteration"], values="count"
        )
        for total, parts in rules.items():
            if wide.height:
                assert (wide[total] == sum(wide[c] for c in parts)).all(), (name, total)
                checked += 1
    assert checked >= 3
    # a cell is a query row over household type × tenure: T03004's cell 0 is every household
    every = VARIANTS["T03"][3]
    row = every.table.query[every.cells.index(0)]
    assert set(schema.HOUSEHOLD.decode(row.indices)["household_type"]) == {1, 2, 3, 4, 5}
    assert row.nnz == 5 * schema.TENURE.size
    # only groups with persons (T01001 > 0) get tables
    truth = true_cells(population, release)
    assert truth.height == tables.height
    groups_published = tables.select("level", "geoid", "iteration").unique().height
    assert groups_published == release.notes["groups_with_tables"]


def test_card_budget_and_round_trip(release, tmp_path):
    p = SafeTabHParameters()
    expected = 2 * (4 * Fraction("0.006915") + 2 * Fraction("1.9208") + 2 * Fraction("0.142869"))
    assert p.total_rho() == expected
    assert release.card.guarantee.loss.rho == 2 * expected  # T01001 fixed: a household replaced
    assert release.card.guarantee.relation == "replace"
    assert any("T01001" in c for c in release.card.caveats)
    moes = {(r["iteration level"], r["region"]): r["95% MOE"] for r in release.card.allocation}
    assert moes[2, "USA"] == 3 and moes[2, "TRACT"] == 11
    write_release(release, tmp_path / "rel")
    again = read_release(tmp_path / "rel")
    assert again.artifacts["group_tables"].equals(release.artifacts["group_tables"])
    assert sorted(again.artifacts) == ["group_tables"]  # T01001 exact: no group totals
    assert (tmp_path / "rel" / "artifacts" / "group_tables.parquet").is_file()


def test_noisy_t01001_adds_its_budget(population, tmp_path):
    release = protection.run("safetab_h", population, {"t01001": "noisy", "t01001_rho": "2"}, 4)
    assert release.artifacts["group_totals"].height > 0
    write_release(release, tmp_path / "rel")
    back = read_release(tmp_path / "rel").artifacts["group_totals"]
    assert back.equals(release.artifacts["group_totals"])
    household = SafeTabHParameters().total_rho()
    assert release.card.guarantee.loss.rho == household + 20**2 * 2  # a 20-person household
    assert release.card.guarantee.person_replace.rho == 4 * household + 2 * 2


def test_needs_detailed_codes(tiny_population):
    with pytest.raises(InputError, match="detailed race"):
        protection.run("safetab_h", tiny_population, {}, 1)


def test_thresholds_from_a_file(population, tmp_path):
    file = tmp_path / "thresholds.toml"
    lines = []
    for region in ("USA", "STATE", "COUNTY", "TRACT"):
        for level in (1, 2):
            lines.append(
                f'[[threshold]]\nregion = "{region}"\nlevel = {level}\nT03 = [0, 0, 0]\nT04 = [0]\n'
            )
    file.write_text("".join(lines))
    release = protection.run("safetab_h", population, {"thresholds": str(file)}, 1)
    # every group present gets the most detailed variants
    assert set(release.artifacts["group_tables"]["table"]) == {"T03004", "T04002"}
    file.write_text(lines[0])
    with pytest.raises(InputError, match="no thresholds for"):
        protection.run("safetab_h", population, {"thresholds": str(file)}, 1)


# ---------------------------------------------------------------------------------------------
# One person's change: a threshold crossing, and a move between two households
# ---------------------------------------------------------------------------------------------

THETA = (1, 2, 3)
"""Small T03 thresholds at level 2 (T04: θ3), so that a three-person group sits at θ3."""


def _crossing_thresholds() -> list[dict]:
    from sdclab.censuses.us2010.safetab_groups import PRODUCTION_THRESHOLDS, thresholds_data

    table = dict(PRODUCTION_THRESHOLDS)
    for region in ("USA", "STATE", "COUNTY", "TRACT"):
        table[region, 2] = {"T03": THETA, "T04": (THETA[2],)}
    return thresholds_data(table)


def _household(head_code: int):
    """One tract, one household of three persons of detailed race 1001 but for the
    householder, whose code is ``head_code``."""
    from sdclab.protection import audit_plans

    def codes(code: int) -> dict:
        return {"race_code1": code, "hispanic_origin": 0} | {
            f"race_code{i}": None for i in range(2, 9)
        }

    people = [
        audit_plans.person(0, 0, 0, **codes(head_code)),
        audit_plans.person(1, 0, 0, relationship=1, sex=2, **codes(1001)),
        audit_plans.person(2, 0, 0, relationship=2, age=10, **codes(1001)),
    ]
    overrides = {f"race_code{i}": pl.Int16 for i in range(1, 9)}
    return audit_plans.replicate(
        pl.DataFrame(people, schema_overrides=overrides),
        pl.DataFrame([audit_plans.unit(0, 0)]),
        1,
    )


def _level2(population, p):
    from sdclab.protection.safetab_tables import group_histograms

    return {gh.region: gh for gh in group_histograms(population, p.groups()) if gh.level == 2}


def test_a_householders_race_change_across_theta3_is_covered_by_the_replace_budget():
    from sdclab.protection.safetab_tables import VARIANTS, variant

    p = SafeTabHParameters.model_validate({"t01001": "noisy", "thresholds": _crossing_thresholds()})
    d, d_prime = _household(1001), _household(1002)  # D′: the householder's code changed
    before, after = _level2(d, p), _level2(d_prime, p)
    s = stability(p.groups(), 2)
    column = before["TRACT"].codes.index("D1001A")
    # the adaptive choice: D1001 has θ3 = 3 persons in D (every detail), 2 in D′ (one less)
    assert before["TRACT"].t01001[0, column] == THETA[2]
    assert after["TRACT"].t01001[0, column] == THETA[2] - 1
    assert variant(np.array([3.0]), THETA)[0] == 3 and variant(np.array([2.0]), THETA)[0] == 2
    # the noisy T01001 decides: given the same noisy value both datasets measure the same
    # variant, and the change of the combined table vector is the household leaving its groups'
    # cells (D1001 alone, D1001 alone or in combination) and entering D1002's: per table and
    # region type ‖Δ‖² = 2 × 2 = 4, inside the 2s a household replace may reach
    divergence = Fraction(0)  # D_α / α of the whole release, both parts
    for region, gh in before.items():
        rho = p.rho(region, 2)
        for variants in VARIANTS.values():
            worst = 0
            for v in variants:  # every variant the noisy choice may make
                rows = np.arange(gh.households.shape[0])
                change = after[region].cells(v, rows) - gh.cells(v, rows)
                change = change[:, np.asarray(v.measured)]  # derived cells are post-processing
                norm2 = int((change**2).sum())
                assert norm2 == 4 and norm2 <= 2 * s
                worst = max(worst, norm2)
            # D_α of a Gaussian with σ² = s/(2ρ) is α‖Δ‖²/(2σ²) = α ρ ‖Δ‖² / s
            divergence += rho * worst / s
        t_share = Fraction(p.t01001_rho) / 8  # T01001's ρ per region type and level
        t_change = after[region].t01001 - gh.t01001
        divergence += t_share * int((t_change**2).sum()) / s
    replace = protection.get("safetab_h").guarantee(p).guarantee.person_replace.rho
    assert divergence <= replace  # adaptive composition: T01001's part plus the tables' part
    assert replace == 4 * p.total_rho() + 2 * Fraction(p.t01001_rho)


def test_a_person_moving_between_two_households_needs_more_than_one_household_replace():
    from sdclab.protection import audit_plans
    from sdclab.protection.safetab_h import _audit_codes
    from sdclab.protection.safetab_tables import VARIANTS

    def tract(spouse_unit: int, spouse_relationship: int):
        # A: a married couple with a child; B: a man living alone; the spouse may move to B
        people = [
            audit_plans.person(0, 0, 0, **_audit_codes(1001)),
            audit_plans.person(
                1, spouse_unit, 0, relationship=spouse_relationship, sex=2, **_audit_codes(1001)
            ),
            audit_plans.person(2, 0, 0, relationship=2, age=10, **_audit_codes(1001)),
            audit_plans.person(3, 1, 0, age=50, **_audit_codes(1001)),
        ]
        units = [audit_plans.unit(0, 0), audit_plans.unit(1, 0)]
        overrides = {f"race_code{i}": pl.Int16 for i in range(1, 9)}
        return audit_plans.replicate(
            pl.DataFrame(people, schema_overrides=overrides), pl.DataFrame(units), 1
        )

    p = SafeTabHParameters()
    before, after = _level2(tract(0, 1), p), _level2(tract(1, 3), p)  # spouse → other relative
    s = stability(p.groups(), 2)
    for region, gh in before.items():
        rows = np.arange(gh.households.shape[0])
        groups = int((gh.cells(VARIANTS["T03"][0], rows) > 0).sum())  # the households' groups
        for v in VARIANTS["T03"][2:]:  # the variants that tell the household types apart
            change = (after[region].cells(v, rows) - gh.cells(v, rows))[:, list(v.measured)]
            norm2 = int((change**2).sum())
            # one household replaced moves ‖Δ‖² = 2 per group; two households move more —
            # A (married couple → other family) and B (alone → other family): 6 per group
            assert norm2 == 6 * groups and norm2 > 2 * groups, (region, v.name, norm2)
            assert norm2 <= 8 * s  # the bound of the person-replace loss 4ρ_H
    card = protection.get("safetab_h").guarantee(p)
    assert card.guarantee.person_replace.rho == 4 * p.total_rho()


def test_with_an_exact_t01001_a_threshold_crossing_has_infinite_divergence():
    p = {"t01001": "exact", "thresholds": _crossing_thresholds()}
    tables = [
        protection.run("safetab_h", _household(code), p, 7).artifacts["group_tables"]
        for code in (1001, 1002)
    ]
    published = [set(t.filter(pl.col("iteration") == "D1001A")["table"].unique()) for t in tables]
    # the variant follows the exact count: D publishes T03004 for D1001, D′ T03003 — every
    # output of D has probability 0 under D′ and the Rényi divergence is infinite
    assert "T03004" in published[0] and "T03004" not in published[1]
    assert "T03003" in published[1] and "T03003" not in published[0]
    card = protection.get("safetab_h").guarantee(SafeTabHParameters.model_validate(p))
    assert any("infinite" in c for c in card.caveats)
    assert card.guarantee.relation == "replace"
    assert card.guarantee.invariants[0].statistic.startswith("T01001")
