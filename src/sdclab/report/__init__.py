"""The experiment report: one self-contained HTML page, inline SVG plots, no script, no network."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from sdclab import diagnostics
from sdclab.evaluation import BLOCK_SIZE_CLASSES, RANK_SHARES, size_class_label
from sdclab.geography import LEVELS
from sdclab.markup import (
    CARD,
    EVALUATION,
    RELEASE,
    SOURCES,
    Source,
    count,
    decimal,
    esc,
    labelled,
    pct,
    section,
    source_label,
)
from sdclab.markup import points as points_text
from sdclab.report import declared
from sdclab.report.charts import PRG_LABEL, bar_chart, line_chart
from sdclab.report.frontier import budget_section, choose_section, frontier_section
from sdclab.report.html import STYLE, column, contents, figure, records_shown
from sdclab.results import (
    COMPARED_TABLES,
    EVALUATION_ONLY,
    POPULATION_TRUTH_FIELDS,
    ExperimentResult,
    FrontierAxes,
    Linkage,
    LinkRates,
    NotMeasured,
    Reidentification,
    ReleaseResult,
    TableAccuracy,
    Value,
    Variability,
)

CLASSES = [size_class_label(lo, hi) for lo, hi in BLOCK_SIZE_CLASSES]


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


def _rates(
    release: ReleaseResult, attacker: str, method: str, group: str
) -> LinkRates | NotMeasured:
    """One group's link rates by one method of one attacker, or why there are none."""
    reid = release.evaluation.reidentification.get(
        attacker, NotMeasured(f"the experiment has no {attacker} attacker")
    )
    if isinstance(reid, NotMeasured):
        return reid
    linkage: Linkage | NotMeasured = getattr(reid, method)
    if isinstance(linkage, NotMeasured):
        return linkage
    return linkage.groups.get(group) or NotMeasured(f"no group {group} in the results")


def _rate(rates: LinkRates | NotMeasured, metric: str) -> Value:
    """``metric`` of ``rates`` (putative_rate, confirmed_rate, precision)."""
    return rates if isinstance(rates, NotMeasured) else getattr(rates, metric)


def _variability(release: ReleaseResult) -> Variability | NotMeasured:
    figures = release.evaluation.reconstruction
    return figures if isinstance(figures, NotMeasured) else figures.variability


def _compared_mae(release: ReleaseResult, level: str, table: str = "P12") -> Value:
    """The MAE over the non-empty cells (withheld ones counted) of a compared table (or, for a
    declared census, of any of its tables) at ``level``, or why none."""
    return _mae_of(_accuracy_of(release, level, table))


def _accuracy_of(release: ReleaseResult, level: str, table: str) -> TableAccuracy | NotMeasured:
    """The accuracy of ``table`` at ``level``: a compared US table's as the evaluation compares
    it, any other table's as measured, or why the release has none."""
    if table in COMPARED_TABLES:
        return release.evaluation.compared(level, table)
    found = release.evaluation.accuracy.get(table, {}).get(level)
    if found is None:
        return NotMeasured(f"the release publishes no {table} at {level} level")
    return found


def _mae_of(compared: TableAccuracy | NotMeasured) -> Value:
    return compared if isinstance(compared, NotMeasured) else compared.mae_nonempty


def _compared_cell(release: ReleaseResult, level: str, table: str) -> str:
    """The MAE of :func:`_compared_mae`, with the share of the table's cells withheld beside it
    (their errors are in the MAE)."""
    compared = _accuracy_of(release, level, table)
    shown = decimal(_mae_of(compared))
    if isinstance(compared, NotMeasured) or compared.suppressed_share <= 0:
        return shown
    return f"{shown} <small>({pct(compared.suppressed_share)} withheld)</small>"


def by_setting(
    results: ExperimentResult, values: Callable[[ReleaseResult], list[Value]]
) -> dict[str, list[Value]]:
    """One series per setting: at each position the mean of its replicates' figures (the
    first one's reason where none measured it), so that a sweep's charts show settings, not
    every draw."""
    out: dict[str, list[Value]] = {}
    for setting, titles in results.settings().items():
        drawn = [values(results[t]) for t in titles]
        means: list[Value] = []
        for figures in zip(*drawn, strict=True):
            measured = [float(v) for v in figures if not isinstance(v, NotMeasured)]
            means.append(sum(measured) / len(measured) if measured else figures[0])
        out[setting] = means
    return out


