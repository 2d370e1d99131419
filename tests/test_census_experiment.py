"""An experiment over a declared census: its spec, its steps, results.json and the report."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import sdclab
from sdclab.core.errors import InputError
from sdclab.pipeline.experiment import parse_experiment
from sdclab.pipeline.results import ExperimentResult

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"
EXPERIMENT = """
[population]
census = "toyland/census.toml"   # relative to this file
path = "toyland/persons.csv"

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "geometric"
settings = { epsilon = [1, 4] }
seed = 2

[[mechanisms]]
name = "cellkey"
seed = 3

[[mechanisms]]
name = "suppress"

[attacks]
attackers = ["census"]
workers = 1
node_limit = 2000
seed = 5
"""
RELEASES = ["none", "geometric@epsilon=1", "geometric@epsilon=4", "cellkey", "suppress"]


def write_experiment(root: Path, text: str = EXPERIMENT) -> Path:
    """The experiment file beside a copy of the example census."""
    if not (root / "toyland").exists():
        shutil.copytree(TOYLAND, root / "toyland")
    (root / "exp.toml").write_text(text)
    return root / "exp.toml"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ExperimentResult]:
    """The experiment run once from the API."""
    import sdclab

    root = tmp_path_factory.mktemp("census-experiment")
    results = sdclab.run_experiment(write_experiment(root), root / "out")
    return root, results


def test_a_declared_census_experiment_runs_to_its_results(ran):
    root, results = ran
    assert list(results.releases) == RELEASES
    written = json.loads((root / "out" / "results.json").read_text())
    census = written["census"]
    assert (census["name"], census["unit"], census["program"]) == ("toyland", "village", "district")
    assert census["digest"].startswith("sha256:") and census["compared"] == "T3"
    assert ExperimentResult.from_dict(written).to_dict() == written
    population = written["population"]
    assert population["persons"] == 297 and population["geography"]["village"] == 12
    assert 0 < population["uniques"]["unique_on_village_sex_age"] < 1
    assert "solution variability" in population["vulnerable"]["not_measured"]
    # every release protected, reconstructed and reidentified; what is US-only is n/a, not 0
    for title in RELEASES:
        entry = written["mechanisms"][title]
        assert set(entry["accuracy"]) == {"T1", "T2", "T3", "T4"}
        assert "US 2010 census only" in entry["reconstruction"]["variability"]["not_measured"]
        reid = entry["reidentification"]["census"]
        assert reid["reconstruction"]["all"]["attacker_records"] == 297
        assert reid["baselines"] == "computed"
        assert isinstance(reid["headline"]["all"]["points"], float)  # beyond its own baselines
        assert "swapped" not in reid and reid["confidential"]["all"]["confirmed_rate"] > 0.9
    risk = written["mechanisms"]["cellkey"]["risk"]  # the cell key risk step runs on toyland
    assert risk["bound_disclosure"]["tuples_present"] > 0 and risk["scope"]["tuple_children"]
    tidy = pl.read_parquet(root / "out" / "results.parquet")
    points = tidy.filter(pl.col("metric") == "reidentification.census.headline.all.points")
    assert points.height == len(RELEASES) and points["value"].null_count() == 0
    rates = tidy.filter(
        pl.col("metric") == "reidentification.census.reconstruction.all.confirmed_rate"
    )
    assert rates.height == len(RELEASES) and rates["value"].null_count() == 0
    # the noisier geometric release is the less accurate on the census's compared table
    frontier = {
        p.setting: p
        for p in sdclab.frontier(
            results, accuracy="accuracy.mae_nonempty", table="T3", level="district"
        )
    }
    assert (
        frontier["geometric@epsilon=1"].accuracy.mean
        > frontier["geometric@epsilon=4"].accuracy.mean
    )
    assert frontier["none"].accuracy.mean == 0


def test_the_report_names_the_census_and_shows_each_release(ran):
    root, results = ran
    report = (root / "out" / "report.html").read_text()
    top = report[: report.index("Contents")]
    census = results.census
    assert census is not None
    for shown in ("toyland", "Toyland, 2021 census (an example)", census.digest):
        assert shown in top
    assert (
        "297 persons in 117 households; geounits by level: region 2, district 4, village 12" in top
    )
    for title in RELEASES:
        assert f"<b>{title}</b>" in report
    # the frontier plots T3 at the district against the headline risk, and the choose table
    # offers the settings no riskier than toyland's own best baseline
    assert "MAE, non-empty cells of T3, district" in report
    assert "confirmed beyond the best baseline, census attacker (pp)" in report
    assert "n/a: the choose table offers settings no riskier" not in report
    assert "lowest-risk protecting setting that meets it" in report
    # the headline: points beyond the best baseline, the confidential upper bound beside them
    headline = report[report.index('id="headline-risk"') : report.index('id="noise-aware')]
    assert "The baselines of census toyland are made from its own tables" in headline
    assert re.search(r"[+-]\d+\.\d pp / [+-]\d+ persons \(best: \w+\)", headline)
    assert re.search(r'<span title="the swapped-microdata upper bound[^"]*">n/a</span>', headline)
    assert "MAE of T1 by level" in report and "MAE of T3 by level" in report
    assert "Precision by block size" not in report and "solvar" not in report


def test_the_command_line_runs_the_experiment_as_the_api_does(ran, tmp_path):
    root, results = ran
    experiment = write_experiment(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "sdclab", "run", str(experiment), "--out", "out"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "report.html" in done.stdout
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "toyland" in (tmp_path / "out" / "report.html").read_text()
    ours = pl.read_parquet(tmp_path / "out" / "results.parquet")
    theirs = pl.read_parquet(root / "out" / "results.parquet")
    assert ours.equals(theirs)  # fixed seeds: the same figures
    assert written["census"]["digest"] == results.census.digest


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'name = "suppress"',
            'name = "safetab_h"',
            r"mechanisms\[4\]: mechanism safetab_h protects the US 2010 census's tables only",
        ),
        ("workers = 1", "workers = 1\nvariability = true", r"attacks.variability: solution var"),
        ("workers = 1", "workers = 1\nblock_only = true", r"attacks.block_only: the reconstr"),
        ('path = "toyland/persons.csv"', 'path = "toyland/persons.csv"\nreplicates = 2', "boot"),
        ('path = "toyland/persons.csv"', "persons = 500", r"population: census: give path"),
        ('path = "toyland/persons.csv"', 'path = "toyland"', r"population.path: .* is not a file"),
        ('census = "toyland/census.toml"', 'census = "nowhere.toml"', r"population.census: "),
        (
            "[attacks]",
            '[report]\npersons = "vulnerable"\n\n[attacks]',
            r"report: persons: the vuln",
        ),
        (
            "[attacks]",
            '[report]\naccuracy = "compared.mae"\n\n[attacks]',
            r"report: compared.mae is",
        ),
        (
            "[attacks]",
            '[report]\nlevel = "tract"\n\n[attacks]',
            r"report.level: expected one of re",
        ),
        ("[attacks]", '[report]\ntable = "P12"\n\n[attacks]', r"'P12' is not a table of toyland"),
    ],
)
def test_a_us_only_setting_is_refused_in_one_line(tmp_path, old, new, message):
    assert old in EXPERIMENT
    experiment = write_experiment(tmp_path, EXPERIMENT.replace(old, new, 1))
    with pytest.raises(InputError, match=message) as refused:
        from sdclab.pipeline.experiment import load_experiment

        load_experiment(experiment)
    assert "\n" not in str(refused.value)


def test_the_command_line_refuses_a_us_only_mechanism_with_nothing_written(tmp_path):
    experiment = write_experiment(
        tmp_path, EXPERIMENT.replace('name = "cellkey"', 'name = "safetab_h"')
    )
    done = subprocess.run(
        [sys.executable, "-m", "sdclab", "run", str(experiment), "--out", "out"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "mechanisms[3]: mechanism safetab_h protects the US 2010 census" in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_report_axes_default_to_the_census(tmp_path):
    experiment = write_experiment(tmp_path)
    spec = parse_experiment(
        {
            "population": {"census": "toyland/census.toml", "path": "toyland/persons.csv"},
            "mechanisms": [{"name": "none"}],
            "report": {"persons": "nonmodal", "attacker": "commercial"},
        },
        "exp.toml",
        experiment.parent,
    )
    assert spec.census.name == "toyland"
    axes = spec.report.axes(spec.census)
    assert (axes.accuracy, axes.table, axes.level) == ("accuracy.mae_nonempty", "T3", "district")
    assert axes.risk == "reidentification.commercial.headline.nonmodal.points"
    assert axes.headline  # beyond the census's own best baseline
    # the US 2010 census keeps its own defaults
    us = parse_experiment(
        {"population": {"persons": 500}, "mechanisms": [{"name": "none"}]}, "x", tmp_path
    )
    axes = us.report.axes(us.census)
    assert (axes.accuracy, axes.table, axes.level) == ("compared.mae_nonempty", "P12", "tract")
    assert axes.risk == "reidentification.census.headline.vulnerable.points" and axes.headline


def test_a_declared_census_experiment_matches_on_the_common_axis(tmp_path):
    import sdclab

    text = EXPERIMENT.replace(
        '[[mechanisms]]\nname = "cellkey"\nseed = 3\n\n[[mechanisms]]\nname = "suppress"\n',
        '[[mechanisms]]\nname = "topdown"\nseed = 4\n',
    )
    text = text.replace("settings = { epsilon = [1, 4] }\n", "")
    text = text.replace("[attacks]", "[match]\nvalues = [2, 8]\n\n[attacks]\nreconstruct = false")
    results = sdclab.run_experiment(write_experiment(tmp_path, text), tmp_path / "out")
    matched = {
        t: r.evaluation.card.common.epsilon for t, r in results.releases.items() if t != "none"
    }
    # the geometric ε and TopDown's ρ set, over the census's own tables, to reach each target
    assert set(matched) == {"geometric@ε=2", "geometric@ε=8", "topdown@ε=2", "topdown@ε=8"}
    for title, epsilon in matched.items():
        assert epsilon == pytest.approx(float(title.split("=")[1]), rel=1e-6), title
