"""Experiments: the TOML file, clear errors, a tiny study end to end, reuse of finished steps."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sdclab.attacks.reconstruction import NODE_LIMIT
from sdclab.censuses.us2010.population.io import write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.pipeline.experiment import Experiment, load_experiment, run_spec

TINY = """
[population]
persons = 1500
seed = 7

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "swap-high"
seed = 2

[[mechanisms]]
name = "psa"
settings = { rate = "0.1" }
label = "psa-10"

[[mechanisms]]
name = "topdown"
settings = { product = "pl94", measurements = false }
label = "topdown-pl94"

[[mechanisms]]
name = "cellkey"
settings = { ptable = "maxent", bound = 3, variance = 2 }

[[mechanisms]]
name = "geometric"
settings = { epsilon = "8" }

[[mechanisms]]
name = "safetab_h"

[[mechanisms]]
name = "suppress"

[attacks]
workers = 1
attackers = ["census", "commercial"]
time_limit = 8
"""


def test_experiment_file_round_trip(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(TINY)
    experiment = load_experiment(path)
    assert [m.title for m in experiment.mechanisms] == [
        "none",
        "swap-high",
        "psa-10",
        "topdown-pl94",
        "cellkey",
        "geometric",
        "safetab_h",
        "suppress",
    ]
    assert experiment.population.persons == 1500
    assert Experiment.model_validate(experiment.model_dump()) == experiment


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TINY.replace("seed = 7", "seed = 7\ncolour = 1"), r"unknown key population\.colour"),
        (TINY.replace("persons = 1500", "persns = 1500"), "did you mean 'persons'"),
        (TINY.replace('name = "none"', 'name = "nope"'), "unknown mechanism 'nope'"),
        (TINY.replace('name = "none"', 'name = "non"'), "did you mean 'none'"),
        (TINY.replace('rate = "0.1"', 'rate = "2"'), "parameter rate"),
        (TINY.replace("persons = 1500", "persons = -5"), "population.persons"),
        (TINY.replace('"census", "commercial"', '"spy"'), "attacks.attackers"),
        ("[population\npersons = 3", "not valid TOML"),
        (TINY.replace('label = "psa-10"', 'label = "none"'), "distinct labels"),
    ],
)
def test_bad_experiment_files_are_clear_errors(tmp_path, text, message):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_experiment(path)
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.output.startswith("error: ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("time_limit", [2, pytest.param(8, marks=pytest.mark.slow)])
def test_tiny_experiment_end_to_end_and_reuse(tmp_path, time_limit):
    """TINY's study end to end. Some of its tract programs (solution variability, the suppressed
    release's reconstruction) stop only at the time limit: 2 s by default, TINY's 8 s in the slow
    run. Nothing asserted depends on where a program stopped."""
    path = tmp_path / "exp.toml"
    path.write_text(TINY.replace("time_limit = 8", f"time_limit = {time_limit}"))
    out = tmp_path / "out"
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(path), "--out", str(out)])
    assert first.exit_code == 0, first.output
    report = (out / "report.html").read_text()
    assert (
        report.startswith("<!DOCTYPE html>")
        and "<script" not in report
        and "http" not in (report.replace('xmlns="http://www.w3.org/2000/svg"', ""))
    )
    results = json.loads((out / "results.json").read_text())
    assert set(results) == {
        "schema_version",
        "population",
        "population_replicates",
        "mechanisms",
        "replicates",
        "steps",
        "provenance",
    }
    assert results["population_replicates"] == []  # one population
    for title in ("none", "swap-high", "psa-10"):
        assert title in report
        entry = results["mechanisms"][title]
        assert {
            "budget",
            "specification",
            "accuracy_by_level",
            "reconstruction",
            "reconstruction_agreement",
            "reidentification",
        } <= set(entry)
        assert set(entry["reidentification"]) == {"census", "commercial"}
    assert results["mechanisms"]["none"]["accuracy_by_level"]["block"]["mean_mae"] == 0
    # reconstructions stop at a limit of work by default: a rerun reproduces them
    assert results["provenance"]["attacks"]["node_limit"] == NODE_LIMIT
    assert results["mechanisms"]["geometric"]["reconstruction"]["node_limit"] == NODE_LIMIT
    # a pl94 release determines neither sex nor age: reidentification is reported not applicable
    pl94 = results["mechanisms"]["topdown-pl94"]
    assert "topdown-pl94" in report
    assert set(pl94["reidentification"]) == {"census", "commercial"}
    assert "sex, age" in pl94["reidentification"]["census"]["not_measured"]
    ckm = results["mechanisms"]["cellkey"]["risk"]
    assert {"bound_disclosure", "pinned", "averaging", "design", "repeated_queries"} <= set(ckm)
    assert "Cell key method: cellkey" in report and "Choosing (D, V)" in report
    assert "block" in results["mechanisms"]["geometric"]["diagnostics"]["tails"]
    assert "Tails of per-cell noise: geometric" in report
    safetab = results["mechanisms"]["safetab_h"]
    assert safetab["diagnostics"]["group_accuracy"]
    assert "Population-group tables: safetab_h" in report
    assert "no person tables" in safetab["reidentification"]["census"]["not_measured"]
    assert "reconstruction" in results["mechanisms"]["suppress"]
    assert "Suppression: suppress" in report
    assert results["steps"]["reused"] == []

    second = runner.invoke(app, ["run", str(path), "--out", str(out)])
    assert second.exit_code == 0
    again = json.loads((out / "results.json").read_text())
    assert again["steps"]["computed"] == []
    assert len(again["steps"]["reused"]) == len(results["steps"]["computed"])
    assert again.pop("provenance")["run_at"] >= results.pop("provenance")["run_at"]  # a new run
    again.pop("steps"), results.pop("steps")
    assert again == results


def test_population_directory_is_read_relative_and_its_content_is_in_the_digest(tmp_path):
    runner = CliRunner()
    pop = tmp_path / "pop"
    assert (
        runner.invoke(app, ["synth", "-n", "800", "--seed", "1", "--out", str(pop)]).exit_code == 0
    )
    path = tmp_path / "exp.toml"
    path.write_text(
        '[population]\npath = "pop"\n\n[[mechanisms]]\nname = "none"\n\n'
        "[attacks]\nreconstruct = false\nattackers = []\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert results["population"]["persons"] == 800
    assert results["population"]["source"] == {"path": str(pop.resolve())}  # no seed made it
    assert "not attacked" in (out / "report.html").read_text()
    # new content under the same path: the population and everything after it is recomputed
    assert (
        runner.invoke(app, ["synth", "-n", "900", "--seed", "2", "--out", str(pop)]).exit_code == 0
    )
    assert runner.invoke(app, ["run", str(path), "--out", str(out)]).exit_code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["population"]["persons"] == 900
    assert results["steps"]["reused"] == []


def test_labels_cannot_escape_the_output_directory(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(TINY.replace('label = "psa-10"', 'label = "../../outside"'))
    with pytest.raises(InputError, match="label"):
        load_experiment(path)


ONE_RELEASE = (
    '[population]\npath = "pop"\n\n[[mechanisms]]\nname = "none"\n\n'
    "[attacks]\nreconstruct = false\nattackers = []\n"
)


def modes_under(root: Path) -> dict[str, int]:
    """The permission bits of ``root`` and of everything below it."""
    return {
        p.relative_to(root.parent).as_posix(): stat.S_IMODE(p.lstat().st_mode)
        for p in [root, *root.rglob("*")]
    }


def allowed(modes: dict[str, int], root: Path, directory: int, file: int) -> dict[str, int]:
    """The entries of ``modes`` that allow more than ``directory`` or ``file`` bits."""
    return {
        name: mode
        for name, mode in modes.items()
        if mode & ~(directory if (root.parent / name).is_dir() else file)
    }


def test_copies_of_a_population_are_never_more_readable_than_it(tmp_path):
    """A population 0600 in 0700 stays so in every file and directory of an experiment's
    directory, and a looser copy an earlier run left is tightened."""
    pop = tmp_path / "pop"
    write_population(synthesize(300, seed=3), pop)
    (tmp_path / "exp.toml").write_text(ONE_RELEASE)
    previous = os.umask(0o022)  # the usual umask, whatever the test runner's
    try:
        out = tmp_path / "out"
        run_spec(load_experiment(tmp_path / "exp.toml"), out, lambda _: None)
        loose = modes_under(out / "steps")
        assert allowed(loose, out / "steps", 0o700, 0o600)  # 0644 in 0755, as the source
        os.chmod(pop, 0o700)
        for file in pop.iterdir():
            os.chmod(file, 0o600)
        run_spec(load_experiment(tmp_path / "exp.toml"), out, lambda _: None)
    finally:
        os.umask(previous)
    written = modes_under(out)
    assert not allowed(written, out, 0o700, 0o600)
    copy = next((out / "steps").glob("population-*"))
    assert {"persons.parquet", "units.parquet"} <= {p.name for p in copy.iterdir()}
    assert set(modes_under(out / "steps")) == set(loose)  # reused, not rewritten: tightened
    assert written["out/results.json"] == written["out/results.csv"] == 0o600


@pytest.mark.parametrize(
    ("directory", "files", "limit"),
    [
        (0o700, 0o600, (0o700, 0o600)),
        (0o750, 0o640, (0o750, 0o640)),  # the group may read: so may it read the copies
        (0o711, 0o644, (0o711, 0o644)),
        (0o700, 0o644, (0o700, 0o600)),  # no one else may enter: no one else reads a copy
        (0o500, 0o400, (0o700, 0o600)),  # the owner keeps writing what it writes
    ],
    ids=["0600-in-0700", "0640-in-0750", "0644-in-0711", "0644-in-0700", "0400-in-0500"],
)
def test_a_copy_allows_at_most_what_its_source_grants(tmp_path, directory, files, limit):
    from sdclab.censuses.us2010.population.io import source_modes

    pop = tmp_path / "pop"
    write_population(synthesize(100, seed=3), pop)
    for file in pop.iterdir():
        os.chmod(file, files)
    os.chmod(pop, directory)
    try:
        modes = source_modes(pop)
    finally:
        os.chmod(pop, 0o700)
    assert (modes.directory, modes.file) == limit


@pytest.mark.parametrize("existing", [False, True])
def test_a_run_ended_by_an_os_error_leaves_no_marker(tmp_path, monkeypatch, existing):
    """A file that cannot be read or written mid-run (the command line's one line, exit 2) is
    cleaned up like bad input: no stray output marker in a directory the run made or found
    empty."""
    import errno

    from sdclab.pipeline.experiment import Runner

    def fails(self):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(Runner, "run", fails)
    path = tmp_path / "exp.toml"
    path.write_text('[population]\npersons = 200\n\n[[mechanisms]]\nname = "none"\n')
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 2 and result.output == "error: Invalid argument\n"
    assert (list(out.iterdir()) == []) if existing else not out.exists()