def _precision_series(results: ExperimentResult, attacker: str, prefix: str) -> dict:
    groups = [f"block_size_{c}" for c in CLASSES]
    series = by_setting(
        results,
        lambda release: [
            _rate(_rates(release, attacker, "reconstruction", f"{prefix}{c}"), "precision")
            for c in groups
        ],
    )
    # the guess from the published tract totals of the first release that has one
    for title, release in results.releases.items():
        guess = [
            _rate(_rates(release, attacker, "prg", f"{prefix}{c}"), "precision") for c in groups
        ]
        if not all(isinstance(g, NotMeasured) for g in guess):
            series[f"{PRG_LABEL} of {title})"] = guess
            break
    return series


SUMMARY_COLUMNS: tuple[tuple[str, Source | None], ...] = (
    ("mechanism", None),
    ("guarantee", CARD),
    ("ε at δ = 10⁻¹⁰, one person's record changed", CARD),
    ("MAE of block totals (P1, populated blocks)", EVALUATION),
    ("MAE block: P12, non-empty cells", EVALUATION),
    ("MAE tract: P12, non-empty cells", EVALUATION),
    ("records reconstructed / persons", EVALUATION),
    ("reconstruction agrees (agebin)", EVALUATION),
    ("blocks with solvar 0", RELEASE),
    ("census: putative / precision", EVALUATION),
    ("commercial: putative / precision", EVALUATION),
    ("nonmodal precision (census)", EVALUATION),
    ("nonmodal uniques in this release's solvar-0 blocks (census)", EVALUATION),
)
"""The summary table's columns and their sources; the table as a whole is evaluation only."""
SUMMARY_NOTE = (
    "<p>Most columns compare the releases and the attacks with the confidential data; each column "
    "is marked with its source: "
    + ", ".join(f"{s.mark}: {esc(s.label.split(' — ')[0].lower())}" for s in SOURCES)
    + ". The ε column puts every guarantee on one axis: ε at δ = 10⁻¹⁰ for one person's record "
    "changed (replace), within the card's invariants, over the whole release — the tight "
    "conversion for zCDP, the standard bound beside it; a release without a valid conversion "
    "says why. The invariants differ between mechanisms (each card below lists its own): the "
    "PSA's, far stronger than TopDown's national and state totals, are named beside its ε.</p>"
)


def _summary_row(release: ReleaseResult, persons: int) -> str:
    census = _rates(release, "census", "reconstruction", "all")
    commercial = _rates(release, "commercial", "reconstruction", "all")
    nonmodal = _rates(release, "census", "reconstruction", "nonmodal")
    solvar0 = _rates(release, "census", "reconstruction", "nonmodal_unique_solvar0")
    variability = _variability(release)
    agreement = release.evaluation.reconstruction_agreement
    cells = (
        f"<b>{esc(release.title)}</b>",
        _guarantee(release),
        _common(release),
        _compared_cell(release, "block", "P1"),
        _compared_cell(release, "block", "P12"),
        _compared_cell(release, "tract", "P12"),
        records_shown(release, persons),
        pct(agreement if isinstance(agreement, NotMeasured) else agreement.all.agree_agebin),
        pct(
            variability
            if isinstance(variability, NotMeasured)
            else variability.share_blocks_solvar_zero
        ),
        f"{pct(_rate(census, 'putative_rate'))} / {pct(_rate(census, 'precision'))}",
        f"{pct(_rate(commercial, 'putative_rate'))} / {pct(_rate(commercial, 'precision'))}",
        pct(_rate(nonmodal, "precision")),
        pct(_rate(solvar0, "precision")),
    )
    assert len(cells) == len(SUMMARY_COLUMNS)
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _guarantee(release: ReleaseResult) -> str:
    """The budget as the card states it (its unit and relation on hover)."""
    g = release.evaluation.card.guarantee
    if not g.is_formal:
        return "no formal guarantee"
    where = f"per {g.unit} record, {'replace' if g.relation == 'replace' else 'add/remove'}"
    asked = "" if g.asked is None else f" <small>(asked: {esc(g.asked.text())})</small>"
    return f'<span title="{esc(where)}">{esc(g.text())}</span>{asked}'


