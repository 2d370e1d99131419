"""TopDown over a declared census: its hierarchy, its tables, its product."""

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab.core.census.declare import load_census
from sdclab.core.census.records import read_records
from sdclab.core.errors import InputError
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline import api

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


@pytest.fixture(scope="module")
def records():
    census = load_census(TOYLAND / "census.toml")
    return read_records(census, TOYLAND / "persons.csv")


@pytest.fixture(scope="module")
def release(records):
    return api.protect(records, "topdown", seed=3)


def test_the_product_measures_the_census_tables_with_an_even_strategy(records):
    from sdclab.protection.topdown import declared_product

    product = declared_product(records.census)
    # T1 asks the total again: measured once, as TopDown's own total
    assert product.query_names == ("total", "T2", "T3", "T4", "detailed")
    assert product.schema.names == ("sex", "age", "country_of_birth")
    assert product.schema.size == 2 * 100 * 6
    strategy = product.default
    assert strategy.levels == ("region", "district", "village")
    assert strategy.total_rho() == Fraction(153, 10)
    # the total is invariant at the top; T2 and T4 stop at district, T3 reaches the villages
    assert strategy.measured("region") == ["T2", "T3", "T4", "detailed"]
    assert strategy.measured("district") == ["total", "T2", "T3", "T4", "detailed"]
    assert strategy.measured("village") == ["total", "T3", "detailed"]
    assert strategy.rho_of("T3", "village") == Fraction(153, 10) / 3 / 3


def test_topdown_keeps_the_invariants_and_publishes_consistent_tables(records, release):
    truth = tabulate(records)
    assert set(release.tables) == {"T1", "T2", "T3", "T4"}
    # each region's total is invariant; below, totals move but add up
    regions = release.table("T1").matrix("region").toarray().ravel()
    assert regions.tolist() == truth["T1"].counts["region"][1].toarray().ravel().tolist()
    for name in release.tables:
        table = release.table(name)
        levels = table.levels
        for upper, lower in zip(levels[:-1], levels[1:], strict=False):
            step = records.geography.containment(upper, lower)
            assert (step @ table.matrix(lower) != table.matrix(upper)).nnz == 0, (name, lower)
    # the tables are the MDF's, whose codes are the census's
    mdf = release.artifacts["mdf"]
    assert mdf.columns == ["person_id", "block", "sex", "age", "country_of_birth"]
    assert mdf.height == records.n_persons
    by_village = mdf.group_by("block").len().sort("block")
    t1 = release.table("T1")
    assert dict(
        zip(t1.geoids("village").to_list(), t1.dense("village")[:, 0].tolist(), strict=True)
    ) == dict(by_village.rows())
    assert set(mdf["country_of_birth"]) <= set(records.census.attribute("country_of_birth").codes)
    assert release.protection.protects
    invariants = release.card.guarantee.invariants
    assert [i.text() for i in invariants] == ["total population (every region)"]
    assert release.notes["problems_per_level"] == {"region": 2, "district": 2, "village": 4}


def test_the_measurements_are_those_of_the_strategy(records, release):
    frame = release.artifacts["measurements"]
    from sdclab.protection.topdown import declared_product

    strategy = declared_product(records.census).default
    for level in strategy.levels:
        asked = set(frame.filter(pl.col("level") == level)["query"])
        assert asked == set(strategy.measured(level)), level
    assert set(frame["geoid"]) <= set(records.geography.geoids("village")) | set(
        records.geography.geoids("district")
    ) | set(records.geography.geoids("region"))


