"""The decision view: the accuracy–risk frontier, the choose table and the budget charts, on a
sweep with replicates; and no figure that reads 0.000 or 0.0% where nothing was measured."""

from __future__ import annotations

import math
import re
import statistics

import pytest
from scipy import stats

import sdclab
from sdclab.core.markup import decimal, pct
from sdclab.pipeline.experiment import REPORT_FILE, Experiment, ReportSpec, run_spec
from sdclab.pipeline.report.charts import series_style
from sdclab.pipeline.report.frontier import exact_release
from sdclab.pipeline.results import (
    FrontierAxes,
    FrontierPoint,
    NotMeasured,
    ReplicateMean,
    accuracy_targets,
    candidates,
    choose,
)

SWEEP = {
    "population": {"persons": 500, "seed": 7},
    "mechanisms": [
        {"name": "none"},
        {"name": "geometric", "settings": {"epsilon": [4, 16]}, "replicates": 2},
        {
            "name": "cellkey",
            "settings": {"ptable": "maxent", "bound": 3, "variance": 2},
            "replicates": 2,
        },
        {"name": "safetab_h"},
        {"name": "psa", "settings": {"rate": "0.2"}},
    ],
    "attacks": {"workers": 1, "attackers": ["census"], "variability": False, "naive": False},
    "report": {"persons": "all"},  # 500 persons make one block: no vulnerable group to plot
}


ALL_PERSONS = FrontierAxes(risk="reidentification.census.headline.all.points")


def test_the_frontier_plots_the_vulnerable_group_by_default() -> None:
    assert FrontierAxes().risk == "reidentification.census.headline.vulnerable.points"
    assert ReportSpec().axes() == FrontierAxes()
    assert FrontierAxes().describe()[1].startswith("vulnerable group confirmed beyond")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("frontier")
    results = run_spec(Experiment.model_validate(SWEEP), out, lambda _: None)
    return results, (out / REPORT_FILE).read_text(encoding="utf-8")


def test_one_point_per_setting_with_replicate_means_and_intervals(swept) -> None:
    results, _ = swept
    points = {p.setting: p for p in sdclab.frontier(results, ALL_PERSONS)}
    assert list(points) == [
        "none",
        "geometric@epsilon=4",
        "geometric@epsilon=16",
        "cellkey",
        "safetab_h",
        "psa",
    ]
    point = points["geometric@epsilon=4"]
    replicates = [results[t] for t in point.releases]
    assert len(replicates) == 2
    maes = [r.evaluation.compared("tract").mae_nonempty for r in replicates]
    risks = [r.evaluation.reidentification["census"].headline("all").points for r in replicates]
    assert point.accuracy.mean == pytest.approx(statistics.mean(maes))
    half = stats.t.ppf(0.975, 1) * statistics.stdev(maes) / math.sqrt(2)
    assert (point.accuracy.low, point.accuracy.high) == pytest.approx(
        (statistics.mean(maes) - half, statistics.mean(maes) + half)
    )
    assert point.risk.mean == pytest.approx(statistics.mean(risks))
    assert point.epsilon == pytest.approx(8.0)  # the common axis: 2ε for one record changed
    assert points["none"].accuracy.mean == 0 and points["none"].accuracy.n == 1
    safetab = points["safetab_h"]
    assert not safetab.placed
    assert "publishes no P12 at tract" in safetab.accuracy.reason
    assert isinstance(safetab.risk, NotMeasured) and "reidentification" not in safetab.risk.reason


def test_another_accuracy_figure_can_be_chosen(swept) -> None:
    results, _ = swept
    axes = FrontierAxes(accuracy="accuracy.tv_mean", level="block", table="P12")
    point = next(p for p in sdclab.frontier(results, axes) if p.setting == "cellkey")
    tvs = [results[t].evaluation.table("P12", "block").tv_mean for t in point.releases]
    assert point.accuracy.mean == pytest.approx(statistics.mean(tvs))
    with pytest.raises(ValueError, match="name the table"):
        sdclab.frontier(results, FrontierAxes(accuracy="accuracy.tv_mean", level="block"))


def _section(report: str, title: str) -> str:
    start = report.index(f">{title}</h2>")
    return report[start : report.index("</section>", start)]


