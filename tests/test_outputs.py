"""Outputs are never clobbered: only a complete output of the command's own kind is replaced, by
an atomic exchange, and what a killed writer leaves behind is cleaned by the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sdclab.censuses.us2010.population.io import read_population, write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core import fileio
from sdclab.core.errors import InputError
from sdclab.pipeline.api import read_release


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A population, its exact release and a reconstruction of it."""
    root = tmp_path_factory.mktemp("made")
    population = synthesize(800, seed=8)
    write_population(population, root / "pop")
    assert run("tabulate", root / "pop", "--out", root / "rel").exit_code == 0
    result = run("reconstruct", root / "rel", "--workers", "1", "--out", root / "recon")
    assert result.exit_code == 0, result.output
    return root


def snapshot(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_synth_never_replaces_a_real_population_directory(made, tmp_path):
    real = tmp_path / "census2020"
    write_population(read_population(made / "pop"), real)
    (real / fileio.OUTPUT_MARKER).unlink()  # as the agency's own files would be: no marker
    (real / "README.md").write_text("confidential: do not delete")
    (real / "archive").mkdir()
    (real / "archive" / "persons-2019.parquet").write_bytes(b"old")
    before = snapshot(real)
    result = run("synth", "-n", "500", "--seed", "1", "--out", real)
    assert result.exit_code == 2 and "not an sdclab output" in result.output
    assert snapshot(real) == before


def test_an_output_holding_files_of_its_user_is_not_replaced(made, tmp_path):
    pop = tmp_path / "pop"
    assert run("synth", "-n", "500", "--seed", "1", "--out", pop).exit_code == 0
    (pop / "notes.txt").write_text("mine")
    result = run("synth", "-n", "500", "--seed", "2", "--out", pop)
    assert result.exit_code == 2 and "notes.txt, which sdclab did not write" in result.output
    (pop / "notes.txt").unlink()
    (pop / "units.parquet").unlink()
    result = run("synth", "-n", "500", "--seed", "2", "--out", pop)
    assert result.exit_code == 2 and "incomplete population output" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["ckm-risk", "{rel}"],
        ["evaluate", "{rel}", "--truth", "{pop}"],
        ["reidentify", "{recon}", "--truth", "{pop}", "--attacker", "census"],
        ["tabulate", "{pop}"],
        ["synth", "-n", "300"],
    ],
    ids=lambda c: c[0],
)
def test_no_command_replaces_another_kind_of_output(command, made, tmp_path):
    victims = {"recon": made / "recon", "rel": made / "rel", "pop": made / "pop"}
    for kind, victim in victims.items():
        if command[0] == {"rel": "tabulate", "pop": "synth"}.get(kind):
            continue  # its own kind
        copy = tmp_path / kind
        subprocess.run(["cp", "-a", str(victim), str(copy)], check=True)
        before = snapshot(copy)
        args = [a.format(**{k: str(v) for k, v in victims.items()}) for a in command]
        result = run(*args, "--out", copy)
        assert result.exit_code == 2, (kind, result.output)
        assert "output, not a" in result.output, result.output
        assert snapshot(copy) == before


def test_audit_out_replaces_only_an_earlier_audit(made, tmp_path):
    victim = tmp_path / "persons.parquet"
    victim.write_bytes((made / "pop" / "persons.parquet").read_bytes())
    before = victim.read_bytes()
    args = ["audit", "-m", "gaussian", "--set", "rho=0.5", "--trials", "200"]
    result = run(*args, "--out", victim)
    assert result.exit_code == 2 and "not an sdclab output" in result.output
    assert victim.read_bytes() == before
    report = tmp_path / "audit.json"
    assert run(*args, "--out", report).exit_code == 0
    assert json.loads(report.read_text())[fileio.OUTPUT_KEY] == "audit"
    assert run(*args, "--seed", "1", "--out", report).exit_code == 0


