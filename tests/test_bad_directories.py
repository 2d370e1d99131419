"""Directories sdclab reads back are user input too: reconstructions, checkpoints and releases.

A malformed one is refused with one clear line (an :class:`InputError`; exit code 2 on the command
line) naming the file — never another exception, exit code 1, a traceback or a process abort
(polars trusts Parquet page headers: a flipped byte there used to abort ``reidentify`` with 134).
A forged release (release.json edited, then its digest recomputed) is refused by the content
checks, not only by the digest check.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sdclab import protection
from sdclab.attacks.reconstruction import TractResult
from sdclab.attacks.reconstruction_files import read_reconstruction
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.core.execution import Checkpoint, load_result, run_tasks, save_result
from sdclab.pipeline.api import read_release
from sdclab.release import exact_release, metadata_digest, write_release

DATA = Path(__file__).parent / "data"
POPULATION = DATA / "good" / "population" / "base_csv"
SDCLAB = [sys.executable, "-m", "sdclab"]
NOT_OF_THIS_RUN = "it is damaged or not a checkpoint of this run"


def one_line(error: InputError) -> str:
    line = error.one_line()
    assert line.strip() and "\n" not in line, line
    return line


# ---------------------------------------------------------------------------------------------
# Reconstruction directories
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A release of the base population and its reconstruction (with solution variability)."""
    root = tmp_path_factory.mktemp("made")
    runner = CliRunner()
    result = runner.invoke(app, ["tabulate", str(POPULATION), "--out", str(root / "rel")])
    assert result.exit_code == 0, result.output
    args = ["reconstruct", str(root / "rel"), "--workers", "1", "--variability"]
    result = runner.invoke(app, [*args, "--out", str(root / "recon")])
    assert result.exit_code == 0, result.output
    return root / "rel", root / "recon"


