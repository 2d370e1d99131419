"""The attacks on TopDown releases: the dhc product like a swapped release, pl94 on what it has.

A dhc release publishes the 34 person tables of the 2010 attack, so it is reconstructed, measured
and reidentified exactly as a swapped one. A PL 94-171 release publishes race, Hispanic origin and
voting age by block (P1, P6–P11), no sex and no single-year age: its reconstruction must say so
(null sex and age, age bounds 0–17 / 18+), solution variability compares records on what the tables
tell apart, reidentification refuses and evaluation reports agreement as not applicable.

TopDown and the attacks run in one process here, as in ``sdclab run``: that is also the test that
the attacks' HiGHS solves survive the thread scheduler TopDown's solves leave behind.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from sdclab.attacks.linkage import ATTACKER_PRESETS, reidentify
from sdclab.attacks.reconstruction import person_tables, reconstruct, stacked_query
from sdclab.attacks.reconstruction_files import read_reconstruction, write_reconstruction
from sdclab.attacks.variability import attack
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.io import write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.pipeline.evaluation import agreement, block_agebin_agreement
from sdclab.pipeline.results import NotMeasured
from sdclab.protection import run
from sdclab.release import exact_release, write_release


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


PL94_BLOCK_TABLES = ("P1", "P6", "P7", "P8", "P9", "P10", "P11")


@pytest.fixture(scope="module")
def population():
    population = synthesize(1_500, seed=21)
    return population


@pytest.fixture(scope="module")
def pl94(population):
    release = run(
        "topdown", population, {"product": "pl94", "workers": "1", "measurements": "false"}, seed=3
    )
    recon, metrics, solvar = attack(release, 1, 0, 60.0, True)
    return release, recon, metrics, solvar


def republished(release, recon, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The block tables ``names`` tabulated from the reconstruction, and as published."""
    blocks = release.geography.blocks
    rows = np.searchsorted(blocks, recon.persons["block"].cast(pl.Int64).to_numpy())
    shape = (len(blocks), schema.PERSON.size)
    hist = sp.csr_matrix((np.ones(len(rows)), (rows, recon.domain_cells())), shape=shape)
    mine = (hist @ stacked_query(names).T).toarray()
    published = [release.tables[n].dense("block", suppressed=np.nan) for n in names]
    return mine, np.hstack(published)


def test_pl94_reconstruction_reports_sex_and_age_unknown(pl94):
    release, recon, metrics, _ = pl94
    assert person_tables(release) == (PL94_BLOCK_TABLES, ())
    persons = recon.persons
    assert persons["sex"].null_count() == persons["age"].null_count() == persons.height > 0
    assert (
        persons.select("race", "hispanic", "age_min", "age_max").null_count().sum_horizontal()[0]
        == 0
    )
    bounds = set(persons.select("age_min", "age_max").unique().iter_rows())
    assert bounds == {(0, 17), (18, schema.AGE_MAX)}  # voting age is all the tables say of age
    assert metrics["known_attributes"] == ["block", "race", "hispanic"]
    assert metrics["unknown_attributes"] == ["sex", "age"]
    assert metrics["partially_known_attributes"] == []
    assert metrics["age_bounds_where_unknown"] == [[0, 17], [18, schema.AGE_MAX]]
    assert metrics["modes"] == {"exact": metrics["tracts"]}
    assert metrics["variables"] < 3 * persons.height  # one per (block, race, ethnicity, voting age)


def test_pl94_reconstruction_reproduces_the_published_block_tables(pl94):
    release, recon, _, _ = pl94
    p1 = release.table("P1").frame("block").filter(pl.col("count") > 0)
    assert dict(recon.persons.group_by("block").len().iter_rows()) == dict(
        p1.select("geoid", "count").iter_rows()
    )
    mine, published = republished(release, recon, PL94_BLOCK_TABLES)
    assert np.array_equal(mine, published)
    adults = recon.persons.filter(pl.col("age_min") >= schema.VOTING_AGE).height
    assert adults == release.table("P10").matrix("block").sum()


def test_pl94_blocks_are_unique_on_what_the_tables_tell_apart(pl94):
    # P8, P9, P10 and P11 publish each block's full race × ethnicity × voting-age histogram
    _, _, metrics, solvar = pl94
    assert solvar.height == metrics["blocks"]
    assert solvar["solvar"].to_list() == [0.0] * solvar.height
    assert metrics["variability"]["share_persons_solvar_zero"] == 1.0


def test_pl94_reidentification_refuses_and_evaluation_is_not_applicable(pl94, population):
    _, recon, _, _ = pl94
    with pytest.raises(InputError, match="do not determine sex, age"):
        reidentify(recon.persons, pl94[0], population, ATTACKER_PRESETS["census"], rng(0))
    figures = agreement(recon.persons, population)
    assert isinstance(figures, NotMeasured)
    assert figures.reason.endswith("do not determine sex, age")
    assert block_agebin_agreement(recon.persons, population) is None