def test_a_checkpoint_may_not_point_into_an_input_or_the_output(made, tmp_path):
    rel = made / "rel"
    for checkpoint, output in ((rel / "ck", tmp_path / "r1"), (tmp_path / "r2" / "ck", None)):
        out = output or tmp_path / "r2"
        result = run("reconstruct", rel, "--checkpoint", checkpoint, "--out", out)
        assert result.exit_code == 2 and "overlaps" in result.output, result.output
        assert not checkpoint.exists() and not out.exists()
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("")
    result = run("reconstruct", rel, "--checkpoint", foreign, "--out", tmp_path / "r3")
    assert result.exit_code == 2 and "which is not a checkpoint" in result.output
    result = run(
        "protect", made / "pop", "-m", "topdown", "--seed", "1",
        "--set", f"checkpoint={made / 'pop' / 'ck'}", "--out", tmp_path / "r4",
    )  # fmt: skip
    assert result.exit_code == 2 and "overlaps" in result.output


def test_a_symbolic_link_loop_or_a_link_as_out_is_refused(made, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = run("tabulate", made / "pop", "--out", loop)
    assert result.exit_code == 2 and "cannot be resolved" in result.output
    assert result.output.count("\n") == 1
    link = tmp_path / "link"
    link.symlink_to(made / "rel")
    result = run("tabulate", made / "pop", "--out", link)
    assert result.exit_code == 2 and "symbolic link" in result.output


def test_replacing_an_output_exchanges_it_in_one_step(tmp_path, monkeypatch):
    target = tmp_path / "out"
    with fileio.atomic_directory(target) as tmp:
        (tmp / "a").write_text("old")
    swaps = []
    real = fileio.exchange

    def exchange(a: Path, b: Path) -> bool:
        swaps.append(real(a, b))
        return swaps[-1]

    monkeypatch.setattr(fileio, "exchange", exchange)
    with fileio.atomic_directory(target) as tmp:
        (tmp / "a").write_text("new")
    assert swaps == [True] and (target / "a").read_text() == "new"  # exchanged, no fallback
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old one is gone


KILLED_WRITER = """
import os, sys
from pathlib import Path
from sdclab.core import fileio
target, where = Path(sys.argv[1]), sys.argv[2]
if where == "fallback":
    fileio.exchange = lambda a, b: False
real = os.rename
def rename(a, b):
    real(a, b)
    if where == "fallback" and ".old-" in str(b):
        os._exit(9)  # killed between the fallback's two renames
fileio.os.rename = rename
def removed(path):
    os._exit(9)  # killed after the new output took the old one's place
fileio.remove_path = removed
with fileio.atomic_directory(target) as tmp:
    (tmp / "a").write_text("new")
"""


@pytest.mark.parametrize("where", ["exchange", "fallback"])
def test_a_writer_killed_while_replacing_leaves_a_complete_output(where, tmp_path):
    """Killed at the worst moment of each path, the target is the old output or the new, and
    the next writer cleans up (or, for the fallback, first puts the old one back)."""
    target = tmp_path / "out"
    with fileio.atomic_directory(target) as tmp:
        (tmp / "a").write_text("old")
    code = textwrap.dedent(KILLED_WRITER)
    killed = subprocess.run([sys.executable, "-c", code, str(target), where], check=False)
    assert killed.returncode == 9
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "out")
    if where == "exchange":
        assert (target / "a").read_text() == "new"
        assert len(leftovers) == 1  # the old output, in the temporary's place
        assert (tmp_path / leftovers[0] / "a").read_text() == "old"
    else:
        assert not target.exists()  # the fallback's stated window
        assert [name.split("-")[0] for name in leftovers] == [".out.old", ".out.tmp"]
    fileio.clean_leftovers(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (target / "a").read_text() == ("new" if where == "exchange" else "old")


LIVE_WRITER = """
import sys
from pathlib import Path
from sdclab.core import fileio
with fileio.atomic_directory(Path(sys.argv[1])) as tmp:
    print(tmp, flush=True)
    sys.stdin.readline()  # writing, until told to finish
    (tmp / "a").write_text("new")
"""


def test_a_live_writer_s_temporary_is_not_cleaned(tmp_path):
    """Another process's clean-up, while a writer writes, leaves the writer's temporary alone
    (it names its writer, who is alive, and holds its lock); once the writer is dead, it goes."""
    target = tmp_path / "out"
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(LIVE_WRITER), str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    tmp = Path(writer.stdout.readline().strip())
    fileio.clean_leftovers(target)
    assert tmp.is_dir()
    writer.stdin.write("go\n")
    writer.stdin.close()
    assert writer.wait() == 0
    assert (target / "a").read_text() == "new"
    dead = tmp_path / f".out.tmp-{writer.pid}-x"  # as if it had been killed mid-write
    dead.mkdir()
    fileio.clean_leftovers(target)
    assert not dead.exists()


def test_tabulate_killed_mid_replace_leaves_no_exact_tables_behind(made, tmp_path):
    rel = tmp_path / "rel"
    assert run("tabulate", made / "pop", "--out", rel, "--tables", "P1").exit_code == 0
    parked = tmp_path / ".rel.tmp-dead"
    parked.mkdir()
    (parked / "P1.parquet").write_bytes(b"exact tables of a killed run")
    assert run("tabulate", made / "pop", "--out", rel, "--tables", "P8").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]
    assert set(read_release(rel).tables) == {"P8"}