def test_a_declared_topdown_release_reads_back_and_is_attacked_with_its_measurements(
    tmp_path, records, release
):
    from sdclab.attacks.reconstruction import used_measurements
    from sdclab.pipeline.api import read_release
    from sdclab.release import write_release

    write_release(release, tmp_path / "release")
    meta = json.loads((tmp_path / "release" / "release.json").read_text())
    assert "product" not in meta["parameters"]  # a declared census has one product, its own
    back = read_release(tmp_path / "release")
    assert back.census.digest == records.census.digest
    for name in release.tables:
        for level in release.table(name).levels:
            assert (back.table(name).matrix(level) != release.table(name).matrix(level)).nnz == 0
    village, district = used_measurements(back, "published")
    assert set(village) == {"toyland:total", "toyland:T3", "toyland:detailed"}
    assert "toyland:T4" in district
    rebuilt = api.reconstruct(back, workers=1, node_limit=2000)
    assert set(rebuilt.tracts["mode"]) == {"noise-aware"} and rebuilt.persons.height > 0
    evaluation = api.evaluate(back, records, reconstruction=rebuilt)
    assert evaluation.microdata_agreement.all.persons == records.n_persons  # the MDF, matched
    assert evaluation.reconstruction_agreement.all.persons == records.n_persons


def test_a_forged_code_in_a_declared_mdf_is_refused(tmp_path, release):
    from sdclab.pipeline.api import read_release
    from sdclab.release import write_release

    write_release(release, tmp_path / "release")
    file = tmp_path / "release" / "artifacts" / "mdf.parquet"
    mdf = pl.read_parquet(file)
    mdf.with_columns(country_of_birth=pl.lit("XX")).write_parquet(file)
    with pytest.raises(InputError, match=r"country_of_birth 'XX' is not one of the census's codes"):
        read_release(tmp_path / "release")


def test_a_histogram_too_large_to_measure_is_refused_in_words(wide_census):
    names = [f"topic{i}" for i in range(7)]
    census = wide_census(7, {"A": names}, ["topic0"])
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({n: rng.integers(0, 10, 50).astype(str) for n in names}).with_columns(
        place=pl.Series(rng.integers(0, 4, 50).astype(str)), area=pl.lit("a")
    )
    from sdclab.core.census.records import encode_records

    wide = encode_records(census, frame, "wide.csv")
    with pytest.raises(InputError, match=r"has 10,000,000 cells, more than the 4,194,304"):
        api.protect(wide, "topdown", seed=1)


