"""Release directories: exact release content, round trip, atomic writes, malformed releases."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from sdclab import release as release_module
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.core.errors import InputError
from sdclab.pipeline.api import read_release
from sdclab.release import exact_release, write_release
from sdclab.release import writing as release_writing


def test_exact_release_round_trip(tmp_path, small_population):
    rel = exact_release(small_population)
    write_release(rel, tmp_path / "rel")
    back = read_release(tmp_path / "rel")
    assert back.mechanism == "none"
    assert back.card == rel.card
    assert set(back.tables) == set(CATALOG)
    for name, table in rel.tables.items():
        assert back.tables[name] == table, name
    meta = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert meta["tables"]["P12"]["cells"][0] == "male / 0-4"
    assert meta["tables"]["PCT12"]["levels"] == ["nation", "state", "county", "tract"]
    assert meta["randomness"]["fit_for_publication"] is False
    assert meta["input_digest"].startswith("hmac-sha256:")
    assert "no protection" in meta["specification"]["guarantee"]["summary"]
    assert "no protection" in meta["specification"]["common_axis"]["not_measured"]


def test_release_of_selected_tables(tmp_path, tiny_population):
    rel = exact_release(tiny_population, ["P1", "H1"])
    write_release(rel, tmp_path / "rel")
    assert sorted(p.name for p in (tmp_path / "rel" / "tables").iterdir()) == [
        "H1.parquet",
        "P1.parquet",
    ]
    p1 = read_release(tmp_path / "rel").table("P1").frame("nation")
    assert p1.select("geoid", "cell", "label", "count").rows() == [("US", 0, "total", 10)]


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

    monkeypatch.setattr(release_writing, "write_parquet", broken)
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
    (lambda p: _corrupt(p, lambda m: m["specification"].update(guarantee="none")), "malformed"),
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
    """A count is read as stored (3.7, not 3): then its mechanism's check sees it as it is (no
    exact tabulation publishes 3.7 persons)."""
    target = tmp_path / "rel"
    release = exact_release(tiny_population, ["P1"])
    p1 = release.tables["P1"]
    only_nation = {level: sp.csr_matrix(p1.matrix(level).shape) for level in p1.levels}
    only_nation["nation"] = sp.csr_matrix([[3.7]])
    write_release(replace(release, tables={"P1": p1.with_counts(only_nation)}), target)
    assert pl.read_parquet(target / "tables" / "P1.parquet").schema["count"] == pl.Float64
    with pytest.raises(InputError) as info:
        read_release(target)
    assert "P1.parquet: nation US, cell 0: a count of 3.7 is not one mechanism none" in (
        info.value.one_line()
    )


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


# ---------------------------------------------------------------------------------------------
# Published tables: count matrices, suppressed cells, their long form and round trip
# ---------------------------------------------------------------------------------------------


def _with_suppressed_cells(release):
    """The release with P12's first published cell of every block suppressed, and P1 of the
    first block suppressed though it is not empty."""
    p12, p1 = release.tables["P12"], release.tables["P1"]
    counts = p12.matrix("block")
    first = counts.indptr[:-1][np.diff(counts.indptr) > 0]
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))[first]
    mask = sp.csr_matrix(
        (np.ones(len(rows), dtype=bool), (rows, counts.indices[first])), shape=counts.shape
    )
    p1_mask = sp.csr_matrix(([True], ([0], [0])), shape=p1.matrix("block").shape)
    keep = {level: p12.matrix(level) for level in p12.levels}
    tables = {
        **release.tables,
        "P12": p12.with_counts(keep, {"block": mask}),
        "P1": p1.with_counts({lv: p1.matrix(lv) for lv in p1.levels}, {"block": p1_mask}),
    }
    return replace(release, tables=tables)


def test_published_table_views_agree(small_population):
    release = _with_suppressed_cells(exact_release(small_population, ["P1", "P12"]))
    p12 = release.table("P12")
    assert p12.levels == CATALOG["P12"].levels and p12.cell_labels == CATALOG["P12"].cell_labels
    for level in p12.levels:
        matrix, mask = p12.matrix(level), p12.suppressed(level)
        assert matrix.shape == (release.geography.n_units(level), CATALOG["P12"].n_cells)
        assert p12.geoids(level).len() == matrix.shape[0]
        assert not matrix.multiply(mask).nnz  # a suppressed cell holds 0
        dense = p12.dense(level, suppressed=np.nan)
        assert np.array_equal(np.isnan(dense), mask.toarray())
        assert np.array_equal(np.nan_to_num(dense), matrix.toarray())
        assert np.array_equal(p12.dense(level, suppressed=0), matrix.toarray())
        assert p12.dense(level, suppressed=0).dtype == np.int64
        frame = p12.frame(level)
        assert frame.columns == ["level", "geoid", "cell", "label", "count"]
        assert frame.height == matrix.nnz + mask.nnz  # zeros omitted, suppressed cells null
        assert frame["count"].null_count() == mask.nnz
        rows = np.searchsorted(p12.geoids(level).to_numpy(), frame["geoid"].to_numpy().astype(str))
        rebuilt = np.zeros(matrix.shape)
        rebuilt[rows, frame["cell"].to_numpy()] = frame["count"].fill_null(-1).to_numpy()
        assert np.array_equal(rebuilt, p12.dense(level, suppressed=-1))
        assert frame["label"].to_list() == [p12.cell_labels[c] for c in frame["cell"]]
    assert p12.suppressed("block").nnz > 0 and p12.n_suppressed == p12.suppressed("block").nnz
    assert not p12.suppressed("nation").nnz
    assert p12.frame().height == sum(p12.frame(level).height for level in p12.levels)
    with pytest.raises(KeyError, match="not published"):
        release.table("P1").matrix("nowhere")


def test_published_tables_round_trip_with_suppressed_cells(tmp_path, small_population):
    release = _with_suppressed_cells(exact_release(small_population, ["P1", "P12", "H1"]))
    write_release(release, tmp_path / "rel")
    back = read_release(tmp_path / "rel")
    assert set(back.tables) == set(release.tables)
    for name, table in release.tables.items():
        assert back.tables[name] == table, name
        assert back.tables[name].frame().equals(table.frame()), name
    assert back.table("P1").suppressed("block").nnz == 1
    assert back.table("P1").frame("block")["count"][0] is None  # a non-empty cell, withheld
    stored = pl.read_parquet(tmp_path / "rel" / "tables" / "P12.parquet")
    assert stored.columns == ["level", "geoid", "cell", "count"]
    assert stored.equals(release.table("P12").frame(labels=False))


def test_published_table_refuses_what_it_cannot_hold(tiny_population):
    p1 = exact_release(tiny_population, ["P1"]).table("P1")
    counts = {level: p1.matrix(level) for level in p1.levels}
    with pytest.raises(ValueError, match="expected its levels"):
        p1.with_counts({"nation": counts["nation"]})
    with pytest.raises(ValueError, match="shape"):
        p1.with_counts({**counts, "block": sp.csr_matrix((2, 1), dtype=np.int64)})
    with pytest.raises(ValueError, match="NaN or infinite"):
        p1.with_counts({**counts, "nation": sp.csr_matrix([[np.nan]])})
    assert not p1.matrix("nation").data.flags.writeable  # the release's counts are read-only
    assert p1 != p1.with_counts({**counts, "nation": sp.csr_matrix([[11]])})


def test_release_and_table_reprs_are_short(small_population):
    release = replace(exact_release(small_population), microdata=small_population)
    text = repr(release)
    assert text.startswith("<Release none: ") and len(text) < 200, text
    assert f"{len(release.tables)} tables" in text and "no formal guarantee" in text
    assert len(repr(release.table("P12"))) < 200
    assert repr(release.table("P12")).startswith("<PublishedTable P12: 6 levels")


def _redigest(path):
    """Record the digests of the release's files as they are now (a forged release)."""
    meta = json.loads((path / "release.json").read_text())
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name != "release.json")
    meta["digests"]["files"] = {
        p.relative_to(path).as_posix(): release_module.file_digest(p) for p in files
    }
    meta["digests"]["release.json"] = release_module.metadata_digest(meta)
    (path / "release.json").write_text(json.dumps(meta))


