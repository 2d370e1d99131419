"""The baselines of a declared census (sdclab.attacks.census_baselines): the MDG and PRG files of
its releases, built from its own tables, and a declared census's experiment read against them."""

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import sdclab
from sdclab.attacks import census_baselines as b
from sdclab.censuses.eu2021 import census as eu_census
from sdclab.censuses.eu2021.synth import synthesize
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import encode_records, read_records
from sdclab.core.randomness import make_rng
from sdclab.pipeline import api
from sdclab.release import exact_release

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


@pytest.fixture(scope="module")
def eu():
    """3,000 synthetic EU persons and their exact release."""
    records = encode_records(eu_census(), synthesize(3_000, 7), "synthetic")
    return records, exact_release(records)


@pytest.fixture(scope="module")
def toyland():
    return read_records(load_census(TOYLAND / "census.toml"), TOYLAND / "persons.csv")


def by_geounit_and_cell(frame: pl.DataFrame, columns: list[str]) -> dict[tuple, int]:
    counted = frame.group_by(b.GEOUNIT, *columns).len()
    return {tuple(row[:-1]): row[-1] for row in counted.iter_rows()}


def test_the_eu_plan_reads_its_lau_hypercubes(eu):
    """3.1 crosses SEX and AGE (the first of the two tables crossing two quasi-identifiers), LMS
    is guessed from 3.3 and HST from 3.2, both at the LAU."""
    records, release = eu
    plan = b.plan(records.census, tuple(release.tables))
    assert isinstance(plan, b.Plan)
    assert plan.records.table == "3.1" and plan.given == ("SEX", "AGE")
    assert {a: (s.cells.table, s.level) for a, s in plan.sources.items()} == {
        "HST": ("3.2", "lau"),
        "LMS": ("3.3", "lau"),
    }


def test_the_mdg_file_holds_as_many_records_per_geounit_as_a_noisy_table_publishes(toyland):
    """Toyland's records table is T3 (the village table crossing age); a noisy release's counts
    are read as published: rounded, negative ones as 0."""
    release = api.protect(toyland, "geometric", seed=3, epsilon=1)
    plan = b.plan(toyland.census, tuple(release.tables))
    assert isinstance(plan, b.Plan) and plan.records.table == "T3"
    mdg = b.baseline_records(release, plan, "mdg", make_rng(1))
    noisy = release.tables["T3"].dense("village", suppressed=0)
    assert (noisy < 0).any()  # noise to clip
    counts = np.maximum(np.rint(noisy), 0).astype(np.int64)
    # T3's cells: age.broad (3) × country of birth, the second fastest
    per_cob = counts.reshape(counts.shape[0], 3, -1).sum(axis=1)
    cob = toyland.census.attribute("country_of_birth").codes
    geoids = release.geography.geoids("village").to_list()
    expected = {
        (geoids[u], cob[k]): int(per_cob[u, k]) for u, k in zip(*np.nonzero(per_cob), strict=True)
    }
    assert by_geounit_and_cell(mdg, ["country_of_birth"]) == expected
    # age is known to its broad group only: null, never linked on a first year (as the
    # reconstruction leaves it); sex comes from T2 at the district
    assert mdg["age"].null_count() == mdg.height and mdg["sex"].null_count() == 0


