"""The summary table of the releases (the US census's columns; a declared census's are
:mod:`sdclab.pipeline.report.declared`'s) and the population's paragraph."""

from __future__ import annotations

from sdclab.core.markup import CARD, EVALUATION, RELEASE, SOURCES, Source, count, esc, pct
from sdclab.pipeline.report import declared
from sdclab.pipeline.report.html import column, records_shown
from sdclab.pipeline.report.reading import (
    common_cell,
    compared_cell,
    guarantee_cell,
    rate,
    rates,
    variability_of,
)
from sdclab.pipeline.results import ExperimentResult, NotMeasured, ReleaseResult

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


def summary_table(results: ExperimentResult) -> str:
    """The summary table: the US census's columns, or a declared census's own."""
    if results.census is not None:
        return declared.summary_table(results, results.census)
    return (
        "<table><tr>"
        + "".join(column(header, source) for header, source in SUMMARY_COLUMNS)
        + "</tr>"
        + "".join(
            _summary_row(r, results.population_of(r).persons) for r in results.releases.values()
        )
        + "</table>"
    )


def _summary_row(release: ReleaseResult, persons: int) -> str:
    census = rates(release, "census", "reconstruction", "all")
    commercial = rates(release, "commercial", "reconstruction", "all")
    nonmodal = rates(release, "census", "reconstruction", "nonmodal")
    solvar0 = rates(release, "census", "reconstruction", "nonmodal_unique_solvar0")
    variability = variability_of(release)
    agreement = release.evaluation.reconstruction_agreement
    cells = (
        f"<b>{esc(release.title)}</b>",
        guarantee_cell(release),
        common_cell(release),
        compared_cell(release, "block", "P1"),
        compared_cell(release, "block", "P12"),
        compared_cell(release, "tract", "P12"),
        records_shown(release, persons),
        pct(agreement if isinstance(agreement, NotMeasured) else agreement.all.agree_agebin),
        pct(
            variability
            if isinstance(variability, NotMeasured)
            else variability.share_blocks_solvar_zero
        ),
        f"{pct(rate(census, 'putative_rate'))} / {pct(rate(census, 'precision'))}",
        f"{pct(rate(commercial, 'putative_rate'))} / {pct(rate(commercial, 'precision'))}",
        pct(rate(nonmodal, "precision")),
        pct(rate(solvar0, "precision")),
    )
    assert len(cells) == len(SUMMARY_COLUMNS)
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def coarser_tables(results: ExperimentResult) -> str:
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


def population_paragraph(results: ExperimentResult) -> str:
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