@pytest.fixture
def recon(made: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the reconstruction, to damage."""
    shutil.copytree(made[1], tmp_path / "recon")
    return tmp_path / "recon"


def negative_value_count(file: Path) -> None:
    """Make the first data page header of ``file`` claim a negative number of values.

    The header is Thrift compact: after the page type and sizes comes the data page header
    (field 5, a struct: byte 0x2c) whose first field (0x15) is num_values, a zigzag varint; an
    odd single-byte varint is negative. polars then tries to allocate ~2^61 bytes and aborts.
    """
    data = bytearray(file.read_bytes())
    start = pq.ParquetFile(file).metadata.row_group(0).column(0).data_page_offset
    at = data.index(b"\x2c\x15", start, start + 24) + 2
    assert data[at] < 0x80 and data[at] % 2 == 0, "num_values is not a small varint"
    data[at] |= 1
    file.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("reidentify", "persons.parquet"),
        ("reidentify", "tracts.parquet"),
        ("reidentify", "solvar.parquet"),
        ("evaluate", "persons.parquet"),
    ],
)
def test_damaged_page_header_is_one_line_not_an_abort(
    made: tuple[Path, Path], recon: Path, tmp_path: Path, command: str, name: str
) -> None:
    release, _ = made
    negative_value_count(recon / name)
    out = str(tmp_path / "out")
    truth = ["--truth", str(POPULATION), "--out", out]
    if command == "reidentify":
        args = ["reidentify", str(recon), "--release", str(release), *truth]
    else:
        args = ["evaluate", str(release), "--recon", str(recon), *truth]
    done = subprocess.run(SDCLAB + args, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{recon / name}: not a readable Parquet file" in done.stderr
    assert not Path(out).exists()


def _metrics(edit: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def damage(recon: Path) -> None:
        metrics = json.loads((recon / "metrics.json").read_text())
        edit(metrics)
        (recon / "metrics.json").write_text(json.dumps(metrics))

    return damage


def _frame(name: str, edit: Callable[[pl.DataFrame], pl.DataFrame]) -> Callable[[Path], None]:
    def damage(recon: Path) -> None:
        edit(pl.read_parquet(recon / name)).write_parquet(recon / name)

    return damage


METRICS_DAMAGE = [
    (lambda r: (r / "metrics.json").write_text("{oops"), "metrics.json: not valid JSON"),
    (lambda r: (r / "metrics.json").write_bytes(b'{"a": "\xff"}'), "metrics.json: not valid JSON"),
    (lambda r: (r / "metrics.json").write_text("[1, 2]"), "metrics.json: expected a JSON object"),
    (lambda r: (r / "metrics.json").write_text("{}"), "metrics.json: missing key(s) mechanism"),
    (_metrics(lambda m: m.pop("tracts")), "metrics.json: missing key(s) tracts"),
    (_metrics(lambda m: m.update(persons="6")), "metrics.json: persons must be an integer"),
    (_metrics(lambda m: m.update(blocks=True)), "metrics.json: blocks must be an integer"),
    (_metrics(lambda m: m.update(statuses=[])), "metrics.json: statuses must be a JSON object"),
    (_metrics(lambda m: m.update(release=5)), "metrics.json: release must be a string"),
    (_metrics(lambda m: m.update(variability=0)), "metrics.json: variability must be a JSON"),
    (_metrics(lambda m: m.update(block_only="no")), "metrics.json: block_only must be true or"),
    (_metrics(lambda m: m.update(block_only=0)), "metrics.json: block_only must be true or"),
    (_metrics(lambda m: m.update(persons=7)), "persons.parquet: 6 rows, but"),
    (_metrics(lambda m: m.update(tracts=2)), "tracts.parquet: 1 rows, but"),
]


@pytest.mark.parametrize(("damage", "message"), METRICS_DAMAGE)
def test_malformed_metrics_are_refused_by_evaluate(
    made: tuple[Path, Path], recon: Path, tmp_path: Path, damage: Any, message: str
) -> None:
    """``evaluate --recon`` copies metrics.json into its own figures: only a checked one."""
    damage(recon)
    args = ["evaluate", str(made[0]), "--truth", str(POPULATION), "--recon", str(recon)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.strip().count("\n") == 0, result.output


PERSONS = "persons.parquet"
RECONSTRUCTION_DAMAGE = [
    (lambda r: (r / PERSONS).unlink(), "persons.parquet: missing"),
    (lambda r: (r / PERSONS).write_bytes(b"PAR1garbage"), "not a readable Parquet file"),
    (_frame(PERSONS, lambda f: f.drop("race")), "persons.parquet: columns"),
    (_frame(PERSONS, lambda f: f.drop("age_min")), "persons.parquet: columns"),
    (_frame(PERSONS, lambda f: f.with_columns(colour=pl.lit(1))), "persons.parquet: columns"),
    (
        _frame(PERSONS, lambda f: f.with_columns(pl.col("age").cast(pl.String))),
        "persons.parquet: column types",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(pl.col("block").cast(pl.Int64))),
        "persons.parquet: column types",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(pl.col("sex").cast(pl.Float64))),
        "persons.parquet: column types",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(block=pl.lit("01001"))),
        "persons.parquet: block '01001' is not a 15-digit block geocode",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(block=pl.lit(None, pl.String))),
        "persons.parquet: block None is not",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(sex=pl.lit(9, pl.Int64))),
        "persons.parquet: sex 9 outside 1..2",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(age=pl.lit(-1, pl.Int16))),
        "persons.parquet: age -1 outside 0..115",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(race=pl.lit(2**40, pl.Int64))),
        "persons.parquet: race 1099511627776 outside 1..63",
    ),
    (
        _frame(PERSONS, lambda f: f.with_columns(age_max=pl.lit(None, pl.Int16))),
        "persons.parquet: column age_max has missing values",
    ),
    (_frame("tracts.parquet", lambda f: f.drop("mode")), "tracts.parquet: columns"),
    (
        _frame("tracts.parquet", lambda f: f.with_columns(pl.col("variables").cast(pl.String))),
        "tracts.parquet: column variables is String, expected integer",
    ),
    (
        _frame("tracts.parquet", lambda f: f.with_columns(tract=pl.lit("x"))),
        "tracts.parquet: tract 'x' is not an 11-digit tract geocode",
    ),
    (lambda r: (r / "tracts.parquet").write_bytes(b""), "tracts.parquet: not a readable Parquet"),
    (lambda r: (r / "metrics.json").unlink(), "metrics.json: missing"),
]


@pytest.mark.parametrize(("damage", "message"), RECONSTRUCTION_DAMAGE)
def test_malformed_reconstruction_is_a_clear_error(recon: Path, damage: Any, message: str) -> None:
    damage(recon)
    with pytest.raises(InputError) as info:
        read_reconstruction(recon)
    assert message in one_line(info.value)


def test_reconstruction_reads_back(made: tuple[Path, Path]) -> None:
    back = read_reconstruction(made[1])
    assert back.persons.height == 6 and back.tracts.height == 1
    assert back.persons.schema["block"] == pl.String


REIDENTIFY_DAMAGE = [
    (_metrics(lambda m: m.pop("release")), False, "metrics.json: records no release"),
    (_metrics(lambda m: m.update(release="")), False, "release must name the release directory"),
    (_frame("solvar.parquet", lambda f: f.drop("solvar")), True, "solvar.parquet: columns"),
    (
        _frame("solvar.parquet", lambda f: f.with_columns(pl.col("solvar").cast(pl.String))),
        True,
        "solvar.parquet: column solvar is String, expected number",
    ),
    (
        _frame("solvar.parquet", lambda f: f.with_columns(block=pl.lit("block"))),
        True,
        "solvar.parquet: block 'block' is not a 15-digit block geocode",
    ),
    (
        lambda r: (r / "solvar.parquet").write_bytes(b"not parquet"),
        True,
        "solvar.parquet: not a readable Parquet file",
    ),
]


@pytest.mark.parametrize(("damage", "give_release", "message"), REIDENTIFY_DAMAGE)
def test_malformed_reconstruction_is_refused_by_reidentify(
    made: tuple[Path, Path],
    recon: Path,
    tmp_path: Path,
    damage: Any,
    give_release: bool,
    message: str,
) -> None:
    damage(recon)
    args = ["reidentify", str(recon), "--truth", str(POPULATION), "--out", str(tmp_path / "out")]
    if give_release:
        args += ["--release", str(made[0])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.strip().count("\n") == 0, result.output
    assert not (tmp_path / "out").exists()


def test_undamaged_reconstruction_is_reidentified(made: tuple[Path, Path], tmp_path: Path) -> None:
    args = ["reidentify", str(made[1]), "--truth", str(POPULATION)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    name: str
    value: int
    share: float
    cells: np.ndarray
    extra: dict | None


def piece(value: int) -> Piece:
    return Piece(f"t{value}", value, value / 4, np.full(value, value), {"a": np.arange(value)})


NAMES = ["tract 0", "tract 1", "tract 2"]


def run(directory: Path) -> list[Piece]:
    return run_tasks(piece, [0, 1, 2], 1, names=NAMES, checkpoint=Checkpoint(directory, "k", Piece))


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A checkpoint directory of a finished run of three tasks."""
    run(tmp_path / "ck")
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == [
        "checkpoint.json",
        "task-0000000.npz",
        "task-0000001.npz",
        "task-0000002.npz",
    ]
    return tmp_path / "ck"


def arrays_of(file: Path) -> dict[str, np.ndarray]:
    with np.load(file) as data:
        return {key: data[key] for key in data.files}


def resave(file: Path, edit: Callable[[dict[str, np.ndarray]], Any]) -> None:
    arrays = arrays_of(file)
    edit(arrays)
    with file.open("wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]


def flip_last_data_byte(file: Path) -> None:
    """Damage the stored bytes of the archive's first array (its CRC no longer matches)."""
    with zipfile.ZipFile(file) as archive:
        info = archive.infolist()[0]
    data = bytearray(file.read_bytes())
    header = data[info.header_offset : info.header_offset + 30]
    name_length = int.from_bytes(header[26:28], "little")
    extra_length = int.from_bytes(header[28:30], "little")
    at = info.header_offset + 30 + name_length + extra_length + info.compress_size - 1
    data[at] ^= 0xFF
    file.write_bytes(bytes(data))


def _copy(source: str, target: str) -> Callable[[Path], Any]:
    return lambda ck: shutil.copy(ck / source, ck / target)


def _move(source: str, target: str) -> Callable[[Path], Any]:
    return lambda ck: (ck / source).rename(ck / target)


def save_npy(file: Path) -> None:
    """A bare .npy array (np.load returns an array, not an archive)."""
    with file.open("wb") as handle:
        np.save(handle, np.arange(3))


TASK = "task-0000001.npz"
ARABIC_DIGITS = "task-" + "\u0663" * 7 + ".npz"
"""int() reads these digits (as 3333333), a task number is ASCII."""
CHECKPOINT_DAMAGE = [
    (lambda ck: (ck / "checkpoint.json").write_text('{"key": '), "checkpoint.json", "not valid"),
    (lambda ck: (ck / "checkpoint.json").write_bytes(b"\xff\xfe"), "checkpoint.json", "not valid"),
    (
        lambda ck: (ck / "checkpoint.json").write_text('"k"'),
        "checkpoint.json",
        "not a checkpoint manifest",
    ),
    (
        lambda ck: (ck / "checkpoint.json").write_text('{"key": "k"}'),
        "checkpoint.json",
        "not a checkpoint manifest",
    ),
    (lambda ck: (ck / "checkpoint.json").unlink(), "task-0000000.npz", "without checkpoint.json"),
    (
        lambda ck: (ck / TASK).write_bytes((ck / TASK).read_bytes()[:100]),
        TASK,
        "not a readable .npz file",
    ),
    (lambda ck: (ck / TASK).write_bytes(b""), TASK, "not a readable .npz file"),
    (lambda ck: flip_last_data_byte(ck / TASK), TASK, "an array cannot be read"),
    (lambda ck: save_npy(ck / TASK), TASK, "not an .npz archive"),
    (lambda ck: resave(ck / TASK, lambda a: a.pop("value::share")), TASK, "lacks field(s) share"),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"value::colour": np.array(1)})),
        TASK,
        "holds 'value::colour', not a field of Piece",
    ),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"wrong": np.array(1)})),
        TASK,
        "holds 'wrong', not a field of Piece",
    ),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"none::value": np.zeros(0)})),
        TASK,
        "field value",  # twice, or not an int
    ),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"item::value::x": np.zeros(0)})),
        TASK,
        "holds items of value, which is not a dict field",
    ),
    (
        lambda ck: resave(
            ck / TASK, lambda a: a.update({"value::cells": np.array([1, "a"], dtype=object)})
        ),
        TASK,
        "Object arrays cannot be loaded",
    ),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"value::name": np.array(7)})),
        TASK,
        "field name is not one str",
    ),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"value::value": np.array(1.5)})),
        TASK,
        "field value is not one int",
    ),
    (
        lambda ck: resave(ck / TASK, lambda a: a.update({"value::share": np.arange(2.0)})),
        TASK,
        "field share is not one float",
    ),
    (_copy(TASK, "task-1.npz"), "task-1.npz", "expected a file task-NNNNNNN.npz"),
    (_copy(TASK, "task-00000001.npz"), "task-00000001.npz", "expected a file task-NNNNNNN"),
    (_copy(TASK, "task-abcdefg.npz"), "task-abcdefg.npz", "expected a file task-NNNNNNN"),
    (_copy(TASK, ARABIC_DIGITS), ARABIC_DIGITS, "expected a file task-NNNNNNN"),
    (_copy(TASK, "task-0000001.npz.old"), "task-0000001.npz.old", "expected a file task-"),
    (lambda ck: (ck / "task-0000003.npz").mkdir(), "task-0000003.npz", "expected a file task-"),
    (_move(TASK, "task-0000003.npz"), "task-0000003.npz", "task 3 beyond the run's 3 tasks"),
    (_copy(TASK, "task-9999999.npz"), "task-9999999.npz", "task 9999999 beyond the run's 3"),
]