def test_a_run_refused_for_bad_input_leaves_nothing(made, tmp_path):
    from sdclab.censuses.us2010.population import Population

    pop = read_population(made / "pop")
    group_quarters = pop.units.filter(pop.units["unit_type"] > 0)
    residents = pop.persons.filter(
        pop.persons["unit_id"].is_in(group_quarters["unit_id"].implode())
    )
    write_population(Population(persons=residents, units=group_quarters), tmp_path / "gq")
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        '[population]\npath = "gq"\n\n[[mechanisms]]\nname = "none"\n\n'
        '[[mechanisms]]\nname = "psa"\n\n[attacks]\nreconstruct = false\n'
    )
    out = tmp_path / "out"
    result = run("run", experiment, "--out", out)
    assert result.exit_code == 2, result.output
    assert "no households" in result.output
    assert not out.exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "x").write_text("")
    result = run("run", experiment, "--out", foreign)
    assert result.exit_code == 2 and "not an sdclab output" in result.output


def test_check_replaceable_accepts_absent_empty_and_its_own_kind(tmp_path):
    fileio.check_replaceable(tmp_path / "absent", "release")
    (tmp_path / "empty").mkdir()
    fileio.check_replaceable(tmp_path / "empty", "release")
    with fileio.output_directory(tmp_path / "mine", "release") as tmp:
        (tmp / "x").write_text("")
    fileio.check_replaceable(tmp_path / "mine", "release")
    with pytest.raises(InputError, match="holds a release output, not a population"):
        fileio.check_replaceable(tmp_path / "mine", "population")
    assert sorted(os.listdir(tmp_path / "mine")) == sorted(["x", fileio.OUTPUT_MARKER])


NO_SPACE = "parquet: File out of specification: underlying IO error: No space left on device"


def test_a_full_disk_writing_parquet_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """polars says a full disk as a ComputeError (it ended 7 of 12 runs as an internal error)."""
    import polars as pl

    def full(*_, **__):
        raise pl.exceptions.ComputeError(f"{NO_SPACE} (os error 28)")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    out = tmp_path / "pop"
    result = run("synth", "-n", "300", "--seed", "1", "--out", out)
    assert result.exit_code == 2 and result.output == f"error: disk full writing {out}\n"
    assert list(tmp_path.iterdir()) == []  # neither the output nor a temporary


def test_a_full_disk_ending_an_experiment_leaves_nothing(tmp_path, monkeypatch):
    import errno

    written = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith(".results.json.tmp-"):  # after every step was written
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return written(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    path = tmp_path / "exp.toml"
    path.write_text(
        '[population]\npersons = 200\n\n[[mechanisms]]\nname = "none"\n\n'
        "[attacks]\nreconstruct = false\n"
    )
    out = tmp_path / "out"
    result = run("run", path, "--out", out)
    assert result.exit_code == 2
    assert result.output.endswith(f"\nerror: disk full writing {out / 'results.json'}\n")
    assert not out.exists()  # nor its steps, nor its marker
