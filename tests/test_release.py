"""Release directories: exact release content, round trip, atomic writes, malformed releases."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pytest

from sdclab import release as release_module
from sdclab.errors import InputError
from sdclab.release import exact_release, read_release, write_release
from sdclab.tables.catalog import CATALOG


def test_exact_release_round_trip(tmp_path, small_population):
    rel = exact_release(small_population)
    write_release(rel, tmp_path / "rel")
    back = read_release(tmp_path / "rel")
    assert back.mechanism == "none"
    assert back.card == rel.card
    assert set(back.tables) == set(CATALOG)
    for name, frame in rel.tables.items():
        assert back.tables[name].equals(frame), name
    meta = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert meta["tables"]["P12"]["cells"][0] == "male / 0-4"
    assert meta["tables"]["PCT12"]["levels"] == ["nation", "state", "county", "tract"]
    assert meta["randomness"]["fit_for_publication"] is False
    assert meta["input_digest"].startswith("hmac-sha256:")
    assert "no protection" in meta["specification"]["budget"]["summary"]


def test_release_of_selected_tables(tmp_path, tiny_population):
    rel = exact_release(tiny_population, ["P1", "H1"])
    write_release(rel, tmp_path / "rel")
    assert sorted(p.name for p in (tmp_path / "rel" / "tables").iterdir()) == [
        "H1.parquet",
        "P1.parquet",
    ]
    p1 = read_release(tmp_path / "rel").table("P1", "nation")
    assert p1.select("geoid", "cell", "count").rows() == [("US", 0, 10)]


def test_input_digest_is_keyed_and_content_sensitive(tiny_population, monkeypatch):
    base = exact_release(tiny_population, ["P1"]).input_digest
    monkeypatch.setenv("SDCLAB_DIGEST_KEY", "another key, also not secret, 32+ bytes")
    assert exact_release(tiny_population, ["P1"]).input_digest != base
    monkeypatch.setenv("SDCLAB_DIGEST_KEY", "test-key-not-secret-0123456789abcdef")
    older = tiny_population.persons.with_columns(pl.col("age") + 1)
    changed = type(tiny_population)(persons=older, units=tiny_population.units)
    assert exact_release(changed, ["P1"]).input_digest != base
    assert exact_release(tiny_population, ["P1"]).input_digest == base


def test_failed_write_leaves_previous_release(tmp_path, tiny_population, monkeypatch):
    target = tmp_path / "rel"
    write_release(exact_release(tiny_population, ["P1"]), target)
    before = sorted(p.name for p in target.rglob("*"))

    def broken(frame, path):
        raise OSError("disk full")

    monkeypatch.setattr(release_module, "write_parquet", broken)
    with pytest.raises(OSError):
        write_release(exact_release(tiny_population, ["P1", "P8"]), target)
    assert sorted(p.name for p in target.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["rel"]  # no temporary left behind


def _corrupt(path, edit):
    meta = json.loads((path / "release.json").read_text())
    edit(meta)
    (path / "release.json").write_text(json.dumps(meta))


def _write_p1(path, **columns):
    frame = {"level": ["nation"], "geoid": ["US"], "cell": [0], "count": [1]}
    frame.update(columns)
    pl.DataFrame(frame).write_parquet(path / "tables" / "P1.parquet")


MORE_DAMAGE = [
    (lambda p: _corrupt(p, lambda m: m.update(tables=["P1"])), "tables must be a JSON object"),
    (lambda p: _corrupt(p, lambda m: m["specification"].update(budget="none")), "malformed"),
    (lambda p: _corrupt(p, lambda m: m["tables"].update(P1=["x"])), "must be a JSON object"),
    (
        lambda p: _corrupt(p, lambda m: m["tables"]["P1"].update(levels=["nation"])),
        "table P1 has levels that differ from the catalogue",
    ),
    (lambda p: _corrupt(p, lambda m: m.update(microdata="no")), "microdata must be a JSON bool"),
    (lambda p: _write_p1(p, geoid=["XX"]), "geoid 'XX' is not a nation"),
    (lambda p: _write_p1(p, level=["block"], geoid=["01001000100100A"]), "is not a block"),
    (
        lambda p: _write_p1(p, level=pl.Series([None], dtype=pl.String)),
        "column level has missing values",
    ),
    (lambda p: _write_p1(p, cell=[0.0]), "column types"),
    (
        lambda p: pl.DataFrame(
            {"level": ["nation"] * 2, "geoid": ["US"] * 2, "cell": [0, 0], "count": [1, 2]}
        ).write_parquet(p / "tables" / "P1.parquet"),
        "appears more than once",
    ),
    (lambda p: (p / "geography.parquet").unlink(), "geography.parquet: missing"),
    (
        lambda p: pl.DataFrame({"block": ["1234"]}).write_parquet(p / "geography.parquet"),
        "is not a 15-digit geocode",
    ),
]


@pytest.mark.parametrize(("damage", "message"), MORE_DAMAGE)
def test_more_malformed_releases(tmp_path, tiny_population, damage, message):
    test_malformed_release_is_a_clear_error(tmp_path, tiny_population, damage, message)


def test_float_counts_are_kept_not_truncated(tmp_path, tiny_population):
    target = tmp_path / "rel"
    release = exact_release(tiny_population, ["P1"])
    p1 = release.tables["P1"].filter(pl.col("level") == "nation").with_columns(count=pl.lit(3.7))
    write_release(replace(release, tables={"P1": p1}), target)
    assert read_release(target).table("P1")["count"].to_list() == [3.7]


def test_release_records_blocks_without_persons(tmp_path, tiny_population):
    target = tmp_path / "rel"
    write_release(exact_release(tiny_population, ["P1"]), target)
    blocks = pl.read_parquet(target / "geography.parquet")["block"].to_list()
    assert "010010001001002" in blocks  # the block with only a vacant unit
    assert len(read_release(target).geography.blocks) == 4


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: (p / "release.json").unlink(), "release.json: missing"),
        (lambda p: (p / "release.json").write_text("{not json"), "not valid JSON"),
        (lambda p: _corrupt(p, lambda m: m.pop("tables")), "missing key(s) tables"),
        (lambda p: _corrupt(p, lambda m: m.update(format_version=99)), "format_version 99"),
        (lambda p: _corrupt(p, lambda m: m["tables"].update(P99={})), "unknown table(s) P99"),
        (lambda p: (p / "tables" / "P1.parquet").unlink(), "P1.parquet: missing"),
        (lambda p: (p / "tables" / "P1.parquet").write_bytes(b"PAR1garbage"), "not a readable"),
        (
            lambda p: pl.DataFrame(
                {"level": ["block"], "geoid": ["1"], "cell": [0], "count": [1]}
            ).write_parquet(p / "tables" / "P1.parquet"),
            "is not a block of this release's geography",
        ),
        (
            lambda p: pl.DataFrame(
                {"level": ["nation"], "geoid": ["US"], "cell": [5], "count": [1]}
            ).write_parquet(p / "tables" / "P1.parquet"),
            "cell 5 outside 0..0",
        ),
        (
            lambda p: pl.DataFrame(
                {"level": ["nation"], "geoid": ["US"], "count": [1]}
            ).write_parquet(p / "tables" / "P1.parquet"),
            "expected ['level', 'geoid', 'cell', 'count']",
        ),
    ],
)
def test_malformed_release_is_a_clear_error(tmp_path, tiny_population, damage, message):
    target = tmp_path / "rel"
    write_release(exact_release(tiny_population, ["P1"]), target)
    damage(target)
    with pytest.raises(InputError) as info:
        read_release(target)
    assert message in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_release_microdata_is_validated_on_reading(tmp_path, tiny_population):
    release = exact_release(tiny_population, ["P1"])
    with_microdata = type(release)(**{**release.__dict__, "microdata": tiny_population})
    target = tmp_path / "rel"
    write_release(with_microdata, target)
    assert read_release(target).microdata.persons.equals(tiny_population.persons)
    persons = tiny_population.persons.with_columns(pl.col("age").cast(pl.Int64) - 50)
    persons.write_parquet(target / "microdata" / "persons.parquet")
    with pytest.raises(InputError, match="column age"):
        read_release(target)


# ---------------------------------------------------------------------------------------------
# Digests: a release edited after it was written is refused, naming the file
# ---------------------------------------------------------------------------------------------


def _rewrite_p1(path, edit):
    file = path / "tables" / "P1.parquet"
    edit(pl.read_parquet(file)).write_parquet(file)


EDITS = [
    (
        lambda p: _rewrite_p1(p, lambda f: f.with_columns(pl.col("count") + 1)),
        "tables/P1.parquet does not match the digest recorded in release.json",
    ),
    (
        lambda p: _rewrite_p1(p, lambda f: f.slice(1)),
        "tables/P1.parquet does not match the digest recorded in release.json",
    ),
    (
        lambda p: (p / "geography.parquet").write_bytes((p / "geography.parquet").read_bytes()[:9]),
        "geography.parquet does not match the digest recorded in release.json",
    ),
    (
        lambda p: _corrupt(
            p, lambda m: m["digests"]["files"].update({"tables/P1.parquet": "0" * 64})
        ),
        "tables/P1.parquet does not match the digest recorded in release.json",
    ),
    (
        lambda p: _corrupt(p, lambda m: m["parameters"].update(epsilon=1)),
        "release.json was edited after the release was written",
    ),
    (lambda p: _corrupt(p, lambda m: m.update(mechanism="cellkey")), "release.json was edited"),
    (lambda p: _corrupt(p, lambda m: m["digests"].update(files=[])), "digests must be"),
    (
        lambda p: _corrupt(p, lambda m: m["digests"]["files"].update({"../x": "0" * 64})),
        "not a file of the release",
    ),
    (
        lambda p: _corrupt(p, lambda m: m["digests"]["files"].pop("tables/P1.parquet")),
        "records no digest for tables/P1.parquet",
    ),
]


@pytest.mark.parametrize(("edit", "message"), EDITS)
def test_release_edited_after_writing_is_refused(tmp_path, tiny_population, edit, message):
    target = tmp_path / "rel"
    write_release(exact_release(tiny_population, ["P1"]), target)
    edit(target)
    with pytest.raises(InputError) as info:
        read_release(target)
    line = info.value.one_line()
    assert message in line and "\n" not in line


def test_digests_are_recorded_for_every_file(tmp_path, tiny_population):
    release = exact_release(tiny_population, ["P1", "H1"])
    with_microdata = replace(release, microdata=tiny_population)
    write_release(with_microdata, tmp_path / "rel")
    meta = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert meta["digests"]["algorithm"] == "sha256"
    assert sorted(meta["digests"]["files"]) == [
        "geography.parquet",
        "microdata/persons.parquet",
        "microdata/units.parquet",
        "tables/H1.parquet",
        "tables/P1.parquet",
    ]
    assert read_release(tmp_path / "rel").microdata is not None


def test_a_truncated_table_names_the_file_and_its_digest(tmp_path, tiny_population):
    target = tmp_path / "rel"
    write_release(exact_release(tiny_population, ["P1"]), target)
    file = target / "tables" / "P1.parquet"
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    with pytest.raises(InputError) as info:
        read_release(target)
    line = info.value.one_line()
    assert "P1.parquet: not a readable Parquet file" in line
    assert "tables/P1.parquet does not match the digest recorded in release.json" in line
