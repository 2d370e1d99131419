"""A census declared in files: its declaration, its microdata, its tables counted from records."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from sdclab.censuses import census_named
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import read_records
from sdclab.core.errors import InputError
from sdclab.core.tables.tabulate import tabulate

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


@pytest.fixture
def toyland(tmp_path: Path) -> Path:
    """A copy of the example census that a test may change."""
    shutil.copytree(TOYLAND, tmp_path / "toyland")
    return tmp_path / "toyland"


def edit(file: Path, old: str, new: str) -> None:
    text = file.read_text()
    assert old in text, old
    file.write_text(text.replace(old, new, 1))


def test_the_example_census_declares_attributes_breakdowns_geography_and_tables():
    census = load_census(TOYLAND / "census.toml")
    assert list(census.attributes) == ["sex", "age", "country_of_birth"]
    age = census.attribute("age")
    assert age.size == 100 and list(age.breakdowns) == ["band", "broad"]
    broad = age.breakdown("broad")
    assert broad.codes == ("0-14", "15-64", "65+") and broad.is_partition
    assert broad.membership.sum(axis=1).tolist() == [15, 50, 35]
    assert age.breakdown("band").membership.sum(axis=1).tolist() == [10] * 10
    admin = census.geography
    assert admin.levels == ("region", "district", "village")
    # children do not share their parent's code: the parent array says where each lies
    assert (
        admin.units["district"][0] == "K7"
        and admin.units["region"][admin.parents["district"][0]] == "R-NORTH"
    )
    assert list(census.tables) == ["T1", "T2", "T3", "T4"]
    assert census.table("T2").levels == ("region", "district")
    assert census.table("T3").crossed == ("age", "country_of_birth")
    # T4 keeps only the ages of its universe: 2 sexes × 50 ages
    assert census.table("T4").n_cells == 100
    assert census.reconstruction.level == "village"
    assert census.quasi_identifiers == ("sex", "age")


def expected_counts(persons: pl.DataFrame, units: pl.DataFrame, level: str, keys: list[str]):
    """Counts by ``level`` and ``keys`` with polars alone, from the files as text."""
    parent = dict(zip(units["code"], units["parent"], strict=True))
    persons = persons.with_columns(
        district=pl.col("village").replace_strict(parent),
    ).with_columns(region=pl.col("district").replace_strict(parent))
    return persons.group_by([level, *keys]).len()


def test_tables_counted_from_records_match_a_group_by():
    census = load_census(TOYLAND / "census.toml")
    counts = tabulate(read_records(census, TOYLAND / "persons.csv"))
    persons = pl.read_csv(TOYLAND / "persons.csv", infer_schema=False)
    units = pl.read_csv(TOYLAND / "units.csv", infer_schema=False)
    assert set(counts) == {"T1", "T2", "T3", "T4"}

    codes, matrix = by_geoid(counts["T1"], "village")
    by_village = expected_counts(persons, units, "village", [])
    expected = dict(zip(by_village["village"], by_village["len"], strict=True))
    assert matrix.toarray()[:, 0].tolist() == [expected.get(c, 0) for c in codes]
    assert by_geoid(counts["T1"], "region")[1].sum() == persons.height

    band = {str(a): f"{min(a // 10 * 10, 90)}-{min(a // 10 * 10, 90) + 9}" for a in range(100)}
    band["99"] = band["90"] = "90+"
    for a in range(90, 100):
        band[str(a)] = "90+"
    with_band = persons.with_columns(band=pl.col("age").replace_strict(band))
    by_district = expected_counts(with_band, units, "district", ["sex", "band"])
    codes, matrix = by_geoid(counts["T2"], "district")
    table = census.table("T2")
    labels = table.cell_labels
    dense = matrix.toarray()
    for district, sex, band_code, n in by_district.iter_rows():
        sex_label = {"1": "male", "2": "female"}[sex]
        assert dense[codes.index(district), labels.index(f"{sex_label} / {band_code}")] == n
    assert dense.sum() == persons.height

    codes, matrix = by_geoid(counts["T4"], "district")
    working = persons.filter(pl.col("age").cast(pl.Int64).is_between(15, 64))
    assert matrix.sum() == working.height


def test_a_village_in_the_microdata_must_be_in_the_geography(toyland):
    edit(toyland / "persons.csv", ",V100,", ",V999,")
    census = load_census(toyland / "census.toml")
    with pytest.raises(
        InputError, match=r"persons.csv: row 2, column 'village': unknown code 'V999'"
    ):
        read_records(census, toyland / "persons.csv")


def test_an_unknown_code_names_its_row_and_column(toyland):
    lines = (toyland / "persons.csv").read_text().splitlines()
    fields = lines[5].split(",")
    fields[5] = "XX"
    lines[5] = ",".join(fields)
    (toyland / "persons.csv").write_text("\n".join(lines) + "\n")
    census = load_census(toyland / "census.toml")
    with pytest.raises(
        InputError,
        match=r"row 6, column 'country_of_birth': unknown code 'XX' \(expected one of DOM",
    ):
        read_records(census, toyland / "persons.csv")


def test_a_given_parent_level_must_agree_with_the_geography(toyland):
    persons = pl.read_csv(toyland / "persons.csv", infer_schema=False)
    wrong = persons.with_columns(district=pl.lit("Q1"))
    wrong.write_csv(toyland / "persons.csv")
    census = load_census(toyland / "census.toml")
    with pytest.raises(InputError, match=r"column 'district': 'Q1' does not hold village 'V100'"):
        read_records(census, toyland / "persons.csv")


def test_a_geography_without_a_unit_list_is_read_from_the_columns(toyland):
    edit(toyland / "census.toml", 'units = "units.csv"', "")
    census = load_census(toyland / "census.toml")
    persons = pl.read_csv(toyland / "persons.csv", infer_schema=False)
    units = pl.read_csv(toyland / "units.csv", infer_schema=False)
    parent = dict(zip(units["code"], units["parent"], strict=True))
    full = persons.with_columns(district=pl.col("village").replace_strict(parent)).with_columns(
        region=pl.col("district").replace_strict(parent)
    )
    records = census_records(census, full)
    assert records.geography.geoids("region").to_list() == ["R-NORTH", "R-SOUTH"]
    declared = tabulate(read_records(load_census(TOYLAND / "census.toml"), TOYLAND / "persons.csv"))
    read = tabulate(records)
    for name in declared:
        for level in read[name].counts:
            codes, matrix = by_geoid(read[name], level)
            d_codes, d_matrix = by_geoid(declared[name], level)
            order = [d_codes.index(c) for c in codes]
            assert (d_matrix.toarray()[order] == matrix.toarray()).all(), (name, level)
    # a village that lies in two districts is refused, naming the row
    fourth = pl.int_range(pl.len()) == 3
    split = full.with_columns(
        district=pl.when(fourth).then(pl.lit("Q1")).otherwise("district"),
        region=pl.when(fourth).then(pl.lit("R-SOUTH")).otherwise("region"),
    )
    with pytest.raises(
        InputError,
        match=r"row 5, column 'district': village 'V100' lies in district 'Q1' here and in 'K7'",
    ):
        census_records(census, split)


def by_geoid(counts, level: str):
    """(geoids as text, units × cells matrix) of a tabulated table at ``level``."""
    return counts.geoids[level].to_list(), counts.counts[level][1]


def census_records(census, frame):
    from sdclab.core.census.records import encode_records

    return encode_records(census, frame, "persons.csv")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'cells = ["sex", "age.band"]',
            'cells = ["sex", "age.bands"]',
            r"tables.T2.cells: attribute 'age' has no breakdown 'bands'; known: detailed, band",
        ),
        (
            'cells = ["sex", "age.band"]',
            'cells = ["gender"]',
            r"tables.T2.cells: unknown attribute 'gender'",
        ),
        ('bottom = "district"', 'bottom = "parish"', r"tables.T2.bottom: unknown level 'parish'"),
        ('codes = ["1", "2"]', 'codes = ["1", "1"]', r"attributes.sex.codes: '1' is listed twice"),
        (
            '"0-14" = ["0",',
            '"0-14" = ["-1",',
            r"attributes.age.breakdowns.broad: category '0-14' names unknown code '-1'",
        ),
        ('level = "village"', 'level = "parish"', r"reconstruction.level: unknown level 'parish'"),
        (
            'quasi_identifiers = ["sex", "age"]',
            'quasi_identifiers = ["sex", "height"]',
            r"attack.quasi_identifiers: unknown attribute 'height'",
        ),
        (
            'universe = { "age.broad" = ["15-64"] }',
            'universe = { "age.broad" = ["15-65"] }',
            r"tables.T4.universe.age.broad: unknown category '15-65'",
        ),
        (
            'codes = "age.csv"',
            'codes = "ages.csv"',
            r"attributes.age.codes: ages.csv: no such file",
        ),
    ],
)
def test_a_mistake_in_the_census_file_is_one_line_naming_its_key(toyland, old, new, message):
    edit(toyland / "census.toml", old, new)
    with pytest.raises(InputError, match=message):
        census_named(toyland / "census.toml")


def test_a_unit_with_an_unknown_parent_is_refused(toyland):
    edit(toyland / "units.csv", "district,K7,R-NORTH", "district,K7,R-EAST")
    with pytest.raises(InputError, match=r"district 'K7' has parent 'R-EAST', which is no region"):
        load_census(toyland / "census.toml")


def test_census_show_prints_a_census_and_refuses_an_unknown_one(toyland):
    def show(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sdclab", "census", "show", name], capture_output=True, text=True
        )

    done = show(str(toyland / "census.toml"))
    assert done.returncode == 0, done.stderr
    assert "admin: region > district > village (2 region, 4 district, 12 village)" in done.stdout
    assert (
        "T3: Broad age group by country of birth — 18 cells over age × country_of_birth"
        in done.stdout
    )
    us = show("us2010")
    assert us.returncode == 0 and "P12: Sex by age — 46 cells over sex × age (232)" in us.stdout
    bad = show("atlantis")
    assert (
        bad.returncode == 2
        and bad.stderr.count("\n") == 1
        and "unknown census 'atlantis'" in bad.stderr
    )


def test_a_census_of_more_than_a_billion_cells_tabulates_and_reconstructs(wide_census):
    # ten attributes of ten codes each: 10¹⁰ cells in their product, never built
    names = [f"topic{i}" for i in range(10)]
    tables = {"A": ["topic0", "topic9"], "B": ["topic3"], "C": ["topic0", "topic1", "topic2"]}
    census = wide_census(10, tables, names[:3])
    assert census.full_domain_size() == 10**10
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 10, size=(500, 10))
    frame = (
        pl.DataFrame({n: codes[:, i].astype(str) for i, n in enumerate(names)})
        .with_columns(
            place=pl.Series((rng.integers(0, 40, 500)).astype(str)),
        )
        .with_columns(area=pl.col("place").str.slice(0, 1))
    )
    counts = tabulate(census_records(census, frame))
    places, matrix = by_geoid(counts["A"], "place")
    assert matrix.shape == (len(places), 100) and matrix.sum() == 500
    expected = np.zeros((len(places), 100), dtype=np.int64)
    place_index = np.array([places.index(p) for p in frame["place"]])
    np.add.at(expected, (place_index, codes[:, 0] * 10 + codes[:, 9]), 1)
    assert (matrix.toarray() == expected).all()
    assert by_geoid(counts["B"], "area")[1].sum() == 500
    # the reconstruction solves over the three declared attributes only (1,000 cells), from the
    # tables that cross no other: C gives each place's persons back exactly
    from sdclab.attacks.reconstruction import person_tables, reconstruct
    from sdclab.release import exact_release

    records = census_records(census, frame)
    exact = exact_release(records)
    assert person_tables(exact) == (("C",), ())
    rebuilt = reconstruct(exact, workers=1, node_limit=2000)
    assert rebuilt.persons.columns == ["block", *names[:3]]
    key = ["place", *names[:3]]
    truth = frame.group_by(key).len().sort(key)
    mine = rebuilt.persons.rename({"block": "place"}).group_by(key).len().sort(key)
    assert mine.rows() == truth.rows()


def test_us2010_is_the_catalogue_and_each_table_counts_over_its_marginal_domain():
    census = census_named("us2010")
    assert census.tables == CATALOG
    for table in CATALOG.values():
        full = table.schema
        index = np.arange(full.size)
        decoded = full.decode(index)
        marginal = (
            table.marginal.cell_index(decoded) if table.crossed else np.zeros(full.size, np.int64)
        )
        projection = sp.csr_matrix(
            (np.ones(full.size, dtype=np.int64), (marginal, index)),
            shape=(table.marginal.size, full.size),
        )
        assert (table.marginal_query @ projection != table.query).nnz == 0, table.name
    assert CATALOG["P12"].crossed == ("sex", "age") and CATALOG["P1"].marginal.size == 1


def test_a_census_document_round_trips_with_its_digest(toyland):
    from sdclab.core.census.document import from_document, to_document

    census = load_census(TOYLAND / "census.toml")
    again = from_document(json.loads(json.dumps(to_document(census))))
    assert again.digest == census.digest
    for name, table in census.tables.items():
        assert (again.table(name).query != table.query).nnz == 0
        assert again.table(name).cell_labels == table.cell_labels
    records = read_records(again, TOYLAND / "persons.csv")
    first = tabulate(read_records(census, TOYLAND / "persons.csv"))
    for name, counts in tabulate(records).items():
        for level, (_, matrix) in counts.counts.items():
            assert (matrix != first[name].counts[level][1]).nnz == 0
    # any change to the declaration is another census
    edit(toyland / "census.toml", 'cells = ["sex", "age.band"]', 'cells = ["sex", "age.broad"]')
    assert load_census(toyland / "census.toml").digest != census.digest
    assert census_named("us2010").digest == census_named("us2010").digest


def test_a_declared_census_is_released_written_and_read_back_with_its_census(tmp_path):
    from sdclab import protection
    from sdclab.pipeline.api import read_release
    from sdclab.release import exact_release, write_release

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    exact = exact_release(records)
    truth = tabulate(records)
    for name, counts in truth.items():
        for level, (_, matrix) in counts.counts.items():
            assert (exact.table(name).matrix(level) != matrix).nnz == 0
    noisy = protection.get("geometric").run(records, {"epsilon": "2"}, 5)
    assert noisy.census is census and noisy.card.guarantee.text() == "epsilon = 2 (pure DP)"
    # the budget is split over the census's own tables and levels: T1 at three levels, …
    assert {row["table"] for row in noisy.card.allocation} == {"T1", "T2", "T3", "T4"}
    write_release(noisy, tmp_path / "release")
    assert (tmp_path / "release" / "census.json").is_file()
    back = read_release(tmp_path / "release")
    assert back.census.digest == census.digest
    for name in census.tables:
        for level in census.table(name).levels:
            assert (back.table(name).matrix(level) != noisy.table(name).matrix(level)).nnz == 0
    assert sorted(back.table("T2").geoids("district").to_list()) == ["A2", "B9", "K7", "Q1"]
    # another census in census.json is refused: the release names the one it was made for
    document = json.loads((tmp_path / "release" / "census.json").read_text())
    document["tables"][0]["title"] = "Everybody"
    (tmp_path / "release" / "census.json").write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"census.json does not match the digest"):
        read_release(tmp_path / "release")


def test_a_us_release_names_its_census():
    from sdclab.censuses.us2010.population.synth import synthesize
    from sdclab.release import exact_release

    release = exact_release(synthesize(300, seed=1))
    assert release.metadata()["census"] == {
        "name": "us2010",
        "digest": census_named("us2010").digest,
    }


def test_the_command_line_tabulates_and_protects_a_declared_census(tmp_path):
    def sdclab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sdclab", *args], capture_output=True, text=True, cwd=tmp_path
        )

    census = ["--census", str(TOYLAND / "census.toml")]
    persons = str(TOYLAND / "persons.csv")
    done = sdclab("protect", persons, *census, "-m", "geometric", "--seed", "3", "--out", "geo")
    assert done.returncode == 0, done.stderr
    assert "budget: epsilon = 1 (pure DP)" in done.stdout
    done = sdclab("tabulate", persons, *census, "--tables", "T1,T3", "--out", "exact")
    assert done.returncode == 0, done.stderr
    from sdclab.pipeline.api import read_release

    exact = read_release(tmp_path / "exact")
    assert list(exact.tables) == ["T1", "T3"] and exact.census.name == "toyland"
    assert exact.table("T1").matrix("region").sum() == 297
    bad = sdclab("tabulate", persons, *census, "--tables", "P1", "--out", "x")
    assert bad.returncode == 2 and "unknown table(s) P1; known tables: T1, T2, T3, T4" in bad.stderr
    assert not (tmp_path / "x").exists()


def test_a_declared_census_is_reconstructed_from_its_own_tables():
    from sdclab import protection
    from sdclab.attacks.reconstruction import person_tables, reconstruct
    from sdclab.release import exact_release

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    exact = exact_release(records)
    # villages from T1 and T3, one program per district with T2 and T4
    assert person_tables(exact) == (("T1", "T3"), ("T2", "T4")) and census.within == "district"
    rebuilt = reconstruct(exact, workers=1, node_limit=2000)
    assert rebuilt.persons.columns == ["block", "sex", "age", "country_of_birth"]
    assert rebuilt.tracts["tract"].sort().to_list() == ["A2", "B9", "K7", "Q1"]
    # the exact tables hold: every village's persons by broad age and country of birth
    persons = pl.read_csv(TOYLAND / "persons.csv", infer_schema=False)
    truth = (
        persons.group_by("village", "country_of_birth").len().sort("village", "country_of_birth")
    )
    mine = rebuilt.persons.group_by(pl.col("block").alias("village"), "country_of_birth")
    assert mine.len().sort("village", "country_of_birth").rows() == truth.rows()
    assert rebuilt.persons["sex"].null_count() == 0  # T4 crosses sex, T2 too
    assert rebuilt.attributes["partially_known_attributes"] == ["age"]  # single years 15-64 only
    # a noisy release: the noise-aware program reads the release's stated noise
    noisy = protection.get("geometric").run(records, {"epsilon": "4"}, 5)
    aware = reconstruct(noisy, workers=1, knowledge="tables", node_limit=2000)
    assert set(aware.tracts["mode"]) == {"noise-aware"} and aware.persons.height > 0


def test_a_declared_reconstruction_is_written_and_read_back_with_its_census(tmp_path):
    def sdclab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sdclab", *args], capture_output=True, text=True, cwd=tmp_path
        )

    census = ["--census", str(TOYLAND / "census.toml")]
    persons = str(TOYLAND / "persons.csv")
    assert (
        sdclab(
            "protect", persons, *census, "-m", "cellkey", "--seed", "3", "--out", "ck"
        ).returncode
        == 0
    )
    done = sdclab("reconstruct", "ck", "--out", "rc", "--node-limit", "2000", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "in 4 districts" in done.stdout
    from sdclab.pipeline import api

    rebuilt = api.read_reconstruction(tmp_path / "rc")
    assert rebuilt.persons.columns[:4] == ["block", "sex", "age", "country_of_birth"]
    assert set(rebuilt.persons["block"]) <= {f"V{100 + 7 * i:03d}" for i in range(12)}
    # a code the census does not know is refused, naming the column
    changed = rebuilt.persons.with_columns(country_of_birth=pl.lit("XX"))
    changed.write_parquet(tmp_path / "rc" / "persons.parquet")
    with pytest.raises(InputError, match=r"country_of_birth 'XX' is not a code of the census"):
        api.read_reconstruction(tmp_path / "rc")


def test_a_declared_census_is_reidentified_on_its_quasi_identifiers(toyland):
    from sdclab.pipeline import api
    from sdclab.pipeline.results import NotMeasured

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    exact = api.tabulate(records)
    rebuilt = api.reconstruct(exact, workers=1, node_limit=2000)
    result = api.reidentify(rebuilt, exact, records, attacker="census", seed=4)
    everyone = result.reconstruction.all
    assert everyone.attacker_records == 297 and 0 < everyone.confirmed <= everyone.putative
    # its own baselines (T3 at the village, sex from T2 at the district), linked the same way
    assert not isinstance(result.mdg, NotMeasured) and result.mdg.all.attacker_records == 297
    assert set(result.baselines()) == {"mdg", "prg", "mdg_exact", "prg_exact", "random_draw"}
    assert result.fixed["confidential"].all.confirmed > everyone.confirmed
    assert set(result.reconstruction.groups) == {
        "all",
        "modal",
        "nonmodal",
        "unique",
        "nonmodal_unique",
    }
    # every confirmed link states the person's village, sex, age and country of birth
    truth = pl.read_csv(TOYLAND / "persons.csv", infer_schema=False).with_row_index("id")
    confirmed = result.links.filter("confirmed").join(
        truth.with_columns(pl.col("id").cast(pl.Int64)), on="id"
    )
    assert confirmed.height == everyone.confirmed
    assert (confirmed["block"] == confirmed["village"]).all()
    assert (confirmed["country_of_birth"] == confirmed["country_of_birth_right"]).all()
    # an age the tables pin to a broad group only is linked on the group, in a second pass
    edit(
        toyland / "census.toml",
        'level = "village"',
        'level = "village"\nresolved = { age = "broad" }',
    )
    broad = load_census(toyland / "census.toml")
    records = read_records(broad, toyland / "persons.csv")
    exact = api.tabulate(records)
    rebuilt = api.reconstruct(exact, workers=1, node_limit=2000)
    assert {"age_min", "age_max"} <= set(rebuilt.persons.columns)
    result = api.reidentify(rebuilt, exact, records, attacker="census", seed=4)
    passes = result.passes["reconstruction"]
    assert passes.second_pass > 0 and passes.first_pass > 0
    linked = result.links.filter(pl.col("link_pass") == 1)
    pinned = rebuilt.persons.filter(pl.col("age_min") == pl.col("age_max"))
    assert set(linked["age"]) <= set(pinned["age"])
    # T3 now pins age to what the link needs: the MDG's records are linked on its broad group
    assert result.passes["mdg"].second_pass > 0


def test_a_declared_census_goes_from_the_command_line_to_its_evaluation(tmp_path):
    def sdclab(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "sdclab", *args], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        return done

    persons = str(TOYLAND / "persons.csv")
    sdclab(
        "protect",
        persons,
        "--census",
        str(TOYLAND / "census.toml"),
        "-m",
        "cellkey",
        "--seed",
        "3",
        "--out",
        "release",
    )
    sdclab("reconstruct", "release", "--out", "recon", "--node-limit", "2000", "--workers", "1")
    sdclab(
        "reidentify",
        "recon",
        "--truth",
        persons,
        "--attacker",
        "census",
        "--seed",
        "2",
        "--out",
        "reid",
    )
    done = sdclab(
        "evaluate",
        "release",
        "--truth",
        persons,
        "--recon",
        "recon",
        "--reid",
        "reid",
        "--out",
        "eval",
    )
    assert "village: mean absolute error" in done.stdout
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["reconstruction_agreement"]["all"]["persons"] == 297
    assert set(metrics["accuracy"]) == {"T1", "T2", "T3", "T4"}
    assert "not census toyland's" in json.dumps(metrics["ranked_precision"])
    assert metrics["geounit_totals"]["village"]["all"]["geounits"] == 12  # T1, the total
    census = metrics["reidentification"]["census"]
    assert census["reconstruction"]["all"]["attacker_records"] == 297
    # another persons' file than the release's is refused in one line
    other = tmp_path / "other.csv"
    other.write_text((TOYLAND / "persons.csv").read_text().replace(",V100,1,", ",V100,2,", 1))
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "sdclab",
            "evaluate",
            "release",
            "--truth",
            str(other),
            "--out",
            "x",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and not (tmp_path / "x").exists()


@pytest.mark.parametrize("complementary", [False, True])
def test_a_declared_census_is_suppressed_by_its_total_table(complementary, toyland):
    from sdclab.pipeline import api

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    release = api.protect(records, "suppress", seed=1, complementary=complementary)
    persons = tabulate(records)["T1"].counts["village"][1].toarray()[:, 0]
    t1 = release.table("T1")
    hidden = t1.suppressed("village").toarray()[:, 0]
    # the minimum-population rule reads each village's persons from T1, the total
    assert np.array_equal(hidden, (persons >= 1) & (persons < 15))
    assert release.table("T3").suppressed("village").toarray()[hidden].all()
    aware = api.reconstruct(release, workers=1, node_limit=2000, knowledge="tables")
    assert aware.persons.height > 0 and set(aware.tracts["mode"]) == {"noise-aware"}
    assert census_named("us2010").total_table.name == "P1"
    # a census without a total table cannot be suppressed: said in one line
    edit(toyland / "census.toml", '[tables.T1]\ntitle = "Population"\n', "")
    without = load_census(toyland / "census.toml")
    with pytest.raises(InputError, match=r"census toyland has no table of the total of persons"):
        api.protect(read_records(without, toyland / "persons.csv"), "suppress", seed=1)


MIXED = """
[attributes.country_of_birth.breakdowns.mixed]
a = ["DOM", "EUR"]
b = ["EU", "AFR", "ASI", "AME"]
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('name = "toyland"', 'name = "us2010"', r"name: 'us2010' is a built-in census's name"),
        ("[attributes.sex]", "[attributes.block]", r"attributes.block: 'block' is a name sdclab"),
        (
            'levels = ["region", "district", "village"]',
            'levels = ["region", "sex", "village"]',
            r"levels: level 'sex' has an attribute's name",
        ),
        (
            "[tables.T1]",
            '[geographies.grid]\nlevels = ["region", "cell"]\n\n[tables.T1]',
            r"geographies.grid.levels: level 'region' is also a level of geography 'admin'",
        ),
        (
            'attributes = ["sex", "age", "country_of_birth"]',
            'attributes = ["age", "country_of_birth"]',
            r"attack.quasi_identifiers: 'sex' is not among the attributes the reconstruction",
        ),
        (
            'level = "village"',
            'level = "village"\nresolved = { country_of_birth = "mixed" }',
            r"resolved.country_of_birth: breakdown 'mixed' must put every code in one category, "
            "each a run",
        ),
    ],
)
def test_a_census_file_is_refused_where_sdclab_could_not_use_it(toyland, old, new, message):
    edit(toyland / "census.toml", "[geographies.admin]", MIXED + "\n[geographies.admin]")
    edit(toyland / "census.toml", old, new)
    with pytest.raises(InputError, match=message):
        census_named(toyland / "census.toml")


