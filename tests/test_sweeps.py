"""Sweeps and replicates in experiments: the grid, the seeds, the tidy results, the intervals."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import polars as pl
import pytest
from scipy import stats

from sdclab.censuses.us2010.population.synth import GENERATOR_VERSION
from sdclab.core.errors import InputError
from sdclab.pipeline.experiment import (
    MechanismSpec,
    parse_experiment,
    progress,
    replicate_seed,
    run_spec,
)
from sdclab.pipeline.results import EVALUATION_ONLY, ExperimentResult
from sdclab.pipeline.results.experiment import TIDY_SCHEMA
from sdclab.pipeline.results.truth import metric_field, metric_is_evaluation_only


def experiment(mechanisms: list[dict], persons: int = 200) -> dict:
    return {
        "population": {"persons": persons, "seed": 7},
        "mechanisms": mechanisms,
        "attacks": {"reconstruct": False},
    }


def parse(mechanisms: list[dict]):
    return parse_experiment(experiment(mechanisms), "exp.toml", Path("."))


def test_a_grid_of_lists_and_ranges_times_its_replicates() -> None:
    entry = {
        "name": "topdown",
        "label": "td",
        "settings": {"rho": [1, 4], "product": "pl94", "measurements": [True, False]},
        "replicates": 3,
        "seed": 9,
    }
    points = parse([entry]).mechanisms[0].points()
    assert len(points) == 2 * 2 * 3
    assert points[0].title == "td@rho=1,measurements=True#1"
    assert points[0].settings == {"product": "pl94", "rho": 1, "measurements": True}
    assert {p.setting for p in points} == {
        "td@rho=1,measurements=True",
        "td@rho=1,measurements=False",
        "td@rho=4,measurements=True",
        "td@rho=4,measurements=False",
    }
    assert len({p.title for p in points}) == len(points)
    seeds = {p.replicate: p.seed for p in points if p.setting == points[0].setting}
    assert seeds[1] == 9 and len(set(seeds.values())) == 3  # fresh seeds past the first
    assert replicate_seed(9, 2) == seeds[2]  # reproducible


def test_a_log_range_is_evenly_spaced_in_logarithms() -> None:
    entry = {"name": "geometric", "settings": {"epsilon": {"from": 1, "to": 16, "steps": 5}}}
    linear = [p.settings["epsilon"] for p in parse([entry]).mechanisms[0].points()]
    assert linear == ["1", "4.75", "8.5", "12.25", "16"]
    entry["settings"]["epsilon"]["scale"] = "log"
    log = [p.settings["epsilon"] for p in parse([entry]).mechanisms[0].points()]
    assert log == [1, 2, 4, 8, 16]  # whole numbers stay whole


def test_an_entry_without_sweep_keeps_its_title_and_seed() -> None:
    (point,) = (
        parse([{"name": "psa", "settings": {"rate": "0.05"}, "seed": 3}]).mechanisms[0].points()
    )
    assert (point.title, point.setting, point.seed, point.replicate) == ("psa", "psa", 3, 1)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {
                "name": "geometric",
                "settings": {"epsilon": {"from": 0, "to": 4, "steps": 3, "scale": "log"}},
            },
            "a log scale needs from and to above 0",
        ),
        (
            {"name": "geometric", "settings": {"epsilon": {"from": 1, "to": 4, "steps": 1}}},
            r"steps: expected a number at least 2",
        ),
        ({"name": "geometric", "settings": {"epsilon": [1, "x"]}}, "epsilon"),
        ({"name": "geometric", "settings": {"epsilon": []}}, "an empty list sweeps nothing"),
        ({"name": "geometric", "settings": {"epsilon": [4, 4]}}, "holds 4 more than once"),
        (
            {"name": "geometric", "settings": {"epsilon": {"from": 100, "to": 100.01, "steps": 3}}},
            "holds 100 more than once",
        ),
        ({"name": "none", "replicates": 0}, r"replicates: expected a number at least 1"),
        (
            {"name": "geometric", "settings": {"epsilon": list(range(1, 101))}, "replicates": 11},
            "the sweeps make 1,100 releases, more than 1,000",
        ),
    ],
)
def test_bad_sweeps_are_refused_in_words(entry: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse([entry])


def test_a_grid_is_counted_from_its_sizes_before_any_release_is_made(monkeypatch) -> None:
    """5 settings of 100 values each: 10¹⁰ releases, refused from the product of the sizes (making
    them first took 3.2 GB of a 1,558-byte file), alone and times a match."""

    def made(*_):
        raise AssertionError("the points were made before they were counted")

    monkeypatch.setattr(MechanismSpec, "points", made)
    values = list(range(1, 101))
    grid = {"name": "geometric", "settings": {k: values for k in "abcde"}}
    with pytest.raises(InputError, match="the sweeps make 10,000,000,000 releases"):
        parse([grid])
    matched = experiment([{"name": "geometric", "replicates": 20}]) | {"match": {"values": values}}
    with pytest.raises(InputError, match="the sweeps and the match make 2,000 releases"):
        parse_experiment(matched, "exp.toml", Path("."))


def test_repeated_values_are_found_by_hashing() -> None:
    values = [*range(1, 40_001), 7]  # comparing every pair took 19 s (100,000 values: > 120 s)
    start = time.perf_counter()
    with pytest.raises(InputError, match="settings.epsilon holds 7 more than once"):
        parse([{"name": "geometric", "settings": {"epsilon": values}}])
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    ("part", "where"),
    [
        ({"match": {"values": [1, math.inf]}}, r"match\.values\[2\]"),
        ({"match": {"values": {"from": 1, "to": math.inf, "steps": 3}}}, r"match\.values\.to"),
        (
            {
                "mechanisms": [
                    {
                        "name": "geometric",
                        "settings": {"epsilon": {"from": 1, "to": math.inf, "steps": 3}},
                    }
                ]
            },
            r"mechanisms\[1\]\.settings\.epsilon\.to",
        ),
        ({"attacks": {"time_limit": math.nan}}, r"attacks\.time_limit"),
    ],
)
def test_numbers_that_are_not_finite_are_refused_naming_the_key(part: dict, where: str) -> None:
    data = experiment([{"name": "geometric"}]) | part
    with pytest.raises(InputError, match=f"exp.toml: {where}: expected a finite number, got"):
        parse_experiment(data, "exp.toml", Path("."))


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    spec = parse_experiment(
        experiment(
            [
                {"name": "geometric", "settings": {"epsilon": [2, 8]}, "replicates": 3},
                {"name": "none", "replicates": 2},
            ]
        ),
        "exp.toml",
        Path("."),
    )
    return spec, out, run_spec(spec, out, lambda _: None)


def test_the_tidy_results_hold_a_row_per_release_and_figure(swept) -> None:
    spec, out, result = swept
    tidy = pl.read_parquet(out / "results.parquet")
    assert list(tidy.columns) == list(TIDY_SCHEMA)
    assert tidy["release"].n_unique() == 2 * 3 + 2
    per_release = {
        title: sum(1 for _ in release.evaluation.figures())
        for title, release in result.releases.items()
    }
    assert tidy.height == sum(per_release.values())
    assert tidy.group_by("release").len().sort("release").rows() == sorted(per_release.items())
    assert pl.read_csv(out / "results.csv", infer_schema_length=None).height == tidy.height
    geometric = tidy.filter(pl.col("entry") == "geometric")
    assert set(geometric["epsilon"].to_list()) == {4.0, 16.0}  # the common axis: 2ε
    none = tidy.filter(pl.col("entry") == "none")
    assert none["epsilon"].is_null().all()
    missing = tidy.filter(pl.col("value").is_null())
    assert missing["reason"].is_not_null().all()  # n/a always says why


def test_every_tidy_row_and_replicate_mean_says_whether_it_is_evaluation_only(swept) -> None:
    _, out, _ = swept
    written = json.loads((out / "results.json").read_text())
    parquet = pl.read_parquet(out / "results.parquet")
    csv = pl.read_csv(out / "results.csv", infer_schema_length=None)
    for tidy in (parquet, csv):
        assert tidy.schema[EVALUATION_ONLY] == pl.Boolean
        assert tidy[EVALUATION_ONLY].null_count() == 0
    labels = parquet.select("release", "metric", EVALUATION_ONLY).unique()
    for release, metric, label in labels.iter_rows():
        entry = written["mechanisms"][release]
        assert metric_field(metric) in entry, metric  # the field of results.json it is from
        assert label is (metric_field(metric) in entry[EVALUATION_ONLY]), metric
    assert written["replicates"]
    for row in written["replicates"]:
        assert row[EVALUATION_ONLY] is metric_is_evaluation_only(row["metric"])


def test_replicates_get_their_mean_and_t_interval(swept) -> None:
    _, out, result = swept
    tidy = result.tidy()
    chosen = tidy.filter(
        (pl.col("setting") == "geometric@epsilon=2")
        & (pl.col("metric") == "accuracy.mean_mae")
        & (pl.col("level") == "block")
    )["value"].to_list()
    assert len(chosen) == 3 and len(set(chosen)) == 3  # fresh noise in every replicate
    summary = json.loads((out / "results.json").read_text())["replicates"]
    (row,) = [
        r
        for r in summary
        if r["setting"] == "geometric@epsilon=2"
        and r["metric"] == "accuracy.mean_mae"
        and r["level"] == "block"
    ]
    mean = sum(chosen) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in chosen) / 2)
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert row["n"] == 3
    assert row["mean"] == pytest.approx(mean)
    assert (row["low"], row["high"]) == (pytest.approx(mean - half), pytest.approx(mean + half))


def test_identical_replicates_are_named_and_not_counted_as_draws(swept) -> None:
    _, _, result = swept
    assert result["none#2"].sweep.same_as == "none#1"
    assert result["geometric@epsilon=2#2"].sweep.same_as is None
    assert not [r for r in result.replicate_summary() if r["setting"] == "none"]
    # a setting that draws nothing runs once: its replicates make no steps of their own
    made = " ".join(result.steps_computed + result.steps_reused)
    assert "none#1" in made and "none#2" not in made
    assert "geometric@epsilon=2#2" in made


def test_a_swept_value_cannot_leave_the_steps_directory(tmp_path) -> None:
    from sdclab.pipeline.experiment import Step

    made = Step("release:td@strategy=../../x/y.toml", "abc").directory(tmp_path)
    assert made.parent == tmp_path / "steps" and made.name.endswith("-abc")


def test_a_rerun_reuses_every_step_and_reads_back(swept) -> None:
    spec, out, _ = swept
    again = run_spec(spec, out, lambda _: None)
    assert again.steps_computed == ()
    read = ExperimentResult.from_dict(json.loads((out / "results.json").read_text()))
    assert read["geometric@epsilon=8#3"].sweep.varied == {"epsilon": "8"}
    assert read["geometric@epsilon=8#3"].sweep.replicate == 3


def test_progress_counts_releases_and_estimates_the_time_left() -> None:
    assert progress(0, 4, 0.2, "none") == "[1/4] none — 0 s elapsed"
    assert progress(2, 4, 130.0, "psa") == "[3/4] psa — 2 min 10 s elapsed, about 2 min 10 s left"


def test_the_results_say_what_made_them(swept) -> None:
    _, out, _ = swept
    made = json.loads((out / "results.json").read_text())["provenance"]
    assert made["sdclab"] and made["run_at"].endswith("UTC")
    assert made["population"] == {"persons": 200, "seed": 7, "generator": GENERATOR_VERSION}
    assert made["mechanism_seeds"].startswith("in the experiment (not repeated")
    report = (out / "report.html").read_text()
    assert f"sdclab {made['sdclab']} · experiment an experiment given in Python" in report