def test_the_report_opens_with_the_frontier_and_the_choose_table(swept) -> None:
    _, report = swept
    headings = re.findall(r'<h2 id="([^"]+)">', report)
    assert headings[:3] == [
        "accuracy-and-risk-the-frontier",
        "choose-a-method",
        "accuracy-and-risk-against-the-budget",
    ]
    nav = report[report.index('<nav class="contents">') : report.index("</nav>")]
    assert all(f'href="#{h}"' in nav for h in headings)
    frontier = _section(report, "Accuracy and risk: the frontier")
    assert ">exact release</text>" in frontier and ">best baseline</text>" in frontier
    assert "ε=8" in frontier and "ε=32" in frontier  # geometric at ε = 4 and 16 per record
    assert "safetab_h</b>: the release publishes no P12" in frontier
    choose_table = _section(report, "Choose a method")
    assert choose_table.count("<tr>") >= 2 and "lowest-risk protecting setting" in choose_table
    # the exact release is named as a reference, never offered
    assert "<b>none</b>: does not protect (an exact tabulation protects nothing)" in choose_table
    offered = choose_table[: choose_table.index("Never offered")]
    assert "<b>none</b>" not in offered
    budget = _section(report, "Accuracy and risk against the budget")
    assert budget.count("<svg") == 2


def test_no_zero_stands_for_a_figure_not_measured(swept) -> None:
    """Every figure goes through one formatter: n/a with its reason where nothing was measured,
    0 or 0% where the figure is exactly 0, <0.1% or <0.001 where it is below what is shown."""
    _, report = swept
    text = re.sub(r"<[^>]+>", " ", report)
    assert not re.search(r"(?<![\d.])-?0\.0%", text)
    assert not re.search(r"(?<![\d.])-?0\.000(?!\d)", text)
    assert "n/a" in text


def test_formatting_of_zero_small_and_not_measured() -> None:
    from sdclab.core.markup import points

    assert points(0.0) == "0 pp" and points(-0.01) == "−<0.1 pp" and points(2.345) == "+2.3 pp"
    assert pct(0.0) == "0%" and pct(0.0004) == "<0.1%" and pct(-0.0004) == "−<0.1%"
    assert pct(0.1234) == "12.3%" and decimal(0) == "0" and decimal(0.0001) == "<0.001"
    assert "n/a" in pct(NotMeasured("why")) and 'title="why"' in decimal(NotMeasured("why"))


def _point(
    setting: str,
    accuracy: float,
    risk: float,
    protects: bool = True,
    interval: tuple[float, float] | None = None,
    risk_interval: tuple[float, float] | None = None,
) -> FrontierPoint:
    low, high = interval or (None, None)
    risk_low, risk_high = risk_interval or (None, None)
    return FrontierPoint(
        setting,
        setting,
        "m",
        1.0,
        (setting,),
        ReplicateMean(accuracy, 2 if interval else 1, low, high),
        ReplicateMean(risk, 2 if risk_interval else 1, risk_low, risk_high),
        protects=protects,
        why_not=None if protects else "an exact tabulation protects nothing",
    )


def test_choose_takes_the_lowest_risk_protecting_setting_within_the_ceiling() -> None:
    points = [
        _point("exact", 0.0, -1.0, protects=False),  # never offered, however good it looks
        _point("a", 1.5, -2.0),
        _point("b", 4.0, -3.0),
        _point("risky", 0.5, 2.0),  # above the ceiling of 0
    ]
    points.append(
        FrontierPoint(
            "c", "c", "m", 1.0, ("c",), NotMeasured("x"), ReplicateMean(-9, 1, None, None)
        )
    )
    rows = {row.target: row for row in choose(points, [1.0, 2.0, 5.0])}
    assert rows[1.0].best is None and rows[1.0].meeting == 0  # no setting meets this target
    assert rows[2.0].best.setting == "a" and rows[2.0].meeting == 1
    assert rows[5.0].best.setting == "b" and rows[5.0].meeting == 2  # c is not placed
    assert rows[5.0].runner_up.setting == "a"
    assert [p.setting for p in candidates(points)] == ["a", "b"]
    assert [p.setting for p in candidates(points, ceiling=5.0)] == ["a", "b", "risky"]
    assert choose(points, [1.0], ceiling=5.0)[0].best.setting == "risky"
    assert accuracy_targets(points) == [0.2, 0.5, 1.0, 2.0, 5.0]


def test_choose_breaks_a_tie_on_risk_by_accuracy() -> None:
    tied = [_point("worse", 0.9, -5.0), _point("better", 0.1, -5.0)]  # worse is dominated
    assert choose(tied, [1.0])[0].best.setting == "better"


def test_choose_flags_an_interval_that_crosses_the_target_or_the_ceiling() -> None:
    crossing = _point("a", 0.8, -1.0, interval=(0.5, 1.1), risk_interval=(-3.0, 0.5))
    (row,) = choose([crossing], [1.0])
    assert row.flags == (
        "its accuracy interval crosses the target",
        "its risk interval crosses the ceiling",
    )
    settled = _point("a", 0.8, -1.0, interval=(0.6, 0.9), risk_interval=(-2.0, -0.5))
    assert choose([settled], [1.0])[0].flags == ()