@pytest.mark.parametrize(("damage", "name", "message"), CHECKPOINT_DAMAGE)
def test_malformed_checkpoint_is_a_clear_error(
    checkpoint: Path, damage: Any, name: str, message: str
) -> None:
    damage(checkpoint)
    with pytest.raises(InputError) as info:
        run(checkpoint)
    line = one_line(info.value)
    assert name in line and message in line and NOT_OF_THIS_RUN in line, line
    assert "remove it or use an empty directory" in line


def test_undamaged_checkpoint_resumes(checkpoint: Path) -> None:
    results = run(checkpoint)
    assert [r.value for r in results] == [0, 1, 2] and results[2].name == "t2"
    assert results[2].share == 0.5 and results[2].extra is not None
    assert np.array_equal(results[2].extra["a"], [0, 1])


def test_checkpoint_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ck").write_text("")
    with pytest.raises(InputError, match="exists and is not a directory"):
        run(tmp_path / "ck")


def test_result_types_of_the_checkpoints_round_trip(tmp_path: Path) -> None:
    """The field checks accept what the real tasks save: a tract and a TopDown parent."""
    from sdclab.protection.topdown_engine import Outcome

    tract = TractResult(
        tract=1001020100,
        block=np.array([10010201001001]),
        cell=np.array([5]),
        count=np.array([2]),
        status="Optimal",
        mode="exact",
        deviation=0.0,
        seconds=0.25,
        variables=6,
        constraints=8,
    )
    outcome = Outcome(np.arange(6).reshape(2, 3), {"P1": np.arange(2)}, 1.5)
    for result in (tract, outcome):
        save_result(result, tmp_path / "task-0000000.npz")
        back = load_result(type(result), tmp_path / "task-0000000.npz")
        assert type(back) is type(result)
    resave(tmp_path / "task-0000000.npz", lambda a: a.update({"value::seconds": np.array("x")}))
    with pytest.raises(InputError, match="field seconds is not one float"):
        load_result(Outcome, tmp_path / "task-0000000.npz")
    save_result(tract, tmp_path / "task-0000000.npz")
    resave(tmp_path / "task-0000000.npz", lambda a: a.update({"value::status": np.array(0)}))
    with pytest.raises(InputError, match="field status is not one str"):
        load_result(TractResult, tmp_path / "task-0000000.npz")