def _common(release: ReleaseResult) -> str:
    """The common-axis figure of a release's card, or "not comparable" with the reason."""
    common = release.evaluation.card.common
    if isinstance(common, NotMeasured):
        return f"not comparable: <small>{esc(common.reason)}</small>"
    standard = (
        ""
        if common.epsilon_standard is None
        else f" <small>(standard {common.epsilon_standard:.2f})</small>"
    )
    qualifier = f" <small>{esc(common.qualifier)}</small>" if common.qualifier else ""
    return f"{common.epsilon:.2f}{standard}{qualifier}"


def _solvar_curve(release: ReleaseResult, points: list[str]) -> list[Value]:
    variability = _variability(release)
    if isinstance(variability, NotMeasured):
        return [variability] * len(points)
    shares = variability.cumulative_share_of_blocks
    return [shares.get(p, NotMeasured(f"solvar ≤ {p} is not in the results")) for p in points]


def _class_persons(results: ExperimentResult) -> list[str] | None:
    """Persons in each block-size class, as the charts' second line of x labels."""
    sizes = results.population.block_sizes
    if not sizes:
        return None
    return [f"n={sizes[c]['persons']:,}" if c in sizes else "" for c in CLASSES]


def _population_replicates(results: ExperimentResult) -> str:
    """A sentence on the further populations every release was made on, if any."""
    further = results.population_replicates
    if not further:
        return ""
    how = "bootstrap replicates of it" if "path" in results.population.source else "seeds"
    sizes = ", ".join(f"{p.persons:,}" for p in further)
    return (
        f"<p>Every release was also made on {len(further)} further population"
        f"{'s' if len(further) > 1 else ''} ({how}; {sizes} persons; titles ending /p2, …): "
        "a setting's means and intervals cover the population as well as the noise.</p>"
    )


def _block_sizes(results: ExperimentResult) -> str:
    """A sentence of the blocks and persons in each block-size class."""
    sizes = results.population.block_sizes
    if not sizes:
        return ""
    parts = [
        f"{c}: {v['persons']:,} persons in {count(v['blocks'], 'block', 'blocks')}"
        for c, v in sizes.items()
    ]
    return "<p>By block size (persons in the block): " + "; ".join(parts) + ".</p>"


def _charts(results: ExperimentResult) -> list[str]:
    """The figures, each labelled with its source."""
    if results.census is not None:
        return declared.charts(
            results, results.census, partial(by_setting, results), _rates, _compared_mae
        )
    return [
        *_precision_charts(results),
        _rates_chart(results),
        _mae_chart(results, "P12", "MAE of P12 (non-empty cells, withheld ones counted)"),
        _mae_chart(results, "P1", "MAE of totals (P1, populated geounits, withheld ones counted)"),
        _solvar_chart(results),
    ]


def _precision_charts(results: ExperimentResult) -> list[str]:
    """Precision by block size, of all and of nonmodal persons, for each attacker some release
    was reidentified against."""
    charts = []
    for attacker in ("census", "commercial"):
        if any(
            isinstance(r.evaluation.reidentification.get(attacker), Reidentification)
            for r in results.releases.values()
        ):
            for prefix, who in (("", "all persons"), ("nonmodal_", "nonmodal persons")):
                charts.append(
                    figure(
                        EVALUATION,
                        line_chart(
                            f"Precision by block size, {who} ({attacker})",
                            CLASSES,
                            _precision_series(results, attacker, prefix),
                            source=EVALUATION,
                            notes=_class_persons(results),
                        ),
                    )
                )
    return charts