def test_twelve_series_and_more_are_told_apart() -> None:
    styles = [series_style(i) for i in range(84)]
    assert len(set(styles)) == 84
    assert len({colour for colour, _ in styles[:12]}) == 12


def test_the_experiment_file_chooses_what_the_frontier_plots() -> None:
    from pathlib import Path

    from sdclab.core.errors import InputError
    from sdclab.pipeline.experiment import parse_experiment

    chosen = {**SWEEP, "report": {"accuracy": "accuracy.tv_mean", "level": "block", "table": "P12"}}
    axes = parse_experiment(chosen, "exp.toml", Path(".")).report.axes()
    assert (axes.accuracy, axes.level, axes.table) == ("accuracy.tv_mean", "block", "P12")
    assert axes.risk == "reidentification.census.headline.vulnerable.points"
    for report, message in (
        ({"accuracy": "precision"}, "report: 'precision' is not an error the frontier can plot"),
        ({"accuracy": "compared.bias_nonempty"}, "not a signed bias"),
        ({"accuracy": "accuracy.mae_nonempty"}, "given per table: name the table"),
        ({"accuracy": "compared.mae", "table": "P14"}, "given for P1 and P12, each apart: not P14"),
        ({"accuracy": "totals.mae", "table": "P12"}, "not given per table: give no table"),
        ({"accuracy": "accuracy.mae", "table": "P99"}, "'P99' is not a catalogue table"),
        ({"level": "town"}, "report.level: expected one of nation, state"),
        ({"accuracy": "indicators.sex_ratio.mae", "level": "block"}, "per tract: give level"),
    ):
        with pytest.raises(InputError, match=message):
            parse_experiment({**SWEEP, "report": report}, "exp.toml", Path("."))


def test_every_block_size_class_shows_its_persons(swept) -> None:
    results, report = swept
    sizes = results.population.block_sizes
    assert sum(v["persons"] for v in sizes.values()) == results.population.persons
    assert "By block size (persons in the block)" in report
    for size, v in sizes.items():
        assert f"{size}: {v['persons']:,} persons" in report
    chart = report[report.index("Precision by block size") :]
    assert f"n={sizes['10-49']['persons']:,}" in chart[: chart.index("</svg>")]


def test_the_demo_prints_one_line_per_release_with_its_headline_risk(swept) -> None:
    from sdclab.cli import release_lines

    results, _ = swept
    lines = release_lines(results)
    assert len(lines) == 1 + len(results.releases) + 1  # the PSA's qualifier, after the lines
    none = next(line for line in lines if line.strip().startswith("none"))
    headline = results["none"].evaluation.reidentification["census"].headline("all").points
    assert none.endswith(f"{headline:+.1f} pp") and " 0.000 " in none  # exact: no error
    safetab = next(line for line in lines if line.strip().startswith("safetab_h"))
    assert safetab.split()[-2:] == ["n/a", "n/a"]


TIME_LIMIT = "Time limit reached"


def test_a_tract_stopped_at_its_time_limit_is_flagged(swept) -> None:
    from dataclasses import replace

    from sdclab.pipeline.report.risk import time_limited
    from sdclab.pipeline.results import ReconstructionFigures

    results, _ = swept
    release = results["cellkey#1"]
    assert time_limited(release) == ""
    figures = release.evaluation.reconstruction
    assert figures.metrics["time_limited_tracts"] == 0

    def flagged(metrics: dict) -> str:
        stopped = ReconstructionFigures(metrics)
        return time_limited(
            replace(release, evaluation=replace(release.evaluation, reconstruction=stopped))
        )

    # wall time stopped a pricing round or a draw: the status is the integer program's
    assert "2 tracts stopped at the time limit" in flagged(
        {**figures.metrics, "time_limited_tracts": 2}
    )
    # results written before the count was recorded: the statuses tell
    old = {k: v for k, v in figures.metrics.items() if k != "time_limited_tracts"}
    assert "2 tracts stopped" in flagged({**old, "statuses": {"Optimal": 3, TIME_LIMIT: 2}})