# ---------------------------------------------------------------------------------------------
# Forged releases: release.json edited and its digest recomputed
# ---------------------------------------------------------------------------------------------


def forge(path: Path, edit: Callable[[dict[str, Any]], Any], redigest: bool = True) -> None:
    """Edit release.json; with ``redigest`` record the digest of the edited content, so that
    only the content checks can tell."""
    file = path / "release.json"
    meta = json.loads(file.read_text())
    edit(meta)
    if redigest:
        meta["digests"]["release.json"] = metadata_digest(meta)
    file.write_text(json.dumps(meta))


@pytest.fixture
def release(tmp_path: Path, tiny_population: Any) -> Path:
    write_release(exact_release(tiny_population, ["P1"]), tmp_path / "rel")
    return tmp_path / "rel"


def test_release_without_digests_is_refused(release: Path) -> None:
    forge(release, lambda m: m.pop("digests"), redigest=False)
    with pytest.raises(InputError) as info:
        read_release(release)
    assert "release.json records no digests" in one_line(info.value)


FORGERIES = [
    (lambda m: m.update(mechanism="nonesuch"), "release.json: unknown mechanism 'nonesuch'"),
    (lambda m: m.update(mechanism=""), "release.json: unknown mechanism ''"),
    (lambda m: m["parameters"].update(epsilon=1), "mechanism none: unknown parameter 'epsilon'"),
    (
        lambda m: m.update(mechanism="cellkey", parameters={"bound": "x"}),
        "mechanism cellkey, parameter bound",
    ),
    (
        lambda m: m.update(mechanism="topdown", parameters={"product": "sf1"}),
        "mechanism topdown, parameter product",
    ),
    (
        lambda m: m.update(mechanism="geometric", parameters={"epsilon": [1]}),
        "mechanism geometric, parameter epsilon",
    ),
    (
        lambda m: m.update(mechanism="swap", parameters={"same_tract": "0.5"}),
        "mechanism swap",
    ),
    (  # reading a release never opens a path it names
        lambda m: m.update(mechanism="topdown", parameters={"strategy": "/dev/zero"}),
        "parameter strategy names a file ('/dev/zero')",
    ),
    (
        lambda m: m.update(mechanism="safetab_h", parameters={"iterations": "/etc/hosts"}),
        "parameter iterations names a file",
    ),
]


