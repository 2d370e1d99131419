"""The decision view of the report: the accuracy–risk frontier, the choose table, and accuracy
and risk against the budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sdclab.core.markup import EVALUATION, esc, pct, points, section
from sdclab.pipeline.report.charts import Axis, Reference, XYPoint, wants_log, xy_chart
from sdclab.pipeline.report.html import figure
from sdclab.pipeline.results import (
    Choice,
    ExperimentResult,
    FrontierAxes,
    FrontierPoint,
    NotMeasured,
    ReplicateMean,
    accuracy_targets,
    candidates,
    choose,
)

FRONTIER_NOTE = (
    "<p>One point per release setting: its replicates' mean, with their 95% t-interval as bars "
    "(no bar: one replicate). Accuracy is the figure named on its axis, measured on the same "
    "table and cells for every release; risk is the headline risk — confirmed "
    "reidentifications beyond the best baseline, the fixed baselines included, so 0 is what the "
    "statistics alone give. A label is the setting's ε on the common axis (δ = 10⁻¹⁰, one "
    "person's record changed, within its mechanism's invariants: the PSA's is labelled so); no "
    "label: no common-axis ε. A release that withholds cells (suppression) says what share: a "
    "withheld cell's error is its true count (a withheld 0 costs nothing). Lower and further "
    "left is better.</p>"
)


NO_BASELINE_NOTE = (
    "<p>One point per release setting: its replicates' mean, with their 95% t-interval as bars "
    "(no bar: one replicate). Accuracy is the figure named on its axis, measured on the same "
    "table and cells for every release. These axes plot no baseline (figures written before "
    "the census had its own guessers), so the risk is the confirmed rate as measured — a "
    "share of the attacker's records, not points beyond what the statistics alone give — and "
    "there is no baseline line. A label is the setting's ε on the common axis (δ = 10⁻¹⁰, one "
    "person's record changed); no label: no common-axis ε. A release that withholds cells "
    "(suppression) says what share: a withheld cell's error is its true count. Lower and "
    "further left is better.</p>"
)
NO_CHOICE = (
    "<p>n/a: the choose table offers settings no riskier than what the statistics alone give "
    "(the best baseline), and these axes plot none; the frontier above shows the "
    "confirmed rates as measured.</p>"
)


def exact_release(placed: list[FrontierPoint]) -> FrontierPoint | None:
    """The setting the frontier marks as the exact release: the first that protects nothing and
    errs nowhere on the plotted accuracy (whatever its mechanism is called)."""
    return next((p for p in placed if not p.protects and _mean(p.accuracy) == 0), None)


def _mean(value: ReplicateMean | NotMeasured) -> float:
    assert isinstance(value, ReplicateMean)
    return value.mean


def _interval(
    value: ReplicateMean | NotMeasured, nonnegative: bool = False
) -> tuple[float, float] | None:
    """The 95% interval of a replicate mean (cut at 0 for an error's size, which is never
    below it: every accuracy figure of the frontier), or None for one replicate."""
    if not isinstance(value, ReplicateMean) or value.low is None or value.high is None:
        return None
    return (max(value.low, 0.0) if nonnegative else value.low), value.high


def _epsilon_label(point: FrontierPoint) -> str:
    """The point's ε on a chart, with the head of its qualifier ("within the PSA's invariants";
    the whole of it is in the note under the chart)."""
    if isinstance(point.epsilon, NotMeasured):
        return ""
    label = f"ε={point.epsilon:.3g}"
    return f"{label} {_head(point)}" if point.qualifier else label


def _head(point: FrontierPoint) -> str:
    """The qualifier of a point's ε without its parenthesis, short enough for a chart."""
    return point.qualifier.split(" (")[0]


def _epsilon_cell(point: FrontierPoint) -> str:
    """The point's ε in a table: the figure and, beside it, its whole qualifier."""
    if isinstance(point.epsilon, NotMeasured):
        return f'<span title="{esc(point.epsilon.reason)}">n/a</span>'
    qualifier = f" <small>{esc(point.qualifier)}</small>" if point.qualifier else ""
    return f"{point.epsilon:.3g}{qualifier}"


