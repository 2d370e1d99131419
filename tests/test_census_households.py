"""Household records of a declared census: household attributes read from the persons' rows,
household tables tabulated from them, and mechanisms that count what one person moves there."""

import shutil
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


def test_household_attributes_are_read_once_per_household_and_tabulated(with_tenure):
    census = load_census(with_tenure / "census.toml")
    records = read_records(census, with_tenure / "persons.csv")
    persons = pl.read_csv(with_tenure / "persons.csv", infer_schema=False)
    households = persons.unique("household_id", keep="first")
    assert records.n_households == households.height
    counts = tabulate(records)["T5"]
    villages = counts.geoids["village"].to_list()
    matrix = counts.counts["village"][1].toarray()
    truth = households.group_by("village", "tenure").len()
    for village, tenure, n in truth.iter_rows():
        assert matrix[villages.index(village), ["own", "rent"].index(tenure)] == n
    assert matrix.sum() == households.height
    # the households' digest is part of the records': another tenure is another input
    other = persons.with_columns(
        tenure=pl.when(pl.col("household_id") == "H001").then(pl.lit("own")).otherwise("tenure")
    )
    other.write_csv(with_tenure / "other.csv")
    assert read_records(census, with_tenure / "other.csv").digest != records.digest


def test_a_household_attribute_that_differs_among_members_names_the_row(with_tenure):
    persons = pl.read_csv(with_tenure / "persons.csv", infer_schema=False)
    # the second member of H001 says otherwise
    second = persons.with_row_index().filter(pl.col("household_id") == "H001")["index"][1]
    changed = (
        persons.with_row_index()
        .with_columns(
            tenure=pl.when(pl.col("index") == second).then(pl.lit("own")).otherwise("tenure")
        )
        .drop("index")
    )
    changed.write_csv(with_tenure / "persons.csv")
    census = load_census(with_tenure / "census.toml")
    with pytest.raises(
        InputError,
        match=rf"persons.csv: row {second + 2}, column 'tenure': household 'H001' has more than "
        "one value",
    ):
        read_records(census, with_tenure / "persons.csv")
    # members in two villages likewise
    moved = (
        persons.with_row_index()
        .with_columns(
            tenure=pl.lit("own").alias("tenure"),
            village=pl.when(pl.col("index") == second).then(pl.lit("V107")).otherwise("village"),
        )
        .drop("index")
    )
    moved.write_csv(with_tenure / "persons.csv")
    with pytest.raises(
        InputError, match=r"the admin unit: household 'H001' has more than one value"
    ):
        read_records(census, with_tenure / "persons.csv")


def test_one_person_may_change_their_household_record_in_any_way(with_tenure):
    census = load_census(with_tenure / "census.toml")
    records = read_records(census, with_tenure / "persons.csv")
    release = api.protect(records, "geometric", seed=2, epsilon=1)
    assert "T5" in release.tables
    shares = {
        (r["table"], r["level"]): Fraction(r["epsilon"]).limit_denominator(10**6)
        for r in release.card.allocation
    }
    # a person counts once in each person table and moves up to 2 cells of T5 at each level
    expected = sum((e for (t, _), e in shares.items() if t != "T5"), Fraction(0)) + 2 * sum(
        (e for (t, _), e in shares.items() if t == "T5"), Fraction(0)
    )
    loss = release.card.guarantee.loss.epsilon
    assert Fraction(loss).limit_denominator(10**6) == expected
    assert "changes their household's record in any way" in " ".join(
        release.card.guarantee.derivation
    )
    # the cell key method and the exact release publish it too; TopDown holds persons only
    assert "T5" in api.protect(records, "cellkey", seed=2).tables
    topdown = api.protect(records, "topdown", seed=2)
    assert "T5" not in topdown.tables
    assert "household table" in topdown.notes["tables_not_published"]["T5"]
    # the reconstruction reads person tables only
    rebuilt = api.reconstruct(api.tabulate(records), workers=1, node_limit=2000)
    assert rebuilt.persons.height == records.n_persons
    np.testing.assert_array_equal(
        np.sort(rebuilt.persons["block"].unique().to_numpy()),
        np.sort(pl.read_csv(with_tenure / "persons.csv")["village"].unique().to_numpy()),
    )


