"""The experiment report: one self-contained HTML page, inline SVG plots, no script, no network."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdclab.core import diagnostics
from sdclab.core.markup import CARD, EVALUATION, SOURCES, esc, labelled, section, source_label
from sdclab.pipeline.report import declared
from sdclab.pipeline.report.cell_key import ckm_section
from sdclab.pipeline.report.frontier import budget_section, choose_section, frontier_section
from sdclab.pipeline.report.html import STYLE, contents
from sdclab.pipeline.report.plots import all_charts
from sdclab.pipeline.report.risk import headline_section, ranking_section
from sdclab.pipeline.report.summary import (
    SUMMARY_NOTE,
    coarser_tables,
    population_paragraph,
    summary_table,
)
from sdclab.pipeline.results import (
    EVALUATION_ONLY,
    POPULATION_TRUTH_FIELDS,
    ExperimentResult,
    FrontierAxes,
    NotMeasured,
    Reidentification,
)
from sdclab.pipeline.results.decision import frontier


def _legend(results: ExperimentResult) -> str:
    """How to read the labels, and which fields of results.json are evaluation only."""
    fields = sorted(
        {path for r in results.releases.values() for path in r.to_dict()[EVALUATION_ONLY]}
    )
    items = "".join(f"<li>{source_label(s)}{esc(s.explanation)}</li>" for s in SOURCES)
    return (
        '<div class="legend"><h2>Where each number comes from</h2>'
        "<p>Every section, table and figure below carries one of these labels; the columns of the "
        f"summary table are marked {', '.join(s.mark for s in SOURCES)}.</p><ul>{items}</ul>"
        + (
            "<p>In <code>results.json</code>, these figures of each mechanism are evaluation only: "
            + ", ".join(f"<code>{esc(f)}</code>" for f in fields)
            + "; and of the population: "
            + ", ".join(f"<code>{esc(f)}</code>" for f in POPULATION_TRUTH_FIELDS)
            + ". Each row of <code>results.parquet</code> and <code>results.csv</code> says "
            + f"whether it is (<code>{EVALUATION_ONLY}</code>).</p>"
            if fields
            else ""
        )
        + "</div>"
    )


def _provenance(made: Mapping[str, Any], program: str = "tract") -> str:
    """One line of what made the results (nothing for results that do not record it);
    ``program``: the level of the reconstruction's programs, which the time limit is per."""
    if not made:
        return ""
    attacks = made.get("attacks", {})
    population = ", ".join(f"{k} {v}" for k, v in made.get("population", {}).items())
    return (
        f"<p><small>sdclab {esc(str(made.get('sdclab')))} · experiment "
        f"{esc(str(made.get('experiment')))} · run {esc(str(made.get('run_at')))} · population: "
        f"{esc(population)} · attacks: seed {esc(str(attacks.get('seed')))}, time limit "
        f"{esc(str(attacks.get('time_limit')))} s per {esc(program)}{_node_limit(attacks)}, "
        f"{esc(str(attacks.get('knowledge')))} · mechanism seeds: "
        f"{esc(str(made.get('mechanism_seeds')))}</small></p>" + _matched(made.get("match"))
    )


def _node_limit(attacks: Mapping[str, Any]) -> str:
    """ ", node limit N" where the results record one (not in results made before it was)."""
    limit = attacks.get("node_limit")
    return "" if limit is None else f", node limit {esc(str(limit))}"


def _matched(match: Mapping[str, Any] | None) -> str:
    """What a match ran: its axis and values, and each entry it left as it was, with why."""
    if not match:
        return ""
    values = ", ".join(f"{v:g}" for v in match["values"])
    left = "".join(
        f"<li><b>{esc(title)}</b>: {esc(reason)}</li>"
        for title, reason in match.get("not_matched", {}).items()
    )
    return (
        f"<p>Matched on the common axis (ε at δ = 10⁻¹⁰, one person's record changed): every "
        f"mechanism that has one runs at ε = {esc(values)}."
        + (f" Not matchable, run as given:</p><ul>{left}</ul>" if left else "</p>")
    )


def render_report(results: ExperimentResult, axes: FrontierAxes | None = None) -> str:
    """The whole report as one HTML string: a table of contents, the accuracy–risk frontier
    (``axes``: what it plots; the tract MAE of non-empty cells against the census attacker's
    headline risk by default) and the choose table first, then the detail.

    Every section, table and figure is labelled with its :class:`Source`: evaluation only
    (computed with the confidential data), from the release alone, or from the specification card.
    """
    axes = axes or FrontierAxes()
    releases = results.releases
    view = results.census
    program = "tract" if view is None else view.program
    summary, population = summary_table(results), population_paragraph(results)
    sections = "".join(
        ckm_section(t, r.evaluation.risk)
        for t, r in releases.items()
        if not isinstance(r.evaluation.risk, NotMeasured)
    )
    sections += diagnostics.sections(
        ((t, d) for t, r in releases.items() for d in r.evaluation.diagnostics),
        us_census=view is None,
    )
    cards = "".join(
        f"<details><summary>{esc(t)}: specification card</summary><pre>"
        f"{esc(r.evaluation.card.render())}</pre></details>"
        for t, r in releases.items()
    )
    points = frontier(results, axes)  # once: the three sections share it
    body = f"""{frontier_section(results, axes, points)}
{choose_section(results, axes, points)}
{budget_section(results, axes, points)}
{section("Summary", [(EVALUATION, SUMMARY_NOTE + summary + coarser_tables(results))])}
{headline_section(results)}
{ranking_section(results)}
{"".join(all_charts(results))}
{sections}
{section("Specification cards", [(CARD, cards)])}"""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sdclab report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:4px 6px}}
th{{background:#f2f2f2}}figure{{display:inline-block;margin:8px}}pre{{white-space:pre-wrap}}
{STYLE}</style>
</head><body>
<h1>sdclab: protection, accuracy and risk side by side</h1>
{"" if view is None else declared.census_line(view)}{_provenance(results.provenance, program)}
{_legend(results)}
{labelled(EVALUATION, population)}
<p>{_attack_sentence(results)}</p>
{contents(body)}
{body}
<p><small>Steps computed: {len(results.steps_computed)}; reused:
{len(results.steps_reused)}.</small></p>
</body></html>
"""


def _attack_sentence(results: ExperimentResult) -> str:
    if results.census is not None:
        return declared.attack_sentence(results, results.census)
    releases = results.releases.values()
    attackers = sorted(
        {
            attacker
            for r in releases
            for attacker, reid in r.evaluation.reidentification.items()
            if isinstance(reid, Reidentification)
        }
    )
    if all(isinstance(r.evaluation.reconstruction, NotMeasured) for r in releases):
        return "The releases were not attacked in this experiment."
    text = "Every release below was attacked with the reconstruction of the 2010 study"
    if attackers:
        text += (
            f" and linked to attacker files ({', '.join(attackers)}); the dashed line is the "
            "proportional guesser (PRG), which needs no reconstruction. Precision = confirmed / "
            "putative reidentifications"
        )
    return esc(text + ".")