def test_the_eu_mdg_file_follows_3_1_and_guesses_the_mode_given_sex(eu):
    records, release = eu
    plan = b.plan(records.census, tuple(release.tables))
    mdg = b.baseline_records(release, plan, "mdg", make_rng(1))
    census = records.census
    truth = pl.DataFrame(
        {
            b.GEOUNIT: records.geography.geoids("lau").gather(
                records.geography.units("lau")[1][records.block_index("persons")]
            ),
            "SEX": np.asarray(census.attribute("SEX").codes)[records.attributes["SEX"]],
            "AGE_M": np.argmax(census.attribute("AGE").breakdown("M").membership, axis=0)[
                records.attributes["AGE"]
            ],
            "LMS_L": np.argmax(census.attribute("LMS").breakdown("L").membership, axis=0)[
                records.attributes["LMS"]
            ],
        }
    )
    age_m = np.argmax(census.attribute("AGE").breakdown("M").membership, axis=0)
    position = census.attribute("AGE").position
    mine = mdg.with_columns(
        AGE_M=pl.col("AGE").replace_strict({c: int(age_m[position[c]]) for c in position})
    )
    assert by_geounit_and_cell(mine, ["SEX", "AGE_M"]) == by_geounit_and_cell(
        truth, ["SEX", "AGE_M"]
    )
    # where a LAU's sex has a unique modal LMS.L over at least two persons, MDG guesses it
    counts = truth.group_by(b.GEOUNIT, "SEX", "LMS_L").len()
    top = counts.group_by(b.GEOUNIT, "SEX").agg(
        persons=pl.col("len").sum(),
        mode=pl.col("LMS_L").sort_by("len").last(),
        ties=(pl.col("len") == pl.col("len").max()).sum(),
    )
    clear = top.filter((pl.col("persons") >= 2) & (pl.col("ties") == 1))
    assert clear.height > 20
    lms_l = np.argmax(census.attribute("LMS").breakdown("L").membership, axis=0)
    lms = census.attribute("LMS").position
    guessed = (
        mdg.with_columns(guess=pl.col("LMS").replace_strict({c: int(lms_l[lms[c]]) for c in lms}))
        .group_by(b.GEOUNIT, "SEX")
        .agg(pl.col("guess").unique())
    )
    joined = clear.join(guessed, on=[b.GEOUNIT, "SEX"])
    assert joined.height == clear.height
    assert joined["guess"].list.len().eq(1).all()  # one guess per LAU and sex
    assert (joined["guess"].list.first() == joined["mode"]).all()


def test_the_modal_guess_falls_back_up_the_levels_on_a_hand_built_example():
    """Counts of three categories for four records: a clear mode; a tie (to the parent's mode);
    a single person (to the parent's, at the reconstruction's level); nothing anywhere (to the
    national mode)."""
    here = np.array([[5, 1, 0], [2, 2, 0], [0, 0, 1], [0, 0, 0]])
    parent = np.array([[0, 0, 9], [1, 4, 0], [3, 0, 0], [0, 0, 0]])
    national = np.tile([1, 7, 2], (4, 1))
    assert b.modal([here, parent], national, at_bottom=True).tolist() == [0, 1, 0, 1]
    # above the reconstruction's level one person is enough
    assert b.modal([here, parent], national, at_bottom=False).tolist() == [0, 1, 2, 1]


def test_a_guess_is_conditioned_on_the_attributes_both_tables_cross():
    """Records of SEX × AGE (2 × 2) against a source of SEX × LMS (2 × 3): a record's guess
    reads only the source cells of its own sex."""
    eye2 = np.eye(2, dtype=np.int8)
    records = b.Cells("R", ("SEX", "AGE"), (eye2, eye2), ("lau",))
    source = b.Cells("S", ("SEX", "LMS"), (eye2, np.eye(3, dtype=np.int8)), ("lau",))
    compat = b.compatible(records, source)
    sex_of_record = records.categories()[:, 0]
    sex_of_source = source.categories()[:, 0]
    assert (compat == (sex_of_record[:, None] == sex_of_source[None, :])).all()