def test_an_artifact_the_mechanism_does_not_declare_is_refused(tmp_path, tiny_population):
    target = tmp_path / "rel"
    release = exact_release(tiny_population, ["P1"])
    write_release(release, target)
    (target / "artifacts").mkdir()
    pl.DataFrame({"a": [1]}).write_parquet(target / "artifacts" / "extra.parquet")
    _corrupt(target, lambda m: m.update(artifacts=["extra"]))
    _redigest(target)
    with pytest.raises(InputError) as info:
        read_release(target)
    assert "artifact 'extra' is not one mechanism none publishes" in info.value.one_line()


def _topdown_release(tiny_population, **artifacts):
    from sdclab import protection

    entry = protection.get("topdown")
    release = exact_release(tiny_population, ["P1"])
    return replace(
        release, mechanism="topdown", parameters=entry.parse({}).recorded(), artifacts=artifacts
    )


def _mdf(**columns):
    frame = {
        "person_id": [0],
        "block": ["010010001001001"],
        "unit_type": pl.Series([0], dtype=pl.Int8),
        "sex": pl.Series([1], dtype=pl.Int8),
        "age": pl.Series([30], dtype=pl.Int16),
        "hispanic": pl.Series([0], dtype=pl.Int8),
        "race": pl.Series([1], dtype=pl.Int8),
    }
    return pl.DataFrame({**frame, **columns})


