"""The command-line corpus of bad input: every case is one clear line, exit code 2, no output.

Each directory under ``tests/data/bad/cli`` holds ``args.json`` (the command's arguments, with
``{POP}`` a valid population, ``{CASE}`` the case's directory and ``{OUT}`` the output path) and
``expected.txt`` (text the one-line error must contain), plus whatever files the case needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sdclab.cli import app

DATA = Path(__file__).parent / "data"
CASES = sorted(p for p in (DATA / "bad" / "cli").iterdir() if p.is_dir())
POPULATION = DATA / "good" / "population" / "base_csv"


def test_corpus_covers_every_entry_point():
    commands = {json.loads((case / "args.json").read_text())[0] for case in CASES}
    assert {"protect", "tabulate", "run", "ckm-risk", "reconstruct"} <= commands
    population_cases = list((DATA / "bad" / "population").iterdir())
    assert len(CASES) + len(population_cases) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_bad_command_line_input(case: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [
        a.replace("{POP}", str(POPULATION)).replace("{CASE}", str(case)).replace("{OUT}", str(out))
        for a in json.loads((case / "args.json").read_text())
    ]
    result = CliRunner().invoke(app, args)
    message = result.output.strip()
    assert result.exit_code == 2, message
    assert "Traceback" not in message
    assert message.count("\n") == 0, message
    assert (case / "expected.txt").read_text().strip() in message
    assert not out.exists(), "a failed command wrote output"
