"""The block-only reconstruction (the attack paper's rHDF_b, beside rHDF_b,t): from a release's
block-level tables alone, its ages known to their agebin, linked on agebin and reported apart."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import sdclab
from sdclab.attacks.linkage import link
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.io import write_population
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.pipeline import api
from sdclab.pipeline.experiment import NO_BLOCK_ONLY
from sdclab.pipeline.results import NotMeasured, Reidentification
from sdclab.pipeline.results.evaluation import BLOCK_ONLY_FIELD
from sdclab.release import write_release

B = 10010001001001  # a block geocode as int


def frame(rows: list[tuple[int, ...]], columns: tuple[str, ...]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=list(columns), orient="row").cast(pl.Int64)


def test_a_record_known_to_its_agebin_is_linked_on_agebin_only():
    """A record aged 30–34 (written as 30, its bin's first year) is linked in the second pass,
    to either attacker record of its bin; one that knows its age, in the first, to its year."""
    binned = frame(
        [(B, 1, 30, 1, 0, 30, 34)],
        ("block", "sex", "age", "race", "hispanic", "age_min", "age_max"),
    )
    people = frame([(5, B, 1, 30), (6, B, 1, 33)], ("id", "block", "sex", "age"))
    links = [link(binned, people, seed=s) for s in range(12)]
    assert all(one["link_pass"].to_list() == [2] for one in links)
    assert {one["id"][0] for one in links} == {5, 6}  # the bin's first year is not preferred
    exact = link(binned.drop("age_min", "age_max"), people, seed=0)
    assert exact["id"].to_list() == [5] and exact["link_pass"].to_list() == [1]


@pytest.fixture(scope="module")
def attacked():
    truth = api.synthesize(1_500, seed=8)
    release = api.tabulate(truth)
    return truth, release, api.reconstruct(release, workers=1, draws=0, block_only=True)


def by_cell(persons: pl.DataFrame) -> pl.DataFrame:
    """Persons per block, sex and agebin."""
    cells = persons.select(
        pl.col("block").cast(pl.Int64),
        pl.col("sex").cast(pl.Int64),
        agebin=pl.Series(schema.agebin38(persons["age"].to_numpy())),
    )
    return cells.group_by("block", "sex", "agebin").len().sort("block", "sex", "agebin")


def test_the_block_tables_alone_know_ages_to_their_agebin(attacked):
    truth, _, block = attacked
    assert block.metrics["block_only"] is True
    persons = block.persons
    wide = persons.filter(pl.col("age_max") > pl.col("age_min"))
    assert wide.height > 0 and (wide["age_min"] > 21).all()
    assert (wide["age"] == wide["age_min"]).all()
    lowest, highest = (schema.agebin38(wide[c].to_numpy()) for c in ("age_min", "age_max"))
    assert np.array_equal(lowest, highest)  # each record's bounds are one agebin
    assert by_cell(persons).equals(by_cell(truth.persons))  # P12 + P14 fix {block, sex, agebin}


def test_it_is_reidentified_on_agebin_beyond_21(attacked):
    truth, release, block = attacked
    reid = api.reidentify(block, release, truth, attacker="census", seed=2)
    assert reid.reconstruction.all.putative_rate == 1.0
    assert reid.links is not None
    passes = reid.links.group_by(pl.col("age") > 21).agg(pl.col("link_pass").unique())
    first = dict(zip(passes["age"].to_list(), passes["link_pass"].to_list(), strict=True))
    assert first == {False: [1], True: [2]}  # the census attacker's years: exact up to 21 only


def test_a_block_only_setting_that_is_no_boolean_is_refused(attacked):
    _, release, _ = attacked
    with pytest.raises(InputError, match="block_only 'yes': expected True or False"):
        api.reconstruct(release, workers=1, block_only="yes")  # type: ignore[arg-type]


def test_the_command_reconstructs_from_the_block_tables_alone(attacked, tmp_path):
    truth, release, block = attacked
    write_population(truth, tmp_path / "pop")
    write_release(release, tmp_path / "rel")
    runner = CliRunner()
    out = tmp_path / "recon"
    args = ["reconstruct", str(tmp_path / "rel"), "--block-only", "--workers", "1"]
    done = runner.invoke(app, [*args, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "from the block tables alone" in done.output
    assert json.loads((out / "metrics.json").read_text())["block_only"] is True
    back = api.read_reconstruction(out)
    assert back.persons.drop("confidence").equals(block.persons)
    done = runner.invoke(
        app,
        ["reidentify", str(out), "--truth", str(tmp_path / "pop"), "--attacker", "census"]
        + ["--seed", "2", "--out", str(tmp_path / "reid")],
    )
    assert done.exit_code == 0, done.output


def test_an_experiment_reports_it_apart_when_asked(tmp_path):
    """An opt-in attack setting: its figures under their own key, evaluation only, in the tidy
    results and the report's headline section; without it, n/a with the reason."""
    spec = {
        "population": {"persons": 600, "seed": 7},
        "mechanisms": [{"name": "none"}],
        "attacks": {"workers": 1, "attackers": ["census"], "block_only": True},
    }
    result = sdclab.run_experiment(spec, tmp_path / "x")
    block = result["none"].evaluation.block_only_reidentification
    assert isinstance(block, dict) and isinstance(block["census"], Reidentification)
    assert block["census"].reconstruction.all.putative_rate == 1.0
    written = json.loads((tmp_path / "x" / "results.json").read_text())["mechanisms"]["none"]
    assert BLOCK_ONLY_FIELD in written["evaluation_only"]
    assert written[BLOCK_ONLY_FIELD]["census"]["reconstruction"]["all"]["putative_rate"] == 1.0
    rows = result.tidy().filter(pl.col("metric").str.starts_with(f"{BLOCK_ONLY_FIELD}.census."))
    assert rows.height > 0 and rows["evaluation_only"].all()
    assert "From the block tables alone" in (tmp_path / "x" / "report.html").read_text()
    without = {**spec, "attacks": {"workers": 1, "attackers": ["census"]}}
    default = sdclab.run_experiment(without, tmp_path / "x")
    assert default["none"].evaluation.block_only_reidentification == NotMeasured(NO_BLOCK_ONLY)