def test_a_log_axis_draws_zero_on_its_own_floor_tick() -> None:
    from sdclab.pipeline.report.charts import Axis, XYPoint, xy_chart

    points = [XYPoint(1, 0), XYPoint(2, 0.1), XYPoint(3, 0.26), XYPoint(4, 159)]
    svg = xy_chart("t", {"a": points}, Axis("x"), Axis("y", log=True))
    ticks = re.findall(
        r'<line x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"[^>]*/><text[^>]*>([^<]+)<', svg
    )
    at = {label: float(y) for y, label in ticks}
    drawn = [float(v) for v in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)][:2]
    assert ticks[0][1] == "0" and drawn[0] == pytest.approx(at["0"])
    assert drawn[1] == pytest.approx(at["0.1"]) and drawn[1] != drawn[0]
    assert "0 at the floor" in svg


def test_a_line_against_the_budget_joins_only_points_that_differ_in_their_budget() -> None:
    from sdclab.pipeline.report.frontier import _budget_lines

    def point(setting: str, entry: str, epsilon: float, varied: dict) -> FrontierPoint:
        mean = ReplicateMean(1.0, 1, None, None)
        return FrontierPoint(setting, entry, "m", epsilon, (setting,), mean, mean, varied)

    points = [
        point(f"td@rho={rho},product={product}", "td", epsilon, {"rho": rho, "product": product})
        for rho, epsilon in (("1", 10.0), ("4", 22.0))
        for product in ("dhc", "pl94")
    ] + [point("g@epsilon=2", "g", 4.0, {"epsilon": "2"}), point("g", "g", 16.0, {"epsilon": "8"})]
    points += [point(f"s@split={s}", "s", 16.0, {"split": s}) for s in ("even", "census2020")]
    lines = {k: [p.setting for p in v] for k, v in _budget_lines(points).items()}
    assert lines == {
        "td, product=dhc": ["td@rho=1,product=dhc", "td@rho=4,product=dhc"],
        "td, product=pl94": ["td@rho=1,product=pl94", "td@rho=4,product=pl94"],
        "g": ["g@epsilon=2", "g"],
        "s, split=even": ["s@split=even"],  # swept at one ε: not joined along the budget
        "s, split=census2020": ["s@split=census2020"],
    }


def test_the_detail_charts_show_one_series_per_setting(swept) -> None:
    from sdclab.pipeline.report.reading import by_setting, compared_mae

    results, report = swept
    maes = by_setting(results, lambda r: [compared_mae(r, "tract")])
    assert list(maes) == list(results.settings())  # 6 settings, not 9 releases
    replicates = results.settings()["geometric@epsilon=4"]
    values = [results[t].evaluation.compared("tract").mae_nonempty for t in replicates]
    assert maes["geometric@epsilon=4"][0] == pytest.approx(sum(values) / len(values))
    chart = report[report.index('aria-label="MAE of P12') :]
    chart = chart[: chart.index("</svg>")]
    assert "geometric@epsilon=4<" in chart and "geometric@epsilon=4#1" not in chart


PSA_LABEL = "within the PSA's invariants"


def test_the_psa_s_epsilon_says_whose_invariants_it_holds_within(swept) -> None:
    """The PSA's ε holds among datasets sharing its invariants (households by size in every
    block, every statistic of the matching area), far stronger than the others': wherever it
    stands beside another mechanism's ε it says so."""
    from dataclasses import replace

    from sdclab.cli import release_lines
    from sdclab.pipeline.report.frontier import choose_section

    results, report = swept
    points = {p.setting: p for p in sdclab.frontier(results, ALL_PERSONS)}
    psa = points["psa"]
    assert psa.qualifier == (
        f"{PSA_LABEL} (households by size in every block, every statistic of each state and above)"
    )
    assert all(not p.qualifier for name, p in points.items() if name != "psa")
    shown = f"{PSA_LABEL}".replace("'", "&#x27;")
    frontier = _section(report, "Accuracy and risk: the frontier")
    assert f"ε={psa.epsilon:.3g} {shown}<" in frontier  # its label on the chart
    assert "<b>psa</b>: household locations" in frontier  # each mechanism's invariants below
    assert "<b>geometric</b>: none" in frontier and "not the same promise" in frontier
    budget = _section(report, "Accuracy and risk against the budget")
    assert f"psa, ε {shown}" in budget  # its line against the budget
    summary = report[report.index("The ε column puts every guarantee") :]
    assert f"{psa.epsilon:.2f} <small>{shown} (households by size" in summary
    # a row of the choose table that offers it carries the whole qualifier beside its ε (this
    # single-block PSA release swapped nothing visible, so it is offered here as if it protected)
    offered = [replace(p, protects=True) if p.setting == "psa" else p for p in points.values()]
    table = choose_section(results, replace(ALL_PERSONS, risk_ceiling=50.0), offered)
    row = next(r for r in table[table.index("<table>") :].split("<tr>") if "<b>psa</b>" in r)
    assert f"{psa.epsilon:.3g} <small>{shown} (households by size in every block" in row
    assert "<b>psa</b>: household locations" in table
    psa_line = next(line for line in release_lines(results) if line.strip().startswith("psa"))
    assert f"{psa.epsilon:.2f}*" in psa_line
    assert release_lines(results)[-1] == f"* psa: ε {psa.qualifier}"