def test_pl94_commands(pl94, population, tmp_path):
    release, recon, metrics, solvar = pl94
    pop, rel, rec = tmp_path / "pop", tmp_path / "rel", tmp_path / "recon"
    write_population(population, pop)
    write_release(release, rel)
    write_reconstruction(rec, recon, {"release": str(rel), **metrics}, solvar)
    back = read_reconstruction(rec)
    assert back.persons.equals(recon.persons)
    runner = CliRunner()
    result = runner.invoke(
        app, ["reidentify", str(rec), "--truth", str(pop), "--out", str(tmp_path / "reid")]
    )
    assert result.exit_code == 2 and not (tmp_path / "reid").exists()
    assert "reidentification is not applicable" in result.output
    assert len(result.output.strip().splitlines()) == 1
    args = ["evaluate", str(rel), "--truth", str(pop), "--recon", str(rec), "--out"]
    result = runner.invoke(app, [*args, str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert figures["reconstruction"]["unknown_attributes"] == ["sex", "age"]
    assert "sex, age" in figures["reconstruction_agreement"]["not_measured"]
    assert "sex or age" in figures["reconstruction_block_sex_agebin"]["not_measured"]


def test_partly_known_attributes_are_null_only_where_unknown():
    # P12 without P14 bins ages 0-4, 5-9, 10-14, 15-17, 18-19: single years there are unknown
    population = synthesize(600, seed=4)
    release = exact_release(population, ["P1", "P8", "P9", "P12"])
    recon = reconstruct(release, workers=1)
    persons, attributes = recon.persons, recon.attributes
    assert attributes["partially_known_attributes"] == ["age"]
    assert attributes["age_bounds_where_unknown"] == [[0, 4], [5, 9], [10, 14], [15, 17], [18, 19]]
    young = persons.filter(pl.col("age_max") < 20)
    assert young["age"].null_count() == young.height > 0
    assert persons.filter(pl.col("age_min") >= 20)["age"].null_count() == 0
    figures, _ = reidentify(persons, release, population, ATTACKER_PRESETS["census"], rng(1))
    # records whose agebin is unknown (under 20, binned by P12 alone) are never linked
    assert figures["reconstruction"]["all"]["putative"] == persons.height - young.height


@pytest.fixture(scope="module")
def dhc(population):
    # the nation's problem spans the whole 233,856-cell DHC histogram: the slowest fixture here
    settings = {"product": "dhc", "workers": "1", "measurements": "false"}
    return run("topdown", population, settings, seed=3)


def test_dhc_release_is_attacked_like_a_swapped_one(dhc, population):
    swapped = run("swap", population, {}, seed=3)
    attacked = {}
    for name, release in (("dhc", dhc), ("swap", swapped)):
        recon, metrics, solvar = attack(release, 1, 0, 60.0, True)
        figures, links = reidentify(
            recon.persons, release, population, ATTACKER_PRESETS["census"], rng(4), solvar
        )
        attacked[name] = recon, metrics, solvar, figures, links
    recon, metrics, solvar, figures, links = attacked["dhc"]
    assert person_tables(dhc) == person_tables(swapped)  # the 34 tables of the 2010 attack
    assert metrics["known_attributes"] == ["block", *schema.PERSON.names]
    assert metrics["unknown_attributes"] == [] == metrics["partially_known_attributes"]
    assert metrics["modes"] == {"exact": metrics["tracts"]}  # TopDown's tables are consistent
    assert recon.persons.null_count().sum_horizontal()[0] == 0
    mine, published = republished(dhc, recon, person_tables(dhc)[0])
    assert np.array_equal(mine, published)
    # the production budget's noise: about 60% on {block, sex, agebin}, 50% on everything
    assert 0.3 < block_agebin_agreement(recon.persons, population) < 1
    assert agreement(recon.persons, population).all.agree_agebin > 0.2
    assert metrics["variability"]["blocks_solvar_zero"] > 0
    # the same figures as on a swapped release, every method linking the published counts
    swap_metrics, swap_figures = attacked["swap"][1], attacked["swap"][3]
    assert metrics.keys() == swap_metrics.keys() and figures.keys() == swap_figures.keys()
    assert figures["baselines"] == "computed"
    rec, mdg, prg = (figures[m] for m in ("reconstruction", "mdg", "prg"))
    assert rec.keys() == swap_figures["reconstruction"].keys()
    assert rec["all"]["putative"] == mdg["all"]["putative"] == prg["all"]["putative"] > 0
    assert links.height == rec["all"]["putative"]
    assert 0 < rec["all"]["precision"] < 1