def _rates_chart(results: ExperimentResult) -> str:
    """The putative and confirmed rates of the reconstruction against both attackers."""
    return figure(
        EVALUATION,
        bar_chart(
            "Putative and confirmed rates (census / commercial attacker)",
            ["census putative", "confirmed", "commercial putative", "confirmed"],
            by_setting(
                results,
                lambda r: [
                    _rate(_rates(r, a, "reconstruction", "all"), k)
                    for a in ("census", "commercial")
                    for k in ("putative_rate", "confirmed_rate")
                ],
            ),
            source=EVALUATION,
        ),
    )


def _mae_chart(results: ExperimentResult, table: str, what: str) -> str:
    """The MAE of a compared ``table`` (``what``: its title) by geography level."""
    return figure(
        EVALUATION,
        line_chart(
            f"{what} by geography level",
            list(LEVELS),
            by_setting(results, lambda r: [_compared_mae(r, lv, table) for lv in LEVELS]),
            percent=False,
            source=EVALUATION,
        ),
    )


def _solvar_chart(results: ExperimentResult) -> str:
    """The cumulative share of blocks by solution variability."""
    cdf_points = ["0", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"]
    return figure(
        RELEASE,
        line_chart(
            "Solution variability: share of blocks with solvar ≤ x",
            cdf_points,
            by_setting(results, lambda r: _solvar_curve(r, cdf_points)),
            source=RELEASE,
        ),
    )


HEADLINE_NOTE = (
    "<p>The headline risk: confirmed reidentifications of the noise-aware reconstruction beyond "
    "the best baseline, as the difference of confirmed rates over the attacker's records "
    "(percentage points) and in persons. The baselines are the modal (MDG) and proportional "
    "(PRG) guessers on the release's tables and on the exact tables, and random age–sex records "
    "matched to the blocks; the two upper bounds (publishing the confidential records, or the "
    "swapped microdata) are shown apart and are not baselines. Negative: the statistics alone do "
    "better than the reconstruction. Beside them, the precision on nonmodal persons of the "
    "reconstruction and of the proportional guessers (the attack paper's PRG: 16.0–16.7%), and "
    "the shares of the reconstruction's putative links confirmed on the exact age and, of the "
    "rest, on agebin (the paper prints only their sum).</p>"
)
RANK_NOTE = (
    "<p>Agreement of the noise-aware attack (which never rules out what the mechanism could have "
    "produced) beside the naive one (every published count exact, every 0 a true 0); then "
    "precision among the top k% of reconstructed records ranked by how many of 10 further "
    "draws hold them, against the confidential records.</p>"
)


def _beyond(reid: Reidentification | NotMeasured, group: str) -> str:
    if isinstance(reid, NotMeasured):
        return f"n/a ({esc(reid.reason)})"
    if not reid.baselines():
        return pct(reid.no_headline())
    if group not in reid.headline_groups():
        return "n/a (the group was not given to the reidentification)"
    head = reid.headline(group)
    shown = points_text(head.points)
    return f"{shown} / {head.persons:+,} persons (best: {esc(head.best_baseline)})"


def _nonmodal_precision(reid: Reidentification | NotMeasured) -> str:
    """The reconstruction's precision on nonmodal persons beside the proportional guessers'."""
    if isinstance(reid, NotMeasured):
        return f"n/a ({esc(reid.reason)})"
    shares = reid.nonmodal_precision()
    return " / ".join(pct(shares[name]) for name in ("reconstruction", "prg", "prg_exact"))


def _passes(reid: Reidentification | NotMeasured) -> str:
    """Shares of the reconstruction's putative links confirmed in each confirmation pass."""
    if isinstance(reid, NotMeasured):
        return f"n/a ({esc(reid.reason)})"
    passes = reid.passes.get("reconstruction")
    if passes is None:
        return "n/a (not recorded)"
    return f"{pct(passes.first_pass_share)} / {pct(passes.second_pass_share)}"


def _upper(reid: Reidentification | NotMeasured, name: str, declared: bool) -> str:
    """An upper bound's confirmed rate (the attack on the confidential or the swapped records),
    or n/a (with the reason, for a declared census, which has none)."""
    if declared:
        reason = f"the {name} upper bound is measured on the US 2010 census only"
        return pct(reid if isinstance(reid, NotMeasured) else NotMeasured(reason))
    if isinstance(reid, NotMeasured) or name not in reid.fixed:
        return "n/a"
    return pct(reid.fixed[name].all.confirmed_rate)


def _table(headers: Sequence[str], rows: list[str]) -> str:
    """A table of header cells and rendered rows."""
    return (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in headers)
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )


