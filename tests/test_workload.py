"""A mechanism protects the tables it is given: a workload over the census, its budget split and
card derived from those tables alone."""

from fractions import Fraction
from pathlib import Path

import pytest

from sdclab.core.census.declare import load_census
from sdclab.core.census.records import read_records
from sdclab.core.errors import InputError
from sdclab.pipeline import api
from sdclab.pipeline.api import read_release

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


@pytest.fixture(scope="module")
def records():
    return read_records(load_census(TOYLAND / "census.toml"), TOYLAND / "persons.csv")


def test_a_geometric_workload_splits_its_budget_over_its_own_tables(records, tmp_path):
    from sdclab.release import write_release

    release = api.protect(records, "geometric", seed=3, tables="T3,T1", epsilon=2)
    assert sorted(release.tables) == ["T1", "T3"]
    # both tables reach every level: ε/3 per level, shared by the two tables
    shares = {(r["table"], r["level"]): r["epsilon"] for r in release.card.allocation}
    assert set(shares) == {
        (t, lv) for t in ("T1", "T3") for lv in ("region", "district", "village")
    }
    assert all(e == pytest.approx(float(Fraction(2, 3) / 2)) for e in shares.values())
    assert "the tables T1, T3 (the workload)" in release.card.covers
    # the whole census splits the same ε over the four tables of a district
    whole = api.protect(records, "geometric", seed=3, epsilon=2)
    by_table = {(r["table"], r["level"]): r["scale"] for r in whole.card.allocation}
    mine = {(r["table"], r["level"]): r["scale"] for r in release.card.allocation}
    assert by_table["T3", "district"] == 2 * mine["T3", "district"]  # four tables there, not two
    assert by_table["T3", "village"] == mine["T3", "village"]  # T1 and T3 alone reach villages
    assert "tables" not in whole.parameters  # a release of every table records no workload
    write_release(release, tmp_path / "release")
    back = read_release(tmp_path / "release")
    # recorded in the census's order, whatever the order given: one record per workload
    assert back.parameters["tables"] == ["T1", "T3"] and sorted(back.tables) == ["T1", "T3"]


def test_a_us_workload_keeps_the_census_cards_numbers_for_its_tables():
    from sdclab.censuses.us2010.population.synth import synthesize

    population = synthesize(300, seed=1)
    release = api.protect(population, "geometric", seed=1, tables=("P1", "P12"), epsilon=4)
    assert sorted(release.tables) == ["P1", "P12"]
    # person tables only: a person is in one cell of each, so ε is what was asked
    assert release.card.guarantee.text() == "epsilon = 4 (pure DP)"


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ("T1,T9", r"tables: unknown table\(s\) T9; known tables: T1, T2, T3, T4"),
        ("", r"tables: give table names, at least one"),
        ("T2,,T3", r"tables: give table names, at least one"),
        ("T2,T3,T2", r"tables: T2 given more than once"),
    ],
)
def test_a_workload_of_unknown_tables_is_refused_in_words(records, tables, message):
    with pytest.raises(InputError, match=message):
        api.protect(records, "geometric", seed=1, tables=tables)


def test_the_exact_release_publishes_its_workload_and_reads_back(records, tmp_path):
    from sdclab.release import write_release

    release = api.protect(records, "none", seed=1, tables="T2")
    assert list(release.tables) == ["T2"] and release.parameters == {"tables": ["T2"]}
    write_release(release, tmp_path / "release")
    assert list(read_release(tmp_path / "release").tables) == ["T2"]
    assert api.protect(records, "none", seed=1).parameters == {}


def test_a_cell_key_workload_counts_the_cells_of_its_own_tables(records):
    workload = api.protect(records, "cellkey", seed=1, tables="T1,T3")
    whole = api.protect(records, "cellkey", seed=1)
    assert sorted(workload.tables) == ["T1", "T3"] and len(whole.tables) == 4

    def cells(release):
        caveat = next(c for c in release.card.caveats if "a person is in t = " in c)
        return int(caveat.split("a person is in t = ")[1].split()[0])

    # T1 and T3 at three levels: one cell each; T2 and T4 add two levels each
    assert cells(workload) == 6 and cells(whole) == 10


@pytest.mark.parametrize("complementary", [False, True])
def test_suppression_of_a_workload_reads_the_total_it_must_hold(records, complementary):
    from sdclab import protection

    settings = {"complementary": complementary}
    release = api.protect(records, "suppress", seed=1, tables="T1,T3", **settings)
    whole = api.protect(records, "suppress", seed=1, **settings)
    assert sorted(release.tables) == ["T1", "T3"]
    entry = protection.get("suppress")
    assert entry.check is not None
    assert entry.check(release, entry.parse(release.parameters, records.census)) is None
    if not complementary:  # the rules are per table, given the total: the same cells withheld
        for name in ("T1", "T3"):
            for level in release.table(name).levels:
                mine = release.table(name).suppressed(level)
                assert (mine != whole.table(name).suppressed(level)).nnz == 0, (name, level)
    with pytest.raises(InputError, match=r"tables: the workload needs the total table T1"):
        api.protect(records, "suppress", seed=1, tables="T3")
