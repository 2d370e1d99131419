"""SafeTab-H: iterations, stability, adaptive variants, the noise and the card."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from sdclab import accounting, protection, schema
from sdclab.errors import InputError
from sdclab.population.synth import synthesize
from sdclab.protection.safetab_h import (
    VARIANTS,
    Group,
    SafeTabHParameters,
    default_groups,
    iterations,
    margin_of_error,
    rho_for_margin,
    stability,
    true_cells,
    variant,
)
from sdclab.release import read_release, write_release


@pytest.fixture(scope="module")
def population():
    return synthesize(30_000, seed=8)


@pytest.fixture(scope="module")
def release(population):
    return protection.run("safetab_h", population, {}, 2)


def test_margin_of_error_and_its_calibration():
    # docs/safetab_h.md, *Card*: ρ = 1.96²·s/(2·MOE²) = 17.287/MOE² for s = 9 gives the MOE back
    assert rho_for_margin(50, 9) == pytest.approx(17.287 / 2500, rel=1e-4)
    for moe in (1, 3, 11, 50, 100, 999):
        assert margin_of_error(Fraction(rho_for_margin(moe, 9)), 9) == moe
    assert margin_of_error(Fraction("1.9208"), 9) == 3
    assert margin_of_error(Fraction("0.142869"), 9) == 11


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
    assert release.card.budget.rho == pytest.approx(float(expected))
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
    assert release.card.budget.rho == pytest.approx(float(SafeTabHParameters().total_rho()) + 2)


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