def _headline_section(results: ExperimentResult) -> str:
    rows = []
    for title, release in results.releases.items():
        for attacker, reid in release.evaluation.reidentification.items():
            confirmed = (
                reid if isinstance(reid, NotMeasured) else reid.reconstruction.all.confirmed_rate
            )
            cells = (
                f"<b>{esc(title)}</b>",
                esc(attacker),
                pct(confirmed),
                _beyond(reid, "vulnerable"),
                _beyond(reid, "all"),
                _beyond(reid, "nonmodal"),
                _upper(reid, "confidential", results.census is not None),
                _upper(reid, "swapped", results.census is not None),
                _nonmodal_precision(reid),
                _passes(reid),
            )
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = (
        "mechanism",
        "attacker",
        "confirmed",
        "vulnerable group: beyond the best baseline",
        "all: beyond the best baseline",
        "nonmodal: beyond the best baseline",
        "upper bound: confidential records",
        "upper bound: swapped microdata",
        "nonmodal precision: reconstruction / PRG / PRG on the exact tables",
        "putative links confirmed on the exact age / on agebin",
    )
    table = _table(headers, rows)
    uniques = results.population.uniques
    unrecorded = NotMeasured("not recorded")
    by_age = uniques.get("unique_on_block_sex_age", unrecorded)
    by_bin = uniques.get("unique_on_block_sex_agebin", unrecorded)
    sentence = (
        f"<p>Persons unique in their block on sex and age: {pct(by_age)}; on sex and agebin: "
        f"{pct(by_bin)}. {_vulnerable_sentence(results)}</p>"
    )
    note = HEADLINE_NOTE
    if results.census is not None:
        note = declared.headline_note(results.census, _no_baseline(results))
        sentence = (
            f"<p>{declared.uniques_sentence(results, results.census)} "
            f"{_vulnerable_sentence(results)}</p>"
        )
    content = note + sentence + table + _block_only_table(results)
    return section("Headline risk", [(EVALUATION, content)])


BLOCK_ONLY_NOTE = (
    "<p>From the block tables alone (the attack paper's rHDF<sub>b</sub>, beside its "
    "rHDF<sub>b,t</sub>): each release reconstructed without its tract tables, so that ages "
    "above 21 are known to their agebin only and are linked on agebin, then reidentified like "
    "the main reconstruction (the same attacker files and baselines).</p>"
)


def _block_only_table(results: ExperimentResult) -> str:
    """The reidentification of each release's reconstruction from its block tables alone beside
    the main one's, where the experiment made it ("" where it did not)."""
    rows = []
    for title, release in results.releases.items():
        block = release.evaluation.block_only_reidentification
        if isinstance(block, NotMeasured):
            continue
        for attacker, reid in block.items():
            main = release.evaluation.reidentification.get(attacker, reid)
            cells = (
                f"<b>{esc(title)}</b>",
                esc(attacker),
                *(
                    pct(r if isinstance(r, NotMeasured) else r.reconstruction.all.confirmed_rate)
                    for r in (main, reid)
                ),
                *(
                    pct(r if isinstance(r, NotMeasured) else r.reconstruction.nonmodal.precision)
                    for r in (main, reid)
                ),
                _beyond(reid, "vulnerable"),
            )
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    headers = (
        "mechanism",
        "attacker",
        "confirmed: block and tract tables",
        "confirmed: block tables alone",
        "nonmodal precision: block and tract tables",
        "nonmodal precision: block tables alone",
        "vulnerable group, block tables alone: beyond the best baseline",
    )
    return BLOCK_ONLY_NOTE + _table(headers, rows)


def _vulnerable_sentence(results: ExperimentResult) -> str:
    """The fixed vulnerable group: who is in it and how many, the same for every release."""
    group = results.population.vulnerable
    if isinstance(group, NotMeasured):
        return f"The vulnerable group: n/a ({esc(group.reason)})."
    return (
        f"The vulnerable group, the same persons for every release: {esc(group['definition'])}"
        f" — {group['persons']:,} persons ({group['solvar0_blocks']:,} of "
        f"{group['populated_blocks']:,} populated blocks have solution variability 0)."
    )


