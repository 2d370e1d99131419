"""Whether a release protects (the rule of the mechanism protocol), and "fit for publication"
following it: a release whose tables are the exact ones, whose noise can be undone or whose swap
moved nothing is not fit, whatever its randomness, and says why."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from sdclab import protection
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.columns import RECORD_KEY
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.errors import InputError
from sdclab.pipeline.api import read_release
from sdclab.protection import safetab_h
from sdclab.protection.cellkey import assign_record_keys
from sdclab.protection.ptable import OnsPTable, PTable, ons_10_5_ptable, write_ptable
from sdclab.protection.ptable_analysis import is_invertible, smallest_shown
from sdclab.release import RELEASE_FILE, Protection, write_release

EXACT = "every published table equals the exact tabulation, no cell withheld"


@pytest.fixture(scope="module")
def population() -> Population:
    return assign_record_keys(synthesize(1_500, seed=31), 256, np.random.default_rng(5))


def deterministic_table(shift: list[int]) -> PTable:
    """A long-format p-table whose row i publishes i + shift[i] with probability 1."""
    rows = len(shift)
    ones = np.ones(rows)
    return PTable(
        i=np.arange(rows),
        j=np.arange(rows) + np.array(shift),
        p=ones,
        v=np.array(shift),
        lb=np.zeros(rows),
        ub=ones,
        D=max(abs(s) for s in shift),
        V=0.0,
        js=0,
    )


def test_tables_equal_to_the_exact_ones_do_not_protect(population):
    """Unseeded, so the randomness alone would call them fit: suppression that withholds
    nothing, an identity p-table, a swap too rare to move a household, the exact release."""
    cases = {
        "suppress": {"small_cells": "0", "min_persons": "1", "group_min": "1"},
        "swap": {"rate": "0.0001"},
        "none": {},
    }
    for name, settings in cases.items():
        release = protection.run(name, population, settings, None)
        assert release.protection is not None and not release.protection.protects, name
        assert release.randomness["fit_for_publication"] is False, name
        assert release.protection.reason in release.randomness["note"], name
    suppress = protection.run("suppress", population, cases["suppress"], None)
    assert suppress.protection == Protection(False, EXACT)


def test_a_noisy_release_protects(population):
    for name, settings in {"geometric": {"epsilon": "1"}, "suppress": {}, "swap": {}}.items():
        release = protection.run(name, population, settings, None)
        assert release.protection == Protection(True), name
        assert release.randomness["fit_for_publication"] is True, name


def test_a_seeded_release_that_protects_is_still_not_fit(population):
    release = protection.run("geometric", population, {"epsilon": "1"}, 3)
    assert release.protection == Protection(True)
    assert release.randomness["fit_for_publication"] is False


def test_an_invertible_ptable_does_not_protect_even_when_counts_change(population, tmp_path):
    shifted = tmp_path / "shift.csv"
    write_ptable(deterministic_table([0, 1, 1, 1, 1]), shifted)  # n → n + 1 for n ≥ 1
    release = protection.run("cellkey", population, {"ptable": str(shifted)}, None)
    changed = release.table("P1").matrix("block") != protection.run(
        "none", population, {}, None
    ).table("P1").matrix("block")
    assert changed.nnz  # the tables are not the exact ones ...
    assert release.protection is not None and not release.protection.protects
    assert "undo the noise" in str(release.protection.reason)  # ... but the noise is undone
    assert release.randomness["fit_for_publication"] is False
    # n -> n + 1 never shows 1: thresholds 1 and 2 withhold nothing, and leave the noise undone
    for inert in ("1", "2"):
        settings = {"ptable": str(shifted), "threshold": inert}
        release = protection.run("cellkey", population, settings, None)
        assert release.protection is not None and not release.protection.protects, inert
        assert release.randomness["fit_for_publication"] is False, inert
    with_threshold = protection.run(
        "cellkey", population, {"ptable": str(shifted), "threshold": "3"}, None
    )
    assert with_threshold.protection == Protection(True)  # counts of 1 are withheld


def test_invertible_ptables():
    assert is_invertible(deterministic_table([0, 0, 0]))
    assert is_invertible(deterministic_table([0, 2, 2, 2]))
    assert not is_invertible(deterministic_table([0, -1, 0]))  # counts 0 and 1 both publish 0
    assert not is_invertible(ons_10_5_ptable())  # a rounding maps many counts to one
    assert smallest_shown(deterministic_table([0, 1, 1, 1, 1])) == 2
    assert smallest_shown(deterministic_table([0, 0, 0])) == 1
    assert is_invertible(OnsPTable(np.zeros((751, 4), dtype=np.int64)))
    noisy = PTable(
        i=np.array([0, 1, 1]),
        j=np.array([0, 0, 1]),
        p=np.array([1.0, 0.5, 0.5]),
        v=np.array([0, -1, 0]),
        lb=np.array([0.0, 0.0, 0.5]),
        ub=np.array([1.0, 0.5, 1.0]),
        D=1,
        V=0.25,
        js=0,
    )
    assert not is_invertible(noisy)


def test_a_constant_record_key_does_not_protect(population):
    constant = Population(
        persons=population.persons.with_columns(pl.lit(7, dtype=pl.Int64).alias(RECORD_KEY.name)),
        units=population.units,
    )
    release = protection.run("cellkey", constant, {}, None)
    assert release.protection is not None and not release.protection.protects
    assert "persons' record keys is the same" in str(release.protection.reason)
    assert protection.run("cellkey", population, {}, None).protection == Protection(True)


def test_safetab_h_judges_its_group_tables(population):
    release = protection.run("safetab_h", population, {}, 4)
    assert release.protection == Protection(True)
    exact = safetab_h.true_cells(population, release).with_columns(count=pl.col("true"))
    forged = release.artifacts | {safetab_h.GROUP_TABLES_ARTIFACT: exact.drop("true")}
    params = safetab_h.SafeTabHParameters()
    reason = safetab_h.unprotected(population, params, replace(release, artifacts=forged))
    assert reason == "every published population-group cell equals its exact count"


def test_the_verdict_is_written_and_read_back(population, tmp_path):
    settings = {"small_cells": "0", "min_persons": "1", "group_min": "1"}
    release = protection.run("suppress", population, settings, None)
    write_release(release, tmp_path / "rel")
    meta = json.loads((tmp_path / "rel" / RELEASE_FILE).read_text())
    assert meta["protection"] == {"protects": False, "reason": EXACT}
    assert read_release(tmp_path / "rel").protection == Protection(False, EXACT)


@pytest.mark.parametrize(
    "forged",
    [{"protects": "no"}, {"protects": False}, {"protects": True, "reason": "x"}, [], {"x": 1}],
)
def test_a_malformed_verdict_is_refused(forged):
    with pytest.raises(InputError, match="protection must be"):
        Protection.from_dict(forged, "release.json")