def test_the_command_line_runs_topdown_on_a_declared_census(tmp_path):
    def protect(out: str, *settings: str) -> subprocess.CompletedProcess[str]:
        census = ["--census", str(TOYLAND / "census.toml")]
        command = ["protect", str(TOYLAND / "persons.csv"), *census, "-m", "topdown"]
        return subprocess.run(
            [sys.executable, "-m", "sdclab", *command, *settings, "--out", out],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    done = protect("release", "--seed", "3", "--set", "rho=4")
    assert done.returncode == 0, done.stderr
    assert "rho = 4" in done.stdout
    refused = protect("other", "--set", "product=pl94")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "a setting for the US 2010 census only" in refused.stderr
    assert not (tmp_path / "other").exists()


def test_sdclab_budget_answers_for_a_declared_census():
    def budget(*args: str) -> subprocess.CompletedProcess[str]:
        census = ["--census", str(TOYLAND / "census.toml")]
        return subprocess.run(
            [sys.executable, "-m", "sdclab", "budget", *args, *census],
            capture_output=True,
            text=True,
        )

    # the default strategy: ρ 4 over 3 levels, 5 queries at a district: σ² = 15/4
    done = budget("topdown", "--level", "district", "--query", "T2", "--budget", "4")
    assert done.returncode == 0, done.stderr
    assert "topdown, T2 at district: at rho (zCDP) 4 → σ² = 3.75" in done.stdout
    # T1 is no query of its own (it asks the total): answered from the total
    done = budget("topdown", "--level", "village", "--query", "T1", "--budget", "4", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["query"] == "total"
    # the geometric split over the census's four tables: a district's ε/3/4, Δ₁ 1
    done = budget("geometric", "--level", "district", "--query", "T2", "--budget", "1")
    assert done.returncode == 0 and "scale 12," in done.stdout
    refusals = [
        (
            ("geometric", "--level", "block", "--query", "T2", "--budget", "1"),
            "expected one of region, district, village",
        ),
        (
            ("geometric", "--level", "village", "--query", "P12", "--budget", "1"),
            "table 'P12': not a table of census toyland",
        ),
        (
            ("safetab_h", "--level", "regional", "--budget", "1"),
            "its budget is for the US 2010 census's tables",
        ),
    ]
    for args, message in refusals:
        refused = budget(*args)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


def test_a_tally_table_is_published_but_not_measured(tmp_path):
    # a breakdown that counts a person in two categories: Δ₂² of its query is 4, not 2
    import shutil

    folder = tmp_path / "toyland"
    shutil.copytree(TOYLAND, folder)
    text = (folder / "census.toml").read_text()
    tally = (
        "\n[attributes.country_of_birth.breakdowns.tally]\n"
        'home = ["DOM"]\nabroad = ["EU", "EUR", "AFR", "ASI", "AME"]\n'
        'anywhere = ["DOM", "EU", "EUR", "AFR", "ASI", "AME"]\n'
        '\n[tables.T6]\ntitle = "Born at home, abroad, anywhere"\n'
        'cells = ["country_of_birth.tally"]\n'
    )
    head, tail = text.split("[geographies.admin]", 1)
    (folder / "census.toml").write_text(head + tally + "\n[geographies.admin]" + tail)
    census = load_census(folder / "census.toml")
    codes = census.attribute("country_of_birth").codes
    assert set(codes) == {"DOM", "EU", "EUR", "AFR", "ASI", "AME"}
    from sdclab.protection.topdown import declared_product

    product = declared_product(census)
    assert "T6" not in product.query_names  # not measured with the σ² of a partition
    records = read_records(census, folder / "persons.csv")
    release = api.protect(records, "topdown", seed=3)
    assert "T6" in release.tables  # tabulated from the MDF, consistent with it
    anywhere = release.table("T6").matrix("village").toarray()[:, 2]
    assert (anywhere == release.table("T1").matrix("village").toarray()[:, 0]).all()


def test_a_table_that_asks_the_detailed_histogram_is_measured_once(tmp_path):
    import shutil

    folder = tmp_path / "toyland"
    shutil.copytree(TOYLAND, folder)
    text = (folder / "census.toml").read_text()
    head, tail = text.split("[geographies.admin]", 1)
    extra = '\n[tables.T9]\ntitle = "Everything"\ncells = ["sex", "age", "country_of_birth"]\n'
    (folder / "census.toml").write_text(head + extra + "\n[geographies.admin]" + tail)
    from sdclab.protection.topdown import declared_product

    product = declared_product(load_census(folder / "census.toml"))
    assert product.query_names == ("total", "T2", "T3", "T4", "detailed")


def test_a_topdown_workload_measures_and_publishes_its_own_tables(records, tmp_path):
    from sdclab.release import write_release

    release = api.protect(records, "topdown", seed=3, tables="T3,T1")
    assert sorted(release.tables) == ["T1", "T3"]
    assert release.notes["tables_not_published"]["T2"] == "not in the workload"
    measured = set(release.artifacts["measurements"]["query"])
    assert measured == {"total", "T3", "detailed"}  # T1 asks the total; T2 and T4 are out
    # the same histogram: the measured cells read back and attack as the full product's
    write_release(release, tmp_path / "release")
    back = api.read_release(tmp_path / "release")
    assert back.parameters["tables"] == ["T1", "T3"]
    rebuilt = api.reconstruct(back, workers=1, node_limit=2000)
    assert rebuilt.persons.height > 0
    # a table TopDown cannot publish is refused in words
    with pytest.raises(
        InputError, match=r"tables: TopDown does not publish H1 \(a housing-unit table"
    ):
        from sdclab.censuses.us2010.population.synth import synthesize

        api.protect(synthesize(300, seed=1), "topdown", seed=1, tables="P1,H1")