def _invariants_note(results: ExperimentResult, points: Sequence[FrontierPoint]) -> str:
    """Where the ε of several mechanisms stand side by side: each holds within its own card's
    invariants, and these differ (the PSA's are far stronger than TopDown's totals)."""
    shown: dict[str, FrontierPoint] = {}
    for p in points:
        if not isinstance(p.epsilon, NotMeasured):
            shown.setdefault(p.mechanism, p)
    if len(shown) < 2:
        return ""
    items = []
    for mechanism, p in shown.items():
        invariants = results[p.releases[0]].evaluation.card.guarantee.invariants
        held = "; ".join(i.text() for i in invariants) or "none"
        labelled = f" — its ε is shown {p.qualifier}" if p.qualifier else ""
        items.append(f"<li><b>{esc(mechanism)}</b>: {esc(held)}{esc(labelled)}</li>")
    return (
        "<p>Each ε holds within its own mechanism's invariants — the statistics every dataset of "
        "its universe shares — and these differ, so the same ε is not the same promise:</p><ul>"
        + "".join(items)
        + "</ul>"
    )


def _withheld(results: ExperimentResult, point: FrontierPoint, axes: FrontierAxes) -> str:
    """What share of what the plotted figure measures the setting's release withholds: "x%
    withheld" of the cells of the table plotted (their errors are their true counts), "x% of
    totals withheld" of the geounits' totals, "x% of tracts without it" of an indicator; ""
    where it withholds none."""
    release = results[point.releases[0]]
    evaluation = release.evaluation
    family = axes.accuracy.split(".")[0]
    share: object = None
    if family in ("compared", "accuracy"):  # a compared figure is its table's (axes name it)
        table = evaluation.accuracy.get(axes.table or "", {}).get(axes.level)
        share = None if table is None else table.suppressed_share
        what = "withheld"
    elif family == "totals":
        shown = evaluation.totals.get(axes.level, {}).get("all", {}).get("geounits")
        geounits = results.population_of(release).geography.get(axes.level)
        share = 1 - shown / geounits if isinstance(shown, int | float) and geounits else None
        what = "of totals withheld"
    else:  # indicators.<name>.mae
        figures = evaluation.indicators.get(axes.accuracy.split(".")[1], {})
        tracts, undefined = figures.get("tracts"), figures.get("undefined_tracts")
        if isinstance(undefined, int | float) and isinstance(tracts, int | float) and tracts:
            share = undefined / tracts
        what = "of tracts without it"
    if not isinstance(share, float | int) or share <= 0:
        return ""
    return f"{pct(share)} {what}"


def _by_entry(points: Sequence[FrontierPoint]) -> dict[str, list[FrontierPoint]]:
    out: dict[str, list[FrontierPoint]] = {}
    for p in points:
        out.setdefault(p.entry, []).append(p)
    return out


def _budget_lines(points: Sequence[FrontierPoint]) -> dict[str, list[FrontierPoint]]:
    """The points of each line against the budget: an entry's points, split by every swept
    setting that does not fix ε (a line joins only points that differ in their budget)."""
    out: dict[str, list[FrontierPoint]] = {}
    for entry, entry_points in _by_entry(points).items():
        rest = [k for k in entry_points[0].varied if not _fixes_epsilon(entry_points, k)]
        for p in entry_points:
            label = entry + "".join(f", {k}={p.varied.get(k)}" for k in rest)
            out.setdefault(label, []).append(p)
    return out


def _fixes_epsilon(points: Sequence[FrontierPoint], key: str) -> bool:
    """Whether the swept setting ``key`` takes several values, each fixing the points' ε to
    an ε of its own (a setting swept at one ε, like the geometric split, does not)."""
    values = {p.varied.get(key) for p in points}
    if len(values) < 2:
        return False
    epsilons = [{str(p.epsilon) for p in points if p.varied.get(key) == v} for v in values]
    return all(len(e) == 1 for e in epsilons) and len(set.union(*epsilons)) == len(values)


def _styles(points: Sequence[FrontierPoint]) -> Callable[[str], int]:
    """Each entry's style index, by its place in the experiment, for every chart alike (a
    budget line is named after its entry, then its other settings)."""
    entries = list(_by_entry(points))
    return lambda name: entries.index(name.split(", ")[0])


def _unplaced(points: Sequence[FrontierPoint]) -> str:
    """The settings left off the frontier, each with the reason."""
    rows = []
    for p in points:
        if p.placed:
            continue
        missing = [v for v in (p.accuracy, p.risk) if isinstance(v, NotMeasured)]
        rows.append(
            f"<li><b>{esc(p.setting)}</b>: {esc('; '.join(m.reason for m in missing))}</li>"
        )
    return f"<p>Not on the frontier:</p><ul>{''.join(rows)}</ul>" if rows else ""