@pytest.fixture(scope="module")
def suppressed(tmp_path_factory):
    out = tmp_path_factory.mktemp("suppressed")
    spec = {
        "population": {"persons": 1500, "seed": 7},
        "mechanisms": [{"name": "suppress", "settings": {"complementary": "true"}}],
        "attacks": {"reconstruct": False},
    }
    return run_spec(Experiment.model_validate(spec), out, lambda _: None)


def test_the_withheld_share_is_of_what_the_frontier_plots(suppressed) -> None:
    from sdclab.pipeline.report.frontier import _withheld

    results = suppressed
    (point,) = sdclab.frontier(results)
    evaluation = results[point.releases[0]].evaluation

    def label(accuracy: str, level: str = "block", table: str | None = None) -> str:
        return _withheld(results, point, FrontierAxes(accuracy=accuracy, level=level, table=table))

    compared = evaluation.compared("block", "P12").suppressed_share
    p1 = evaluation.table("P1", "block").suppressed_share
    shown = evaluation.totals["block"]["all"]["geounits"]
    totals = 1 - shown / results.population.geography["block"]
    assert min(compared, p1, totals) > 0  # whole blocks withheld: the shares agree
    assert label("compared.mae_nonempty") == f"{pct(compared)} withheld"
    assert label("accuracy.mae", table="P1") == f"{pct(p1)} withheld"
    assert label("totals.mae") == f"{pct(totals)} of totals withheld"
    assert label("compared.mae_nonempty", level="nation") == ""  # nothing withheld there


def test_the_frontier_takes_its_axes_as_keywords() -> None:
    from sdclab.pipeline.results import with_axes

    axes = with_axes(FrontierAxes(), level="block", persons="nonmodal", attacker="commercial")
    assert axes.level == "block"
    assert axes.risk == "reidentification.commercial.headline.nonmodal.points"
    per_table = with_axes(FrontierAxes(), accuracy="accuracy.mae", table="P12")
    assert (per_table.accuracy, per_table.table) == ("accuracy.mae", "P12")
    with pytest.raises(ValueError, match="given per table: name the table"):
        with_axes(FrontierAxes(), accuracy="accuracy.mae")
    with pytest.raises(ValueError, match="persons 'everyone'"):
        with_axes(FrontierAxes(), persons="everyone")


def _placed_point(
    setting: str, mechanism: str, error: float, protects: bool, why: str | None
) -> FrontierPoint:
    def mean(value: float) -> ReplicateMean:
        return ReplicateMean(value, 1, None, None)

    return FrontierPoint(
        setting,
        setting,
        mechanism,
        1.0,
        (setting,),
        mean(error),
        mean(0.3),
        protects=protects,
        why_not=why,
    )


def test_the_exact_release_is_the_setting_that_protects_nothing_and_errs_nowhere() -> None:
    noisy_unprotected = _placed_point(
        "ckm-invertible", "cellkey", 0.8, False, "the p-table can be undone"
    )
    exact = _placed_point(
        "reference", "exact-under-another-name", 0.0, False, "an exact tabulation"
    )
    protected = _placed_point("geometric", "geometric", 0.0, True, None)
    assert exact_release([noisy_unprotected, protected, exact]) is exact
    assert exact_release([noisy_unprotected, protected]) is None


def test_a_reference_line_keeps_its_label_inside_the_plot() -> None:
    """A vertical reference at the plot's right edge (the best baseline at 0 when every point
    lies left of it) is labelled to its left, off the legend; one at the left edge to its
    right."""
    from sdclab.pipeline.report.charts import Axis, Reference, XYPoint, xy_chart

    points = [XYPoint(-30, 1), XYPoint(-10, 2)]
    references = [Reference(0.0, "best baseline"), Reference(-30.0, "left line")]
    svg = xy_chart("t", {"a": points}, Axis("x"), Axis("y"), references=references)
    for label, anchored_end in (("best baseline", True), ("left line", False)):
        found = re.search(
            r'<line x1="([\d.]+)"[^>]*stroke-dasharray[^>]*/><text x="([\d.]+)"([^>]*)>' + label,
            svg,
        )
        assert found is not None, label
        x_line, x_text, attributes = float(found[1]), float(found[2]), found[3]
        assert ('text-anchor="end"' in attributes) == anchored_end, label
        assert (x_text < x_line) == anchored_end, label
