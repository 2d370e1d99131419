"""Population replicates: a setting's interval covers the population as well as the noise.

A decision made on one population depends on that population; `[population] replicates = k`
runs every release again on k − 1 further populations (further synthetic seeds, or bootstrap
replicates of a population read) and a setting's replicates are then all of its releases."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import sdclab
from sdclab.censuses.us2010.population.bootstrap import bootstrap
from sdclab.censuses.us2010.population.io import write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.pipeline.experiment import (
    REPORT_FILE,
    RESULTS_FILE,
    Experiment,
    population_seed,
    run_spec,
)
from sdclab.pipeline.results import ExperimentResult


@pytest.fixture(scope="module")
def population():
    return synthesize(1_500, seed=11)


def _households(population, block: str) -> list[tuple]:
    """The sorted (relationship, sex, age, race, hispanic) tuples of each unit of a block."""
    persons = population.persons.filter(pl.col("block") == block)
    columns = ("relationship", "sex", "age", "race", "hispanic")
    households: dict[int, list[tuple]] = {}
    for row in persons.iter_rows(named=True):
        households.setdefault(row["unit_id"], []).append(tuple(row[c] for c in columns))
    return sorted(tuple(sorted(members)) for members in households.values())


def test_a_bootstrap_replicate_draws_each_block_s_units_from_that_block(population) -> None:
    again = bootstrap(population, seed=5)
    assert again.geography.n_blocks == population.geography.n_blocks
    units_per_block = lambda p: p.units.group_by("block").len().sort("block")  # noqa: E731
    assert units_per_block(again).equals(units_per_block(population))
    assert again.persons["person_id"].is_unique().all() and again.units["unit_id"].is_unique().all()
    blocks = population.units["block"].unique().to_list()
    drawn_from_elsewhere = 0
    for block in blocks:
        original = set(_households(population, block))
        drawn_from_elsewhere += len(set(_households(again, block)) - original)
    assert drawn_from_elsewhere == 0  # every household comes whole from its own block
    assert not again.persons.select("sex", "age").equals(population.persons.select("sex", "age"))
    assert bootstrap(population, seed=5).persons.equals(again.persons)  # the seed decides
    assert not bootstrap(population, seed=6).persons.equals(again.persons)


SPEC = {
    "population": {"persons": 500, "seed": 11, "replicates": 2},
    "mechanisms": [
        {"name": "geometric", "settings": {"epsilon": 4}, "seed": 3},
        {"name": "suppress"},
    ],
    "attacks": {"reconstruct": False},
}


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    out = tmp_path_factory.mktemp("replicated")
    return run_spec(Experiment.model_validate(SPEC), out, lambda _: None), out


def test_every_release_runs_on_every_population(replicated) -> None:
    results, out = replicated
    assert list(results.releases) == ["geometric", "suppress", "geometric/p2", "suppress/p2"]
    assert results.settings() == {
        "geometric": ["geometric", "geometric/p2"],
        "suppress": ["suppress", "suppress/p2"],  # deterministic, but not the same population
    }
    (second,) = results.population_replicates
    assert second.source["seed"] == population_seed(11, 2) != 11
    assert second.uniques != results.population.uniques  # another synthetic population
    point = next(p for p in sdclab.frontier(results) if p.setting == "suppress")
    assert point.accuracy.n == 2 and point.accuracy.low is not None  # an interval of two draws
    again = ExperimentResult.from_dict(json.loads((out / RESULTS_FILE).read_text()))
    assert again.population_replicates == results.population_replicates
    assert again["suppress/p2"].sweep.population == 2
    tidy = results.tidy()
    assert sorted(tidy["population"].unique().to_list()) == [1, 2]
    report = (out / REPORT_FILE).read_text(encoding="utf-8")
    assert "Every release was also made on 1 further population (seeds" in report


def test_noise_draws_differ_between_populations(replicated) -> None:
    results, out = replicated
    first = np.array(results["geometric"].evaluation.table("P1", "block").bias)
    second = np.array(results["geometric/p2"].evaluation.table("P1", "block").bias)
    assert first != second


def test_a_population_read_is_bootstrapped(tmp_path, population) -> None:
    write_population(population, tmp_path / "pop")
    spec = {
        "population": {"path": str(tmp_path / "pop"), "replicates": 2, "seed": 4},
        "mechanisms": [{"name": "none"}],
        "attacks": {"reconstruct": False},
    }
    results = run_spec(Experiment.model_validate(spec), tmp_path / "out", lambda _: None)
    (second,) = results.population_replicates
    assert second.source["bootstrap"] == population_seed(4, 2)
    assert second.geography == results.population.geography
    assert second.units == results.population.units  # as many units per block