@pytest.mark.parametrize(("edit", "message"), FORGERIES)
def test_forged_release_is_refused_by_its_content(release: Path, edit: Any, message: str) -> None:
    forge(release, edit)
    with pytest.raises(InputError) as info:
        read_release(release)
    line = one_line(info.value)
    assert message in line
    assert "edited" not in line and "does not match" not in line, "the digest check refused it"


QUICK = {
    "swap": {},
    "swap-low": {},
    "swap-high": {"max_rounds": "3"},
    "psa": {"rate": "0.1", "match_adults": "true"},
    "topdown": {"product": "pl94", "workers": "1", "measurements": "false"},
    "cellkey": {"ptable": "maxent", "bound": "3", "variance": "2", "pstay": "0.5"},
    "geometric": {"epsilon": "8", "split": "even"},
    "truncated": {"epsilon": "1.5", "delta": "0.00002", "nonnegative": "true"},
    "safetab_h": {"rho_regional": "0.01"},
    "suppress": {"complementary": "true"},
}
"""A quick release of every mechanism that protects data, some with settings that differ from
the defaults (their JSON form must parse back too)."""


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Path]]:
    from sdclab.protection.cellkey import assign_record_keys

    population = synthesize(1_500, seed=17)
    population = assign_record_keys(population, 256, np.random.default_rng(2))
    out = {}
    for name, settings in {**QUICK, "none": {}}.items():
        if name == "none":
            made = exact_release(population, ["P1", "P12"])
        else:
            made = protection.run(name, population, settings, 3)
        path = tmp_path_factory.mktemp(name) / "rel"
        write_release(made, path)
        out[name] = (settings, path)
    return out


