"""The parts of the report that read the census when it is not the US 2010 one: which census,
its population, the summary over its own tables and levels, and what its attack measures (no
block-size classes, no solution variability; its own baselines)."""

from __future__ import annotations

from sdclab.core.markup import CARD, EVALUATION, Source, esc, pct
from sdclab.pipeline.report.charts import bar_chart, line_chart
from sdclab.pipeline.report.html import column, figure, records_shown
from sdclab.pipeline.report.reading import (
    by_setting,
    common_cell,
    compared_cell,
    compared_mae,
    guarantee_cell,
    rate,
    rates,
)
from sdclab.pipeline.results import (
    Agreement,
    CensusView,
    ExperimentResult,
    NotMeasured,
    ReleaseResult,
    Value,
)

NO_TOTAL = "the census has no table of the total of persons"
NO_COMPARED = "the census has no person table crossing an attribute"


def census_line(view: CensusView) -> str:
    """Which census the report is about, under its title."""
    return (
        f'<p class="census">Census <b>{esc(view.name)}</b>: {esc(view.title)} · '
        f"<small>digest <code>{esc(view.digest)}</code></small></p>"
    )


def population_line(results: ExperimentResult, view: CensusView) -> str:
    """The persons, their households and the geounits of each level."""
    pop = results.population
    households = f" in {pop.units:,} households" if pop.units else ""
    levels = ", ".join(f"{esc(level)} {pop.geography.get(level, 0):,}" for level in view.levels)
    return f"<p>Population: {pop.persons:,} persons{households}; geounits by level: {levels}.</p>"


def summary_table(
    results: ExperimentResult,
    view: CensusView,
) -> str:
    """One row per release: its guarantee, the errors of the census's total and compared tables
    at the reconstruction's level and its programs', and the attack's figures."""
    total, compared = view.total or "", view.compared or ""
    headers: tuple[tuple[str, Source | None], ...] = (
        ("mechanism", None),
        ("guarantee", CARD),
        ("ε at δ = 10⁻¹⁰, one person's record changed", CARD),
        (f"MAE of {view.unit} totals ({total or 'n/a'}, populated {view.unit}s)", EVALUATION),
        (f"MAE {view.unit}: {compared or 'n/a'}, non-empty cells", EVALUATION),
        (f"MAE {view.program}: {compared or 'n/a'}, non-empty cells", EVALUATION),
        ("records reconstructed / persons", EVALUATION),
        ("reconstruction agrees (every attribute, or its resolved category)", EVALUATION),
        ("census: putative / precision", EVALUATION),
        ("commercial: putative / precision", EVALUATION),
        ("nonmodal precision (census)", EVALUATION),
    )
    rows = []
    for release in results.releases.values():
        persons = results.population_of(release).persons
        census = rates(release, "census", "reconstruction", "all")
        commercial = rates(release, "commercial", "reconstruction", "all")
        nonmodal = rates(release, "census", "reconstruction", "nonmodal")
        agreement = release.evaluation.reconstruction_agreement
        cells = (
            f"<b>{esc(release.title)}</b>",
            guarantee_cell(release),
            common_cell(release),
            compared_cell(release, view.unit, total) if total else _na(NO_TOTAL),
            compared_cell(release, view.unit, compared) if compared else _na(NO_COMPARED),
            compared_cell(release, view.program, compared) if compared else _na(NO_COMPARED),
            records_shown(release, persons),
            pct(agreement.all.agree_agebin if isinstance(agreement, Agreement) else agreement),
            f"{pct(rate(census, 'putative_rate'))} / {pct(rate(census, 'precision'))}",
            f"{pct(rate(commercial, 'putative_rate'))} / {pct(rate(commercial, 'precision'))}",
            pct(rate(nonmodal, "precision")),
        )
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(column(header, source) for header, source in headers)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _na(reason: str) -> str:
    return pct(NotMeasured(reason))