def test_what_a_declared_census_cannot_do_yet_is_refused_in_words(tmp_path):
    from sdclab import protection
    from sdclab.pipeline import api

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    for name, entry in protection.MECHANISMS.items():
        if entry.protect is None or entry.any_census:
            continue
        with pytest.raises(InputError, match=rf"mechanism {name} protects the US 2010 census"):
            api.protect(records, name, seed=1)
    release = api.protect(records, "cellkey", seed=1)
    risk = api.evaluate(release, records, risk=True).risk  # ckm-risk reads any census
    assert risk["scope"]["tuple_children"] and "bound_disclosure" in risk
    with pytest.raises(InputError, match=r"variability: solution variability is measured"):
        api.reconstruct(release, workers=1, variability=True)
    # a reconstruction of another census than the release's is not scored
    from sdclab.censuses.us2010.population.synth import synthesize

    us = synthesize(300, seed=1)
    us_release = api.tabulate(us)
    us_recon = api.reconstruct(us_release, workers=1, node_limit=2000, knowledge="naive")
    with pytest.raises(InputError, match=r"the reconstruction is of the US 2010 census"):
        api.evaluate(release, records, reconstruction=us_recon)


def test_the_attacker_file_of_a_declared_census_has_the_presets_defects():
    from sdclab.attacks.census_linkage import Geounits, LinkKeys, attacker_file, truth_frame
    from sdclab.attacks.linkage import attacker_parameters

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    truth = truth_frame(records)
    keys = LinkKeys.of(census)
    params = attacker_parameters("commercial", {"sex_error": 0.5, "age_error": 0.0, "moved": 0.5})
    units = Geounits.of(records)
    file = attacker_file(truth, keys, params, units, np.random.default_rng(3))
    mine = file.filter(pl.col("id") >= 0).join(truth, on="id", suffix="_true")
    assert (mine["age"] == mine["age_true"]).all()  # no age error asked
    flipped = (mine["sex"] != mine["sex_true"]).mean()
    assert 0.35 < flipped < 0.65  # about half, each a different code
    moved = mine.filter(pl.col("block") != pl.col("block_true"))
    assert moved.height > 0
    district = dict(zip(units.geoids.tolist(), units.parent.tolist(), strict=True))
    assert all(district[a] == district[b] for a, b in moved.select("block", "block_true").rows())
    assert (file["id"] < 0).sum() == round(params.extra_records * mine.height)


