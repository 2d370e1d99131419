"""Reidentification: one-to-one two-pass linkage, baselines, attacker files, the 2010 finding."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import frame
from sdclab.attacks.linkage import (
    ATTACKER_PRESETS,
    attacker_file,
    attacker_match_share,
    baseline_records,
    confirm,
    link,
    reidentify,
)
from sdclab.attacks.reconstruction import reconstruct
from sdclab.censuses.us2010.population import PERSONS, UNITS, Population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.pipeline.results import Linkage, Reidentification
from sdclab.release import exact_release

B = 10010001001001  # a block geocode as int


def records(rows, columns=("block", "sex", "age", "race", "hispanic")) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=list(columns), orient="row").cast(pl.Int64)


def attacker(rows) -> pl.DataFrame:
    return records(rows, ("id", "block", "sex", "age"))


def test_one_to_one_without_replacement():
    inferred = records([(B, 1, 30, 1, 0), (B, 1, 30, 2, 0)])
    # one attacker record, two candidate reconstructed records: one link, not two
    assert link(inferred, attacker([(7, B, 1, 30)]), seed=1).height == 1
    # three attacker records, one reconstructed record: one link
    many = attacker([(7, B, 1, 30), (8, B, 1, 30), (9, B, 1, 30)])
    assert link(inferred.head(1), many, seed=1).height == 1
    # a naive join would give 2 x 3 = 6 rows
    assert inferred.join(many, on=["block", "sex", "age"]).height == 6
    assert link(inferred, many, seed=1).height == 2


def test_exact_age_first_then_agebin():
    # ages 31 and 33 share the 30-34 agebin; the attacker's 33 must take the reconstructed 33
    inferred = records([(B, 1, 31, 1, 0), (B, 1, 33, 2, 0)])
    links = link(inferred, attacker([(5, B, 1, 33), (6, B, 1, 34)]), seed=3).sort("id")
    assert links["race"].to_list() == [2, 1]
    assert links["link_pass"].to_list() == [1, 2]


def test_ties_are_broken_by_the_seed():
    inferred = records([(B, 2, 50, r, 0) for r in (1, 2, 4, 8, 16, 32)])
    people = attacker([(i, B, 2, 50) for i in range(6)])
    runs = {s: link(inferred, people, seed=s).sort("id")["race"].to_list() for s in range(6)}
    assert link(inferred, people, seed=2).sort("id")["race"].to_list() == runs[2]
    assert len({tuple(r) for r in runs.values()}) > 1


def block_of(people: list[tuple[int, int, int, int]]) -> Population:
    block = "010010001001001"
    units = [(i, block, 0, True, 1) for i in range(len(people))]
    persons = [(i, i, block, 0, *p) for i, p in enumerate(people)]
    return Population(persons=frame(persons, PERSONS), units=frame(units, UNITS))


def test_mdg_and_prg_on_nine_white_and_one_asian():
    population = block_of([(1, 30 + i, 1, 0) for i in range(9)] + [(2, 40, 8, 0)])
    release = exact_release(population)
    census = attacker_file(population, ATTACKER_PRESETS["census"], np.random.default_rng(0))
    census = census.with_columns(pl.col("id", "block", "sex", "age").cast(pl.Int64))

    def precision(kind: str, seed: int) -> float:
        guessed = baseline_records(release, kind, np.random.default_rng(seed))
        links = confirm(link(guessed.cast(pl.Int64), census, seed), population)
        return links["confirmed"].mean()

    assert precision("mdg", 0) == pytest.approx(0.9)
    prg = np.mean([precision("prg", s) for s in range(400)])
    # E = Σ p² = 0.9² + 0.1² = 0.82; sd of one draw's precision ≤ 0.16, so 5 sd of the mean ≈ 0.04
    assert prg == pytest.approx(0.82, abs=0.04)


@pytest.fixture(scope="module")
def attacked():
    population = synthesize(15_000, seed=6)
    release = exact_release(population)
    return population, release, reconstruct(release, workers=1)


def test_census_attacker_reproduces_the_2010_finding(attacked):
    population, release, recon = attacked
    figures, links = reidentify(
        recon.persons, release, population, ATTACKER_PRESETS["census"], np.random.default_rng(4)
    )
    rec, mdg, prg = (figures[m] for m in ("reconstruction", "mdg", "prg"))
    # P12 + P14 fix {block, sex, agebin}: every method links the same number of records
    assert rec["all"]["putative"] == mdg["all"]["putative"] == prg["all"]["putative"]
    assert rec["all"]["putative_rate"] == 1.0
    # the reconstruction's inference about nonmodal persons is far above proportional guessing
    assert rec["nonmodal"]["precision"] > 2 * prg["nonmodal"]["precision"]
    assert mdg["nonmodal"]["precision"] < 0.05
    assert links.height == population.n_persons


def test_commercial_attacker_is_calibrated(attacked):
    population, _, _ = attacked
    file = attacker_file(population, ATTACKER_PRESETS["commercial"], np.random.default_rng(5))
    file = file.with_columns(pl.col("id", "block", "sex", "age").cast(pl.Int64))
    assert attacker_match_share(file, population) == pytest.approx(0.371, abs=0.03)
    assert (file["id"] < 0).any()  # some records are of people not in the census


def test_reidentify_command(tmp_path):
    runner = CliRunner()
    pop, rel, recon, reid = (tmp_path / n for n in ("pop", "rel", "recon", "reid"))
    for args in (
        ["synth", "-n", "3000", "--seed", "1", "--out", str(pop)],
        ["tabulate", str(pop), "--out", str(rel)],
        ["reconstruct", str(rel), "--out", str(recon), "--workers", "1"],
    ):
        assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(
        app,
        [
            "reidentify",
            str(recon),
            "--truth",
            str(pop),
            "--attacker",
            "census",
            "--seed",
            "1",
            "--out",
            str(reid),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "precision" in result.output
    assert (reid / "links.parquet").exists() and (reid / "metrics.json").exists()
    bad = runner.invoke(
        app,
        [
            "reidentify",
            str(recon),
            "--truth",
            str(pop),
            "--set",
            "coverage=2",
            "--out",
            str(tmp_path / "bad"),
        ],
    )
    assert bad.exit_code == 2 and not (tmp_path / "bad").exists()


def test_ties_do_not_depend_on_input_order():
    inferred = records([(B, 2, 50, r, 0) for r in (1, 2, 4, 8)])
    people = attacker([(i, B, 2, 50) for i in range(4)])
    forward = link(inferred, people, seed=9).sort("id")["race"].to_list()
    backward = link(inferred.reverse(), people.reverse(), seed=9).sort("id")["race"].to_list()
    assert forward == backward


def test_movers_land_in_another_block_of_their_county(attacked):
    population, _, _ = attacked
    params = ATTACKER_PRESETS["census"].model_copy(update={"moved": 1.0})
    file = attacker_file(population, params, np.random.default_rng(1))
    true = population.persons.select(
        pl.col("person_id").alias("id"), pl.col("block").cast(pl.Int64)
    )
    joined = file.join(true, on="id")
    assert (joined["block"] != joined["block_right"]).all()
    assert (joined["block"] // 10**10 == joined["block_right"] // 10**10).all()  # same county


def test_noisy_or_partial_releases_do_not_break_the_baselines(attacked):
    from dataclasses import replace

    population, release, recon = attacked
    rng = np.random.default_rng(2)

    def lowered(table):  # 0, 1 or 2 off every published count: some now negative
        cut = rng.integers(0, 3, sum(table.matrix(level).nnz for level in table.levels))
        counts, start = {}, 0
        for level in table.levels:
            matrix = table.matrix(level).copy()
            matrix.data = matrix.data - cut[start : start + matrix.nnz]
            counts[level], start = matrix, start + matrix.nnz
        return table.with_counts(counts)

    noisy = replace(release, tables={name: lowered(t) for name, t in release.tables.items()})
    prg = baseline_records(noisy, "prg", rng)
    assert prg["race"].is_between(1, 63).all() and prg["hispanic"].is_in([0, 1]).all()
    figures, _ = reidentify(recon.persons, noisy, population, ATTACKER_PRESETS["census"], rng)
    assert figures["baselines"] == "computed" and "prg" in figures
    partial = replace(release, tables={n: t for n, t in release.tables.items() if n != "P8"})
    figures, _ = reidentify(recon.persons, partial, population, ATTACKER_PRESETS["census"], rng)
    assert "P8" in figures["baselines"] and "mdg" not in figures
    assert figures["reconstruction"]["all"]["putative"] > 0


def test_confirmation_runs_both_passes_over_every_link():
    """The paper's Algorithm 4: a link made on exact age whose age is wrong (the attacker's age
    was off by a year) is still confirmed on agebin in the second pass; a wrong race is not."""
    population = block_of([(1, 42, 1, 0), (2, 30, 2, 0), (1, 60, 4, 1)])
    block = int(population.persons["block"][0])
    links = pl.DataFrame(
        {
            "id": [0, 1, 2, 99],
            "block": [block] * 4,
            "sex": [1, 2, 1, 1],
            "age": [43, 30, 60, 42],  # person 0's age is off by one, within agebin 40-44
            "race": [1, 2, 1, 1],  # person 2's race is wrong
            "hispanic": [0, 0, 1, 0],
            "link_pass": pl.Series([1, 1, 2, 1], dtype=pl.Int8),
        }
    )
    confirmed = confirm(links, population).sort("id")
    assert confirmed["confirmed"].to_list() == [True, True, False, False]
    assert confirmed["confirmed_pass"].to_list() == [2, 1, None, None]


def test_only_data_defined_persons_are_confirmed_and_attacked():
    """A person whose record is not data-defined is tabulated but has no identifier to link on:
    never in the census attacker's file, never confirmed; with every person data-defined the
    figures are those of a population without the column."""
    people = [(1, 30, 1, 0), (2, 30, 2, 0), (1, 60, 4, 1), (2, 61, 1, 0)]
    plain = block_of(people)
    flagged = Population(
        persons=plain.persons.with_columns(data_defined=pl.Series([True, False, True, True])),
        units=plain.units,
    )
    block = int(plain.persons["block"][0])
    links = records([(block, *p) for p in people]).with_columns(
        id=pl.Series([0, 1, 2, 3]), link_pass=pl.lit(1, pl.Int8)
    )
    assert confirm(links, plain)["confirmed"].to_list() == [True] * 4
    assert confirm(links, flagged)["confirmed"].to_list() == [True, False, True, True]
    census = attacker_file(flagged, ATTACKER_PRESETS["census"], np.random.default_rng(3))
    assert sorted(census["id"].to_list()) == [0, 2, 3]
    release = exact_release(plain)
    recon = reconstruct(release, workers=1)
    every = Population(
        persons=plain.persons.with_columns(data_defined=pl.lit(True)), units=plain.units
    )
    assert "data_defined" in every.persons.columns
    params = ATTACKER_PRESETS["commercial"]
    plain_figures, _ = reidentify(recon.persons, release, plain, params, np.random.default_rng(5))
    every_figures, _ = reidentify(recon.persons, release, every, params, np.random.default_rng(5))
    assert plain_figures == every_figures


def test_confirmation_passes_and_nonmodal_precision_are_figures(attacked):
    """Every method's putative links split by the confirmation pass that confirmed them (the
    census attacker's exact ages confirm in the first pass only; a commercial file's ages off
    within their agebin in the second too), and the reconstruction's nonmodal precision beside
    the proportional guessers'."""
    population, release, recon = attacked
    for preset in ("census", "commercial"):
        rng = np.random.default_rng(4)
        figures, _ = reidentify(recon.persons, release, population, ATTACKER_PRESETS[preset], rng)
        passes = figures["confirmation_passes"]
        methods = {m for m, f in figures.items() if isinstance(f, dict) and "all" in f}
        assert set(passes) == methods and "prg_exact" in methods
        for method, counts in passes.items():
            every = figures[method]["all"]
            assert counts["putative"] == every["putative"]
            assert counts["first_pass"] + counts["second_pass"] == every["confirmed"]
        second = passes["reconstruction"]["second_pass"]
        assert second == 0 if preset == "census" else second > 0
        reid = Reidentification.from_dict({"attacker_preset": preset, **figures})
        assert Reidentification.from_dict(reid.to_dict()).passes == reid.passes
        shares = reid.nonmodal_precision()
        assert isinstance(reid.prg, Linkage) and shares["prg"] == reid.prg.nonmodal.precision
        assert shares["points_beyond_prg_exact"] == pytest.approx(
            100 * (shares["reconstruction"] - reid.fixed["prg_exact"].nonmodal.precision)
        )
        assert reid.to_dict()["nonmodal_precision"] == shares
        metrics = {f.metric for f in reid.figures()}
        prefix = f"reidentification.{preset}"
        assert f"{prefix}.reconstruction.all.confirmed_second_pass_share" in metrics
        assert f"{prefix}.nonmodal_precision.points_beyond_prg" in metrics
    older = {k: v for k, v in figures.items() if k != "confirmation_passes"}
    assert Reidentification.from_dict(older).passes == {}  # figures written before still read