def headline_note(view: CensusView, missing: str | None) -> str:
    """What the headline risk is and how census ``view``'s baselines are made; ``missing``: why
    some release has no baseline of its own tables (None: every release has them)."""
    lacking = (
        ""
        if missing is None
        else f" A release without a usable table at its {esc(view.unit)} has no MDG or PRG of "
        f"its own ({esc(missing)}); its headline is beyond the fixed baselines."
    )
    return (
        "<p>The headline risk is the confirmed reidentifications of the noise-aware "
        "reconstruction beyond the best baseline (what the statistics alone give), in "
        "percentage points of the attacker's records and in persons. The baselines of census "
        f"{esc(view.name)} are made from its own tables: records drawn, in each "
        f"{esc(view.unit)}, from the release's table at that level crossing the most of "
        f"{esc(', '.join(view.quasi_identifiers))} (as published: rounded, negative and "
        "withheld counts as 0), every other attribute guessed as the modal category of that "
        f"{esc(view.unit)} in a table crossing it, given the attributes both tables cross "
        "(MDG), or drawn in proportion to it (PRG); the same guessers on the exact tables and "
        "random quasi-identifiers drawn from the national distribution are the fixed baselines. "
        "They are linked to the same attacker files exactly as the reconstruction's records. "
        "The confidential records themselves are the upper bound (not a baseline); the swapped "
        f"microdata bound is the US census's only.{lacking} Beside them, the precision on "
        "nonmodal persons and the shares of the putative links confirmed in each pass (on every "
        "attribute, then on the categories of the resolved ones).</p>"
    )


TARGETS_NOTE = (
    "<p>Further attack targets: each release reconstructed again from the tables of another "
    "of the census's geographies alone (the European census's <code>grid</code>: each 1 km "
    "cell from the grid's 13 variables), linked on that target's geounit and "
    "quasi-identifiers, and scored against baselines made from those tables, exactly as the "
    "main attack. The two attacks link on different keys: their rates are each beside their "
    "own baselines, not against each other.</p>"
)


def uniques_sentence(results: ExperimentResult, view: CensusView) -> str:
    """The share of persons unique on the attacker's keys in their geounit."""
    shares = results.population.uniques
    keys = " and ".join(view.quasi_identifiers)
    name = f"unique_on_{'_'.join((view.unit, *view.quasi_identifiers))}"
    share = shares.get(name, NotMeasured("not recorded"))
    return f"Persons unique in their {esc(view.unit)} on {esc(keys)}: {pct(share)}."


def attack_sentence(results: ExperimentResult, view: CensusView) -> str:
    """How the releases were attacked."""
    releases = results.releases.values()
    if all(isinstance(r.evaluation.reconstruction, NotMeasured) for r in releases):
        return "The releases were not attacked in this experiment."
    targets = sorted({t for r in releases for t in r.evaluation.target_reidentification})
    further = (
        f" Each was attacked again on the census's further target {', '.join(targets)}, "
        "from that geography's tables alone (Headline risk, below the main table)."
        if targets
        else ""
    )
    return esc(
        f"Every release below was attacked with the reconstruction of census {view.name}'s "
        f"tables (records in each {view.unit}, one program per {view.program}) and linked to "
        f"attacker files on the {view.unit} and {', '.join(view.quasi_identifiers)}. Precision "
        "= confirmed / putative reidentifications, compared with the census's own baselines "
        f"(Headline risk).{further} Census-specific figures of the US attack (block-size "
        "classes, solution variability) are n/a."
    )


def charts(
    results: ExperimentResult,
    view: CensusView,
) -> list[str]:
    """The rates of the attack, and the errors of the compared and total tables by level."""
    out = [rates_chart(results)]
    for table, what in ((view.compared, "non-empty cells"), (view.total, "populated geounits")):
        if table is None:
            continue

        def by_level(release: ReleaseResult, table: str = table) -> list[Value]:
            return [compared_mae(release, level, table) for level in view.levels]

        out.append(
            figure(
                EVALUATION,
                line_chart(
                    f"MAE of {table} by level ({what}, withheld counted)",
                    list(view.levels),
                    by_setting(results, by_level),
                    percent=False,
                    source=EVALUATION,
                ),
            )
        )
    return out


def rates_chart(results: ExperimentResult) -> str:
    """The putative and confirmed rates of the reconstruction against both attackers (the same
    chart for any census)."""
    return figure(
        EVALUATION,
        bar_chart(
            "Putative and confirmed rates (census / commercial attacker)",
            ["census putative", "confirmed", "commercial putative", "confirmed"],
            by_setting(
                results,
                lambda r: [
                    rate(rates(r, a, "reconstruction", "all"), k)
                    for a in ("census", "commercial")
                    for k in ("putative_rate", "confirmed_rate")
                ],
            ),
            source=EVALUATION,
        ),
    )