@pytest.mark.parametrize(
    ("artifacts", "message"),
    [
        ({"mdf": _mdf(block=["010010001001009"])}, "block '010010001001009' is not a block"),
        ({"mdf": _mdf(age=["thirty"])}, "column age is String, expected integer"),
        ({"mdf": _mdf().drop("race")}, "expected those of a product"),
        ({"measurements": pl.DataFrame({"level": ["nation"]})}, "expected ['level', 'geoid'"),
    ],
)
def test_artifacts_are_checked_by_their_declaration(tmp_path, tiny_population, artifacts, message):
    target = tmp_path / "rel"
    write_release(_topdown_release(tiny_population, **artifacts), target)
    with pytest.raises(InputError) as info:
        read_release(target)
    line = info.value.one_line()
    assert message in line and f"artifacts/{next(iter(artifacts))}.parquet" in line, line


def _persons_mdf(population):
    """An MDF of as many records as the population has persons (its tables' P1)."""
    n = population.persons.height
    return pl.concat([_mdf()] * n).with_columns(person_id=pl.int_range(n, dtype=pl.Int64))


def test_artifacts_round_trip_and_are_recorded(tmp_path, tiny_population):
    target = tmp_path / "rel"
    release = _topdown_release(tiny_population, mdf=_persons_mdf(tiny_population))
    write_release(release, target)
    meta = json.loads((target / "release.json").read_text())
    assert meta["format_version"] == release_module.FORMAT_VERSION == 3
    assert meta["artifacts"] == ["mdf"] and "mdf" not in meta["tables"]
    assert sorted(meta["digests"]["files"]) == [
        "artifacts/mdf.parquet",
        "geography.parquet",
        "tables/P1.parquet",
    ]
    back = read_release(target)
    assert back.artifacts["mdf"].equals(release.artifacts["mdf"])
    assert back.person_microdata.equals(_persons_mdf(tiny_population))
    assert repr(back) == "<Release topdown: 1 table, artifacts mdf; no formal guarantee>"
