"""The European census's second attack: each 1 km grid cell rebuilt from the grid's 13 variables."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab.attacks import census_baselines as b
from sdclab.attacks.census_linkage import GEOUNIT, LinkKeys, linked, truth_frame
from sdclab.censuses.eu2021 import census
from sdclab.censuses.eu2021.synth import synthesize
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import CensusRecords, encode_records, read_records
from sdclab.core.errors import InputError
from sdclab.pipeline import api
from sdclab.pipeline.experiment import Experiment
from sdclab.pipeline.experiment.demo import TRS_CHAINED
from sdclab.release import exact_release

EXAMPLE = Path(__file__).parents[1] / "examples" / "europe"
DECLARATION = Path(__file__).parents[1] / "src" / "sdclab" / "censuses" / "eu2021"


@pytest.fixture(scope="module")
def records() -> CensusRecords:
    return encode_records(census(), synthesize(3_000, 7), "synthetic")


@pytest.fixture(scope="module")
def exact_grid(records: CensusRecords):
    release = api.protect(records, "none")
    return release, api.reconstruct(release, target="grid", workers=1, draws=0, node_limit=2_000)


def test_the_grid_attack_sees_the_grid_and_its_tables_alone() -> None:
    aimed = census().aimed_at("grid")
    assert aimed.name == "eu2021:grid" and list(aimed.geographies) == ["grid"]
    assert list(aimed.tables) == ["grid"]
    assert (aimed.reconstruction.level, aimed.within) == ("grid1km", "grid10km")
    assert aimed.quasi_identifiers == ("SEX", "AGE", "POB")
    assert census().aimed_at("grid").digest == aimed.digest != census().digest


def test_the_exact_grid_is_rebuilt_cell_by_cell(records, exact_grid) -> None:
    _, result = exact_grid
    assert result.metrics["target"] == "grid"
    assert result.metrics["census"]["name"] == "eu2021:grid"
    persons = pl.DataFrame(synthesize(3_000, 7))
    truth = persons.select(block="grid1km", sex="SEX")
    rebuilt = result.persons.select("block", sex="SEX")
    assert result.persons.height == 3_000
    assert result.tracts.height == persons["grid10km"].n_unique()  # one program per 10 km square
    # the exact grid publishes each cell's persons by sex: the records agree cell by cell
    per_cell = ["block", "sex"]
    expected = truth.group_by(per_cell).len().sort(per_cell)
    assert rebuilt.group_by(per_cell).len().sort(per_cell).equals(expected)
    # what the grid tells of everyone: employed or not, and where they lived a year before
    assert result.persons["CAS"].null_count() == 0 and result.persons["ROY"].null_count() == 0


def test_the_grid_attack_is_scored_against_its_own_baselines(records, exact_grid) -> None:
    release, result = exact_grid
    reid = api.reidentify(result, release, records, attacker="census", seed=1)
    figures = reid.to_dict()
    assert figures["baselines"] == "computed"
    methods = reid.methods()
    assert {"mdg", "prg", "random_draw", "confidential"} <= set(methods)
    assert methods["confidential"].all.confirmed_rate > 0.9
    # the grid's tables give every quasi-identifier: its own guessers confirm links too
    assert min(methods[m].all.confirmed_rate for m in ("mdg", "prg", "random_draw")) > 0.05
    assert 0 < methods["reconstruction"].all.confirmed_rate < 0.9
    evaluation = api.evaluate(release, records, reconstruction=result, reidentification=reid)
    assert evaluation.reconstruction_agreement.all.persons == 3_000


def test_a_swapped_cell_key_release_is_attacked_on_the_grid_knowing_its_noise(records) -> None:
    chain = api.protect(
        records, "cellkey", seed=4, ptable="ess-d2", swap="swap", swap_settings=TRS_CHAINED
    )
    aimed = chain.aimed_at("grid")
    assert aimed.mechanism_census is census() and aimed.census.name == "eu2021:grid"
    # its parameters (the swap's NUTS 3 and LAU levels) are read against the census it ran on
    result = api.reconstruct(chain, target="grid", workers=1, draws=0, node_limit=2_000)
    assert result.metrics["knowledge"] == "published"
    assert abs(result.n_persons - 3_000) < 100


def test_an_unknown_target_is_one_line(records) -> None:
    release = exact_release(records, ["grid"])
    with pytest.raises(InputError, match="declares no attack target 'raster'; targets: grid"):
        api.reconstruct(release, target="raster", workers=1)


def test_a_part_leaving_codes_out_counts_them_as_the_total_less_its_cells(records) -> None:
    aimed = census().aimed_at("grid")
    cells = {c.attributes: c for c in b.usable(aimed.table("grid"), aimed)}
    employed = cells[("CAS",)]
    assert employed.total == 0 and employed.shape == (2,)
    release = exact_release(records, ["grid"]).aimed_at("grid")
    counts = b.published(release, employed, "grid1km")
    unit = release.geography.units("grid1km")[1][records.aimed_at("grid").block_index("persons")]
    working = records.attributes["CAS"] == census().attribute("CAS").position["EMP"]
    n = release.geography.n_units("grid1km")
    assert np.array_equal(counts[:, 0], np.bincount(unit[working], minlength=n))
    assert np.array_equal(counts[:, 1], np.bincount(unit[~working], minlength=n))


def test_an_inferred_attribute_is_confirmed_on_the_category_the_tables_publish() -> None:
    keys = LinkKeys.of(census())  # HST is inferred, resolved to HST.M (in a family nucleus or not)
    frame = pl.DataFrame({"HST": ["CU", "MAR", "C_GE25", "ALONE"]})
    assert keys.at_resolution(frame)["HST"].to_list() == ["MAR", "MAR", "MAR", "ALONE"]


def test_a_target_on_an_unknown_geography_is_refused(tmp_path) -> None:
    copy = tmp_path / "eu"
    shutil.copytree(DECLARATION, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    text = (copy / "census.toml").read_text()
    (copy / "census.toml").write_text(
        text.replace('geography = "grid"\nattributes', 'geography = "raster"\nattributes')
    )
    with pytest.raises(InputError, match="targets.grid.geography: unknown geography 'raster'"):
        load_census(copy / "census.toml")


def test_the_command_line_reconstructs_and_reidentifies_the_grid(tmp_path) -> None:
    for name in ("persons.csv", "mapping.toml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)

    def sdclab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sdclab", *args], capture_output=True, text=True, cwd=tmp_path
        )

    persons = read_records(census(), tmp_path / "persons.csv", tmp_path / "mapping.toml")
    api.write_release(api.protect(persons, "none"), tmp_path / "exact")
    done = sdclab("reconstruct", "exact", "--out", "recon", "--target", "grid", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "grid10kms" in done.stdout
    metrics = json.loads((tmp_path / "recon" / "metrics.json").read_text())
    assert metrics["target"] == "grid" and metrics["census"]["name"] == "eu2021:grid"
    done = sdclab(
        "reidentify", "recon", "--truth", "persons.csv", "--mapping", "mapping.toml", "--out", "r"
    )
    assert done.returncode == 0, done.stderr
    assert "random_draw" in done.stdout


EU_POPULATION = {"census": "eu2021", "persons": 100, "seed": 1}


@pytest.mark.parametrize(
    ("population", "attacks", "message"),
    [
        (
            EU_POPULATION,
            {"targets": ["raster"]},
            "attacks.targets: census eu2021 declares no attack target 'raster' (it declares: grid)",
        ),
        (
            {"persons": 100},
            {"targets": ["raster"]},
            "attacks.targets: the US 2010 census declares no attack target",
        ),
        (
            EU_POPULATION,
            {"targets": ["grid"], "reconstruct": False},
            "attacks.targets: the targets are attacked by reconstruction; set "
            "attacks.reconstruct to true or leave the targets out",
        ),
    ],
)
def test_an_experiment_names_only_targets_its_census_declares(population, attacks, message) -> None:
    document = {"population": population, "mechanisms": [{"name": "none"}], "attacks": attacks}
    with pytest.raises(InputError, match=re.escape(message)):
        Experiment.model_validate(document)


def test_links_are_confirmed_on_the_household_status_the_tables_publish(records) -> None:
    """A file stating each person's household status by another code of the same HST.M category
    (a consensual partner as married) confirms exactly as the true records do."""
    keys = LinkKeys.of(census())
    truth = truth_frame(records)
    attacker = truth.select("id", GEOUNIT, *keys.quasi)
    swapped = {"CU": "MAR", "MAR": "CU", "C_GE25": "C_LT25", "C_LT25": "C_GE25"}
    recoded = truth.with_columns(pl.col("HST").replace(swapped))
    assert (recoded["HST"] != truth["HST"]).sum() > 100
    found = linked({"true": truth, "recoded": recoded}, attacker, truth, keys, seed=3)
    confirmed = {name: int(links["confirmed"].sum()) for name, links in found.items()}
    assert confirmed["recoded"] == confirmed["true"] > 0.9 * records.n_persons
