"""The headline risk (confirmed reidentifications beyond the best baseline, the upper bounds, the
block tables alone) and the noise-aware attack's agreement and ranked precision."""

from __future__ import annotations

from collections.abc import Sequence

from sdclab.attacks.census_linkage import NO_SWAPPED
from sdclab.core.markup import EVALUATION, count, esc, pct, section
from sdclab.core.markup import points as points_text
from sdclab.pipeline.evaluation import RANK_SHARES
from sdclab.pipeline.report import declared
from sdclab.pipeline.results import ExperimentResult, NotMeasured, Reidentification, ReleaseResult

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


def headline_section(results: ExperimentResult) -> str:
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
    content = note + sentence + table + _block_only_table(results) + _targets_table(results)
    return section("Headline risk", [(EVALUATION, content)])


def _targets_table(results: ExperimentResult) -> str:
    """The reidentification of each release's reconstruction aimed at each further attack
    target of the census (the European 1 km grid) beside the main one's ("" where none)."""
    rows = []
    for title, release in results.releases.items():
        for target, links in release.evaluation.target_reidentification.items():
            for attacker, reid in links.items():
                main = release.evaluation.reidentification.get(
                    attacker, NotMeasured("the main attack did not use this attacker")
                )
                cells = (
                    f"<b>{esc(title)}</b>",
                    esc(target),
                    esc(attacker),
                    *(
                        pct(
                            r if isinstance(r, NotMeasured) else r.reconstruction.all.confirmed_rate
                        )
                        for r in (main, reid)
                    ),
                    _beyond(reid, "all"),
                    _upper(reid, "confidential", True),
                )
                rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows or results.census is None:
        return ""
    headers = (
        "mechanism",
        "target",
        "attacker",
        "confirmed: main attack",
        "confirmed: target",
        "target, all: beyond its best baseline",
        "target, upper bound: confidential records",
    )
    return declared.TARGETS_NOTE + _table(headers, rows)


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
    or n/a (with the reason, for a declared census: it has no swapped one, and figures written
    before its baselines have no confidential one)."""
    if isinstance(reid, NotMeasured):
        return pct(reid) if declared else "n/a"
    if name not in reid.fixed:
        if not declared:
            return "n/a"
        reason = NO_SWAPPED if name == "swapped" else "not measured in these figures"
        return pct(NotMeasured(reason))
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


def _no_baseline(results: ExperimentResult) -> str | None:
    """Why some release's reidentification has no baseline of its own tables (the first one's
    reason; None: every release's has them)."""
    for release in results.releases.values():
        for reid in release.evaluation.reidentification.values():
            if isinstance(reid, Reidentification) and isinstance(reid.mdg, NotMeasured):
                return reid.mdg.reason.removeprefix("not measured: ")
    return None


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


RANK_NOTE = (
    "<p>Agreement of the noise-aware attack (which never rules out what the mechanism could have "
    "produced) beside the naive one (every published count exact, every 0 a true 0); then "
    "precision among the top k% of reconstructed records ranked by how many of 10 further "
    "draws hold them, against the confidential records.</p>"
)


def ranking_section(results: ExperimentResult) -> str:
    shares = [f"top_{share:.0%}" for share in RANK_SHARES]
    rows = []
    for title, release in results.releases.items():
        ev = release.evaluation
        aware, naive = ev.reconstruction_agreement, ev.naive_agreement
        curve = ev.rank_curve
        cells = [
            f"<b>{esc(title)}</b>",
            pct(aware if isinstance(aware, NotMeasured) else aware.all.agree_agebin)
            + time_limited(release),
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


def time_limited(release: ReleaseResult) -> str:
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