def test_a_declared_reconstruction_with_a_stray_geounit_or_share_is_refused(tmp_path):
    from sdclab.attacks.reconstruction_files import write_reconstruction
    from sdclab.pipeline import api

    census = load_census(TOYLAND / "census.toml")
    records = read_records(census, TOYLAND / "persons.csv")
    release = api.tabulate(records)
    rebuilt = api.reconstruct(release, workers=1, node_limit=2000, draws=2)
    for column, value, message in (
        ("block", "ZZZ", r"block 'ZZZ' is not a village of the census"),
        ("confidence", 7.5, r"column confidence must hold shares from 0 to 1"),
    ):
        out = tmp_path / column
        write_reconstruction(out, rebuilt, rebuilt.to_dict(), census=census)
        persons = rebuilt.persons.with_columns(pl.lit(value).alias(column))
        persons.write_parquet(out / "persons.parquet")
        with pytest.raises(InputError, match=message):
            api.read_reconstruction(out)


def test_the_reconstruction_reads_every_table_published_at_its_level(toyland):
    from sdclab.attacks.reconstruction import attack_tables
    from sdclab.pipeline import api

    edit(toyland / "census.toml", 'level = "village"', 'level = "district"')
    census = load_census(toyland / "census.toml")
    assert census.within == "region"
    assert attack_tables(census) == (("T1", "T2", "T3", "T4"), ())
    rebuilt = api.reconstruct(
        api.tabulate(read_records(census, toyland / "persons.csv")), workers=1, node_limit=2000
    )
    assert rebuilt.persons["country_of_birth"].null_count() == 0  # from T3, at district too


