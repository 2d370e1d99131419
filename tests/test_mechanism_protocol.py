"""Every registered mechanism through the protocol (docs/design.md, *The mechanism protocol*).

A mechanism added to the registry is held to these without a line written here: its example
settings parse, its card states a guarantee, its noise record is JSON, a seeded release of its
example passes its own check, is written and read back unchanged, and says whether it protects;
its attacker's cell model (or its absence) is what the noise-aware attack finds; a mechanism that
takes any census protects a declared one, and one that does not refuses it in words.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sdclab import protection
from sdclab.attacks.knowledge import cell_bounds
from sdclab.censuses import is_built_in
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import read_records
from sdclab.core.errors import InputError
from sdclab.pipeline.api import read_release
from sdclab.protection.cellkey import assign_record_keys
from sdclab.release import write_release

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"
NAMES = sorted(protection.MECHANISMS)


@pytest.fixture(scope="module")
def population():
    return assign_record_keys(synthesize(600, seed=23), 256, np.random.default_rng(1))


@pytest.fixture(scope="module")
def toyland():
    census = load_census(TOYLAND / "census.toml")
    return read_records(census, TOYLAND / "persons.csv")


@pytest.mark.parametrize("name", NAMES)
def test_the_example_parses_and_the_card_states_a_guarantee(name):
    entry = protection.get(name)
    params = entry.parse(entry.example)
    if entry.noise is not None:
        json.dumps(entry.noise(params).to_dict())
    try:
        card = entry.card(params)
    except InputError as exc:  # a card that needs the data (the PSA's largest group) says so
        assert "without data" in str(exc)
        return
    assert card.mechanism.startswith(name) and card.guarantee.text()


@pytest.mark.parametrize("name", [n for n in NAMES if protection.get(n).protect is not None])
def test_a_seeded_release_passes_its_check_and_reads_back(name, population, tmp_path):
    entry = protection.get(name)
    release = entry.run(population, entry.example, seed=5)
    assert release.protection is not None and is_built_in(release.census)
    assert release.card.mechanism.startswith(name) and release.card.guarantee.text()
    if entry.check is not None:
        assert entry.check(release, entry.parse(release.parameters)) is None
    write_release(release, tmp_path / "release")
    back = read_release(tmp_path / "release")
    assert back.mechanism == name and list(back.tables) == list(release.tables)
    for table_name, table in release.tables.items():
        for level in table.levels:
            read = back.table(table_name)
            assert (read.matrix(level) != table.matrix(level)).nnz == 0
            assert (read.suppressed(level) != table.suppressed(level)).nnz == 0
    # the noise-aware attack reads the mechanism's cell model, or says it has none
    if entry.cell_model is None:  # (SafeTab-H publishes its tables as artifacts)
        level = release.geography.levels[-1]
        with pytest.raises(InputError, match="no model of this mechanism's noise"):
            cell_bounds(release, [], level, np.zeros((release.geography.n_units(level), 0)))
    else:
        first, table = next(iter(release.tables.items()))
        level = table.levels[-1]
        published = table.dense(level, suppressed=np.nan)
        bounds = cell_bounds(release, [first], level, published)
        assert bounds.low.shape == published.shape and np.all(bounds.low <= bounds.high)
        assert entry.exact_tables == bool(np.all(bounds.low == bounds.high))


@pytest.mark.parametrize("name", [n for n in NAMES if protection.get(n).protect is not None])
def test_a_declared_census_is_protected_or_refused_in_words(name, toyland):
    entry = protection.get(name)
    if not entry.any_census:
        with pytest.raises(InputError, match=rf"mechanism {name} protects the US 2010 census"):
            entry.run(toyland, entry.example, seed=5)
        return
    release = entry.run(toyland, entry.example_for(toyland.census), seed=5)
    assert release.census is toyland.census and set(release.tables) == set(toyland.census.tables)
    if entry.check is not None:
        assert entry.check(release, entry.parse(release.parameters, toyland.census)) is None
    if set(entry.example) - set(entry.example_for(toyland.census)):  # a US product's setting
        with pytest.raises(InputError, match=r"a setting for the US 2010 census only"):
            entry.run(toyland, entry.example, seed=5)


def test_a_mechanism_publishes_only_the_artifacts_it_declares(toyland):
    from dataclasses import replace

    import polars as pl

    entry = protection.get("none")
    assert entry.protect is not None

    def protect(population, params, rng):
        made = entry.protect(population, params, rng)
        return replace(made, artifacts={"extra": pl.DataFrame({"a": [1]})})

    with pytest.raises(AssertionError, match=r"mechanism none declares no artifact \['extra'\]"):
        replace(entry, protect=protect).run(toyland, {}, seed=1)