def test_the_psa_swaps_a_declared_census_households_within_its_matching_areas(with_tenure):
    from sdclab.core import accounting

    census = load_census(with_tenure / "census.toml")
    records = read_records(census, with_tenure / "persons.csv")
    exact = api.tabulate(records)
    release = api.protect(records, "psa", seed=4, rate="0.5", matching_level="district")
    assert release.parameters["matching_level"] == "district"
    assert set(release.tables) == set(exact.tables)
    # every statistic of each district and above is kept; the villages' are not
    for name, table in release.tables.items():
        for level in ("region", "district"):
            if level in table.levels:
                assert (table.matrix(level) != exact.table(name).matrix(level)).nnz == 0, name
    changed = release.table("T3").matrix("village") != exact.table("T3").matrix("village")
    assert changed.nnz > 0
    # households keep their tenure and their size: owners in all, and households by size in
    # every village, are what they were
    owners = release.table("T5").matrix("village").toarray().sum(axis=0)
    assert owners.tolist() == exact.table("T5").matrix("village").toarray().sum(axis=0).tolist()
    from sdclab.protection import get
    from sdclab.protection.swapping import declared_psa_swap

    params = get("psa").parse({"rate": "0.5", "matching_level": "district"}, census)
    swapped = declared_psa_swap(records, params, np.random.default_rng(4)).population

    def by_size(r):
        size = np.bincount(r.households)
        village = r.block_index("households")
        return sorted(zip(village.tolist(), size.tolist(), strict=True))

    assert by_size(swapped) == by_size(records)
    assert (swapped.block_index("persons") != records.block_index("persons")).any()
    b = release.notes["largest_matching_group"]
    assert release.card.guarantee.loss.epsilon == accounting.psa_epsilon(0.5, b)
    texts = [i.text() for i in release.card.guarantee.invariants]
    assert "every statistic (each district and above)" in texts
    assert not any("group quarters" in t for t in texts)
    # by default the top level; a bottom level or a US-only setting is refused in words
    assert api.protect(records, "psa", seed=4).parameters["matching_level"] == "region"
    with pytest.raises(InputError, match=r"matching_level: expected one of region, district"):
        api.protect(records, "psa", seed=4, matching_level="village")
    with pytest.raises(InputError, match=r"match_adults: a setting for the US 2010 census only"):
        api.protect(records, "psa", seed=4, match_adults=False)


def test_a_household_split_over_two_villages_is_refused_even_without_household_attributes(
    tmp_path,
):
    folder = tmp_path / "toyland"
    shutil.copytree(TOYLAND, folder)
    persons = pl.read_csv(folder / "persons.csv", infer_schema=False)
    # the second member of H001 in another village
    persons.with_row_index().with_columns(
        village=pl.when(pl.col("index") == 1).then(pl.lit("V107")).otherwise("village")
    ).drop("index").write_csv(folder / "persons.csv")
    census = load_census(folder / "census.toml")
    with pytest.raises(InputError, match=r"row 3, the admin unit: household 'H001' has more"):
        read_records(census, folder / "persons.csv")


def test_a_person_table_may_cross_a_household_attribute(with_tenure):
    text = (with_tenure / "census.toml").read_text()
    extra = '\n[tables.T7]\ntitle = "Persons by tenure"\ncells = ["sex", "tenure"]\n'
    head, tail = text.split("[geographies.admin]", 1)
    (with_tenure / "census.toml").write_text(head + extra + "\n[geographies.admin]" + tail)
    census = load_census(with_tenure / "census.toml")
    records = read_records(census, with_tenure / "persons.csv")
    persons = pl.read_csv(with_tenure / "persons.csv", infer_schema=False)
    t7 = api.tabulate(records).table("T7").matrix("region").toarray().sum(axis=0)
    truth = persons.group_by("sex", "tenure").len().sort("sex", "tenure")["len"].to_list()
    assert t7.tolist() == truth  # persons, each with their household's tenure
    assert "T7" in api.protect(records, "geometric", seed=1).tables
    topdown = api.protect(records, "topdown", seed=1)
    assert "outside TopDown's person histogram" in topdown.notes["tables_not_published"]["T7"]


def test_a_household_attribute_needs_the_household_key(with_tenure):
    text = (with_tenure / "census.toml").read_text()
    (with_tenure / "census.toml").write_text(text.replace('household_key = "household_id"', ""))
    with pytest.raises(InputError, match=r"attributes.tenure.records: a household attribute needs"):
        load_census(with_tenure / "census.toml")


def test_records_of_a_census_document_without_its_household_key_are_refused(with_tenure):
    from sdclab.core.census.document import from_document, to_document

    document = to_document(load_census(with_tenure / "census.toml"))
    document["household_key"] = None  # as a forged or hand-made release's census.json could say
    census = from_document(document)
    with pytest.raises(InputError, match=r"declares household attributes \(tenure\) but no"):
        read_records(census, with_tenure / "persons.csv")