def test_suppression_needs_the_total_at_every_level(toyland):
    from sdclab.pipeline import api

    edit(
        toyland / "census.toml", 'title = "Population"', 'title = "Population"\nbottom = "district"'
    )
    census = load_census(toyland / "census.toml")
    with pytest.raises(InputError, match=r"total table T1 is published at region, district"):
        api.protect(read_records(census, toyland / "persons.csv"), "suppress", seed=1)


def test_a_declared_census_travels_to_worker_processes_once():
    import pickle

    from sdclab.pipeline import api

    census = load_census(TOYLAND / "census.toml")
    first, second = (pickle.loads(pickle.dumps(census)) for _ in range(2))
    assert first is second and first.digest == census.digest  # one object per process
    assert pickle.loads(pickle.dumps(census_named("us2010"))) is census_named("us2010")
    release = api.protect(read_records(census, TOYLAND / "persons.csv"), "geometric", seed=3)
    one = api.reconstruct(release, workers=1, node_limit=2000)
    two = api.reconstruct(release, workers=2, node_limit=2000)
    assert one.persons.equals(two.persons)


def test_a_declared_release_whose_cells_exceed_its_total_is_refused(tmp_path):
    from sdclab.pipeline import api
    from sdclab.pipeline.api import read_release
    from sdclab.release import write_release

    census = load_census(TOYLAND / "census.toml")
    release = api.tabulate(read_records(census, TOYLAND / "persons.csv"))
    write_release(release, tmp_path / "release")
    file = tmp_path / "release" / "tables" / "T3.parquet"
    frame = pl.read_parquet(file)
    first = (pl.col("level") == "village") & (pl.int_range(pl.len()).over("level") == 0)
    frame.with_columns(
        count=pl.when(first).then(pl.col("count") + 500).otherwise("count")
    ).write_parquet(file)
    with pytest.raises(
        InputError, match=r"T3.parquet: village V107, cell 0: .* more than T1 there"
    ):
        read_release(tmp_path / "release")