def test_every_mechanism_is_round_tripped() -> None:
    assert set(QUICK) | {"none", "gaussian"} == set(protection.MECHANISMS)


@pytest.mark.parametrize("name", [*QUICK, "none"])
def test_release_of_every_mechanism_reads_back(
    releases: dict[str, tuple[Any, Path]], name: str
) -> None:
    settings, path = releases[name]
    back = read_release(path)
    entry = protection.get(name)
    assert back.mechanism == name
    assert entry.parse(back.parameters).recorded() == entry.parse(settings).recorded()
    if name != "none":  # the exact tabulation is made without the mechanism's run
        # what the release says about its noise travels in it: the attack reads only the release
        assert back.noise == entry.noise(entry.parse(back.parameters)).to_dict()
        assert back.noise["distribution"] and back.noise["published"]


def test_gaussian_parameters_parse_back_from_json() -> None:
    """Gaussian has a card but cannot protect yet: its parameters round-trip all the same."""
    entry = protection.get("gaussian")
    for settings in ({"sigma2": "100", "queries": "3"}, {"rho": "0.25", "neighbours": "unbounded"}):
        params = entry.parse(settings)
        written = json.loads(json.dumps(params.model_dump(mode="json")))
        assert entry.parse(written) == params


def test_a_release_table_of_a_type_polars_cannot_take_is_one_line(
    release: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A decimal256 count column would make polars panic (printing a Rust backtrace)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sdclab.release import file_digest

    file = release / "tables" / "P1.parquet"
    table = pq.read_table(file)
    count = pa.array([int(v) for v in table["count"].to_pylist()], pa.decimal256(50, 0))
    pq.write_table(table.set_column(table.schema.get_field_index("count"), "count", count), file)
    forge(release, lambda m: m["digests"]["files"].update({"tables/P1.parquet": file_digest(file)}))
    with pytest.raises(InputError) as info:
        read_release(release)
    assert "P1.parquet: not a readable Parquet file" in one_line(info.value)
    assert "panic" not in capfd.readouterr().err.lower()