def frontier_section(
    results: ExperimentResult, axes: FrontierAxes, points: Sequence[FrontierPoint]
) -> str:
    """The frontier chart, with the exact release and the best baseline as reference lines."""
    placed = [p for p in points if p.placed]
    accuracy_label, risk_label = axes.describe()
    body = FRONTIER_NOTE if axes.headline else NO_BASELINE_NOTE
    if not placed:
        body += "<p>No release has both an accuracy and a risk figure: no frontier to draw.</p>"
        return section("Accuracy and risk: the frontier", [(EVALUATION, body + _unplaced(points))])
    series = {
        entry: [
            XYPoint(
                _mean(p.risk),
                _mean(p.accuracy),
                _interval(p.risk),
                _interval(p.accuracy, nonnegative=True),
                " ".join(filter(None, (_epsilon_label(p), _withheld(results, p, axes)))),
            )
            for p in entry_points
            if p.placed
        ]
        for entry, entry_points in _by_entry(points).items()
    }
    series = {k: v for k, v in series.items() if v}
    references = [Reference(0.0, "best baseline")] if axes.headline else []
    exact = exact_release(placed)
    if exact is not None:
        references.append(Reference(_mean(exact.risk), "exact release"))
    accuracies = [_mean(p.accuracy) for p in placed]
    chart = xy_chart(
        "Accuracy against the headline risk" if axes.headline else "Accuracy against the risk",
        series,
        Axis(risk_label),
        Axis(accuracy_label, log=wants_log(accuracies)),
        references,
        source=EVALUATION,
        style_of=_styles(points),
    )
    body += figure(EVALUATION, chart) + _invariants_note(results, placed) + _unplaced(points)
    return section("Accuracy and risk: the frontier", [(EVALUATION, body)])


def _shown(
    value: ReplicateMean | NotMeasured, nonnegative: bool = False, signed: bool = False
) -> str:
    """A replicate mean as the report shows figures (a risk in signed points), its interval
    after it."""
    if isinstance(value, NotMeasured):
        return f'<span title="{esc(value.reason)}">n/a</span>'
    interval = _interval(value, nonnegative)
    bounds = "" if interval is None else f" <small>[{interval[0]:.3g}, {interval[1]:.3g}]</small>"
    return (points(value.mean) if signed else f"{value.mean:.3g}") + bounds


def choose_section(
    results: ExperimentResult, axes: FrontierAxes, points: Sequence[FrontierPoint]
) -> str:
    """For each accuracy target, the protecting setting of least headline risk, within the risk
    ceiling, that meets it, with the runner-up and the flags where the replicates do not settle
    it; the settings never offered are named below."""
    accuracy_label, risk_label = axes.describe()
    targets = accuracy_targets(points)
    if not axes.headline:
        return section("Choose a method", [(EVALUATION, NO_CHOICE)])
    if not targets:
        return section(
            "Choose a method",
            [(EVALUATION, "<p>No release has both an accuracy and a risk figure.</p>")],
        )
    rows = []
    chosen = choose(points, targets, axes.risk_ceiling)
    for start, row in enumerate(chosen):
        best = row.best
        if start + 1 < len(chosen) and _same_answer(chosen[start + 1], row):
            continue  # the next target has the same answer: one row for the run of targets
        first = start
        while first > 0 and _same_answer(chosen[first - 1], row):
            first -= 1
        target = f"≤ {row.target:g}"
        if first < start:
            target = f"≤ {chosen[first].target:g} to ≤ {row.target:g}"
        if best is None:
            cells = [target, "no setting meets this target", "", "", "", "", "", "0"]
        else:
            cells = [
                target,
                f"<b>{esc(best.setting)}</b>",
                _shown(best.accuracy, nonnegative=True)
                + (
                    f" <small>({withheld})</small>"
                    if (withheld := _withheld(results, best, axes))
                    else ""
                ),
                _shown(best.risk, signed=True),
                _epsilon_cell(best),
                "; ".join(row.flags) or "settled",
                esc(row.runner_up.setting) if row.runner_up is not None else "none",
                str(row.meeting),
            ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = (
        f"accuracy target ({esc(accuracy_label)})",
        "lowest-risk protecting setting that meets it",
        "its accuracy [95% interval]",
        f"its risk ({esc(risk_label)})",
        "ε (common axis)",
        "flags",
        "runner-up",
        "settings meeting the target",
    )
    table = (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in headers)
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )
    note = (
        f"<p>Only a setting whose every replicate protects is offered, and only within the risk "
        f"ceiling: mean risk at most {axes.risk_ceiling:g} ({esc(risk_label)}; 0 is what the "
        "statistics alone give). Targets are round values across the measured accuracies (a run "
        "of targets with the same answer is one row); a setting meets a target when its "
        "replicates' mean accuracy does, and the count of settings meeting it is for the loosest "
        "target of the row. A flag says where the replicates do not settle the answer: the "
        "chosen setting's accuracy interval crosses the target, or its risk interval the "
        "ceiling. An interval of an error's mean is cut at 0.</p>"
    )
    offered = [row.best for row in chosen if row.best is not None]
    note += _invariants_note(results, offered)
    return section("Choose a method", [(EVALUATION, note + table + _not_offered(points, axes))])