def test_prg_draws_follow_the_published_distribution(eu):
    """Over every record of a LAU and sex, the PRG's LMS.L draws count, in each category, the
    sum over the LAU's and sex's records of the published share p; their standard deviation is
    at most √Σ p(1 − p): every category's count lies within 5 of them (seeded)."""
    records, release = eu
    plan = b.plan(records.census, tuple(release.tables))
    prg = b.baseline_records(release, plan, "prg", make_rng(11))
    census = records.census
    lms_l = np.argmax(census.attribute("LMS").breakdown("L").membership, axis=0)
    lms = census.attribute("LMS").position
    drawn = prg.with_columns(k=pl.col("LMS").replace_strict({c: int(lms_l[lms[c]]) for c in lms}))
    n_lms = census.attribute("LMS").breakdown("L").size
    table = b.whole(release.tables["3.3"].dense("lau", suppressed=0)).reshape(-1, 2, n_lms)
    geoids = release.geography.geoids("lau").to_list()
    sexes = census.attribute("SEX").codes
    units = {g: i for i, g in enumerate(geoids)}
    n = drawn.group_by(b.GEOUNIT, "SEX").len()
    unit = np.array([units[g] for g in n[b.GEOUNIT]])
    sex = np.array([sexes.index(s) for s in n["SEX"]])
    counts = table[unit, sex]
    share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    assert (counts.sum(axis=1) > 0).all()  # no fallback needed in the exact tables
    expected = (n["len"].to_numpy()[:, None] * share).sum(axis=0)
    sd = np.sqrt((n["len"].to_numpy()[:, None] * share * (1 - share)).sum(axis=0))
    observed = np.bincount(drawn["k"].to_numpy(), minlength=n_lms)
    assert (np.abs(observed - expected) <= 5 * sd + 1e-9).all()
    assert not np.array_equal(observed, np.round(expected))  # drawn, not the mode's spread


EXPERIMENT = """
[population]
census = "eu2021"
persons = 3000
seed = 1

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "geometric"
settings = { epsilon = 4 }

[attacks]
attackers = ["census"]
workers = 1
"""


def test_a_declared_census_experiment_has_baselines_a_headline_and_a_choice(tmp_path):
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    results = sdclab.run_experiment(tmp_path / "exp.toml", tmp_path / "out")
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    for title in ("none", "geometric"):
        reid = written["mechanisms"][title]["reidentification"]["census"]
        assert reid["baselines"] == "computed"
        for method in ("mdg", "prg", "mdg_exact", "prg_exact", "random_draw", "confidential"):
            assert reid[method]["all"]["attacker_records"] == 3000
        assert reid["confidential"]["all"]["confirmed_rate"] > 0.9
        head = reid["headline"]["all"]
        assert isinstance(head["points"], float)
        assert head["best_baseline"] in ("mdg", "prg", "mdg_exact", "prg_exact", "random_draw")
        assert "swapped" not in reid
    assert results["none"].evaluation.reidentification["census"].baselines()
    report = (tmp_path / "out" / "report.html").read_text()
    choose = report[report.index('id="choose-a-method"') :]
    choose = choose[: choose.index("</section>")]
    assert "n/a: the choose table" not in choose
    assert "confirmed beyond the best baseline, census attacker (pp)" in choose
    assert "lowest-risk protecting setting" in choose
    headline = report[report.index('id="headline-risk"') : report.index('id="noise-aware')]
    assert "The baselines of census eu2021 are made from its own tables" in headline
    assert "(best: " in headline and " pp / " in headline


def test_the_random_draw_states_what_the_reconstruction_resolves(eu):
    """AGE is solved to five-year groups only: a random record states a group (its first and last
    year), drawn from the persons' groups, not a single year the reconstruction never states."""
    records, _ = eu
    drawn = b.fixed_files(records, make_rng(3))["random_draw"]
    groups = eu_census().attribute("AGE").breakdown("M")
    assert (drawn["AGE_min"] != drawn["AGE_max"]).any()
    assert set(drawn["AGE_min"].unique()) <= set(_first_codes(groups))
    assert drawn.height == records.n_persons


def _first_codes(breakdown) -> list[str]:
    codes = eu_census().attribute("AGE").codes
    return [codes[int(np.flatnonzero(row)[0])] for row in breakdown.membership]