def _ranking_section(results: ExperimentResult) -> str:
    shares = [f"top_{share:.0%}" for share in RANK_SHARES]
    rows = []
    for title, release in results.releases.items():
        ev = release.evaluation
        aware, naive = ev.reconstruction_agreement, ev.naive_agreement
        curve = ev.rank_curve
        cells = [
            f"<b>{esc(title)}</b>",
            pct(aware if isinstance(aware, NotMeasured) else aware.all.agree_agebin)
            + _time_limited(release),
            pct(naive if isinstance(naive, NotMeasured) else naive.all.agree_agebin),
            *(
                pct(curve if isinstance(curve, NotMeasured) else curve.get(s, NotMeasured("")))
                for s in shares
            ),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = [
        "mechanism",
        "agreement, noise-aware",
        "agreement, naive",
        *(f"precision, {s.replace('_', ' ')}" for s in shares),
    ]
    table = _table(headers, rows)
    return section("Noise-aware attack and ranked records", [(EVALUATION, RANK_NOTE + table)])


def _time_limited(release: ReleaseResult) -> str:
    """A flag where wall time stopped some tract's solves (its reconstruction is the best found,
    not an optimum, and a rerun with the same seed may differ), else ""."""
    figures = release.evaluation.reconstruction
    if isinstance(figures, NotMeasured) or not figures.time_limited_tracts:
        return ""
    tracts = count(figures.time_limited_tracts, "tract", "tracts")
    return (
        f" <small>⚑ {tracts} stopped at the time limit (best found, not optimal; a rerun may "
        "differ)</small>"
    )


def _coarser_tables(results: ExperimentResult) -> str:
    """A footnote for releases whose block tables are on a coarser attribute set than the
    person tables (PL94: no sex or single year of age), where there are any."""
    coarse = [
        title
        for title, r in results.releases.items()
        if "P1" in r.evaluation.accuracy and "P12" not in r.evaluation.accuracy
    ]
    if not coarse:
        return ""
    return (
        f"<p><small>{esc(', '.join(coarse))}: the release publishes P1 but not P12 — its block "
        "histogram is on a coarser attribute set (voting age, race, Hispanic origin; no sex or "
        "single year of age), so its accuracy on P1 and P12 and its reidentification by sex and "
        "age are n/a.</small></p>"
    )


def _no_baseline(results: ExperimentResult) -> str:
    """Why the releases' reidentifications have no baseline (the first one's reason)."""
    for release in results.releases.values():
        for reid in release.evaluation.reidentification.values():
            if isinstance(reid, Reidentification) and isinstance(reid.mdg, NotMeasured):
                return reid.mdg.reason.removeprefix("not measured: ")
    return "no baseline measured"


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
    summary, population = _summary(results), _population(results)
    sections = "".join(
        _ckm_section(t, r.evaluation.risk)
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
    points = results.frontier(axes)  # once: the three sections share it
    body = f"""{frontier_section(results, axes, points)}
{choose_section(results, axes, points)}
{budget_section(results, axes, points)}
{section("Summary", [(EVALUATION, SUMMARY_NOTE + summary + _coarser_tables(results))])}
{_headline_section(results)}
{_ranking_section(results)}
{"".join(_charts(results))}
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


def _summary(results: ExperimentResult) -> str:
    """The summary table: the US census's columns, or a declared census's own."""
    if results.census is not None:
        return declared.summary_table(
            results, results.census, _rates, _compared_cell, _guarantee, _common
        )
    return (
        "<table><tr>"
        + "".join(column(header, source) for header, source in SUMMARY_COLUMNS)
        + "</tr>"
        + "".join(
            _summary_row(r, results.population_of(r).persons) for r in results.releases.values()
        )
        + "</table>"
    )


def _population(results: ExperimentResult) -> str:
    """The population's paragraph: its persons, units and geounits."""
    pop = results.population
    if results.census is not None:
        return declared.population_line(results, results.census) + _population_replicates(results)
    return (
        f"<p>Population: {pop.persons:,} persons in {pop.units:,} units; "
        f"{pop.geography['block']:,} blocks, {pop.geography['tract']:,} tracts, "
        f"{count(pop.geography['county'], 'county', 'counties')}.</p>"
        + _block_sizes(results)
        + _population_replicates(results)
    )


def _ckm_section(title: str, risk: Mapping[str, Any]) -> str:
    """The cell key method's own risks and the (D, V) design grid for a release like this one.

    The bound estimate, the pinned tuples and the design grid need only the release (and the
    public p-table); the checks of the attacks against the true counts are evaluation only."""
    a, b, c = risk["bound_disclosure"], risk["pinned"], risk["averaging"]
    design = risk["design"]
    from_release = [
        f"Noise bound of large counts {a['large_count_bound']} (D = {a['noise_bound']}): "
        f"estimated as {a['bound_estimated']} from the "
        f"{a['tuples_present']:,} additive 3-tuples of the release (children of two-child "
        f"parents and their parent); p1 = {a['p1_independent']:.3g} per tuple in the paper's "
        f"independence model, {a['p1_exact_keys']:.3g} with the exact integer keys; disclosure "
        f"risk over the tuples present {decimal(a['risk_independent'])} (independence model).",
        f"Tuples whose published values pin the true counts once D is known: {b['pinned']} of "
        f"{b['tuples']}.",
    ]
    with_truth = []
    if "pinned_correct" in b:
        with_truth.append(
            f"Pinned tuples checked against the true counts: {b['pinned_correct']} of "
            f"{b['pinned']} correct."
        )
    if "attack" in c:
        attack = c["attack"]
        with_truth.append(
            f"Averaging the release's redundant representations (inverse-variance weights, "
            f"SPSN {'on' if c['spsn'] else 'off'}): {pct(attack['averaged_exact_share'])} of "
            f"non-empty cells exact, against {pct(attack['published_exact_share'])} for the "
            "published values."
        )
    for rq in risk.get("repeated_queries", []):
        with_truth.append(
            f"Repeated queries ({rq['runs']} answers per cell, simulated on the confidential "
            f"data, SPSN {'on' if rq['spsn'] else 'off'}): {pct(rq['averaged_exact_share'])} "
            f"exact after averaging, {pct(rq['one_answer_exact_share'])} from one answer."
        )
    variances = sorted({row["variance"] for row in design["grid"]})
    cells = {(row["bound"], row["variance"]): row for row in design["grid"]}
    header = "".join(f"<th>V={v:g}</th>" for v in variances)
    body = []
    for bound in sorted({row["bound"] for row in design["grid"]}):
        tds = []
        for v in variances:
            row = cells.get((bound, v))
            if row is None:
                tds.append("<td></td>")
                continue
            colour = "#d9f2d9" if row["below_constraint"] else "#f7d4d4"
            tds.append(f'<td style="background:{colour}">{row["risk"]:.2f}</td>')
        body.append(f"<tr><th>D={bound}</th>{''.join(tds)}</tr>")
    v_star = design.get("averaging_min_variance")
    averaging_note = (
        ""
        if v_star is None
        else f" Averaging constraint: the most exposed statistic (k/t² = "
        f"{design['k_over_t2_most_exposed']:.3g}) stays below a 68% chance of exact recovery "
        f"when V ≥ {v_star:.2f}."
    )
    parts = [
        (
            RELEASE,
            "<ul>"
            + "".join(f"<li>{esc(line)}</li>" for line in from_release)
            + f"</ul><p>Choosing (D, V): risk of disclosing D over {design['tuples']:,} tuples "
            "(green: below the paper's 0.68 heuristic; empty: V above the uniform limit "
            f"D(D+1)/3).{esc(averaging_note)}</p>"
            f"<table><tr><th></th>{header}</tr>{''.join(body)}</table>",
        )
    ]
    if with_truth:
        parts.append(
            (
                EVALUATION,
                "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in with_truth) + "</ul>",
            )
        )
    return section(f"Cell key method: {title}", parts)


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