def _same_answer(one: Choice, other: Choice) -> bool:
    """Whether two targets' rows say the same (best, runner-up and flags)."""
    return (one.best, one.runner_up, one.flags) == (other.best, other.runner_up, other.flags)


def _not_offered(points: Sequence[FrontierPoint], axes: FrontierAxes) -> str:
    """The settings the table never offers, each with why: no protection, or over the ceiling."""
    offered = {p.setting for p in candidates(points, axes.risk_ceiling)}
    reasons = []
    for p in points:
        if p.setting in offered:
            continue
        if not p.protects:
            why = f"does not protect ({p.why_not})"
        elif not p.placed:
            continue  # the frontier says why it has no point
        else:
            why = f"mean risk {_mean(p.risk):.3g} above the ceiling {axes.risk_ceiling:g}"
        reasons.append(f"<li><b>{esc(p.setting)}</b>: {esc(why)}</li>")
    if not reasons:
        return ""
    return "<p>Never offered (reference lines, not choices):</p><ul>" + "".join(reasons) + "</ul>"


def budget_section(
    results: ExperimentResult, axes: FrontierAxes, everything: Sequence[FrontierPoint]
) -> str:
    """Accuracy and risk against the common-axis ε, one line per entry that has one (an entry
    whose ε carries a qualifier says so in its name); nothing when no setting has a common-axis
    ε."""
    points = [p for p in everything if not isinstance(p.epsilon, NotMeasured)]
    accuracy_label, risk_label = axes.describe()
    charts = []
    risk_title = "Headline risk" if axes.headline else "Risk"
    for title, label, coordinate in (
        ("Accuracy against the budget", accuracy_label, "accuracy"),
        (f"{risk_title} against the budget", risk_label, "risk"),
    ):
        series: dict[str, list[XYPoint]] = {}
        for entry, entry_points in _budget_lines(points).items():
            measured = [
                (p, getattr(p, coordinate))
                for p in entry_points
                if isinstance(getattr(p, coordinate), ReplicateMean)
            ]
            if measured:
                head = _head(entry_points[0])
                series[f"{entry}, ε {head}" if head else entry] = [
                    XYPoint(
                        float(p.epsilon),  # type: ignore[arg-type]
                        v.mean,
                        y_interval=_interval(v, nonnegative=coordinate == "accuracy"),
                    )
                    for p, v in measured
                ]
        if not series:
            continue
        values = [q.y for qs in series.values() for q in qs]
        baseline = Reference(0.0, "best baseline", vertical=False)
        references = [baseline] if coordinate == "risk" and axes.headline else []
        epsilons = [q.x for qs in series.values() for q in qs]
        charts.append(
            figure(
                EVALUATION,
                xy_chart(
                    title,
                    series,
                    Axis("ε at δ = 10⁻¹⁰, one person's record changed", log=wants_log(epsilons)),
                    Axis(label, log=coordinate == "accuracy" and wants_log(values)),
                    references,
                    connect=True,
                    source=EVALUATION,
                    style_of=_styles(everything),
                ),
            )
        )
    if not charts:
        return ""
    note = _invariants_note(results, points)
    return section("Accuracy and risk against the budget", [(EVALUATION, "".join(charts) + note)])
