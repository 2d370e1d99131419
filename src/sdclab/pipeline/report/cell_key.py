"""The cell key method's own risk analysis of a release: what the release alone tells (the
bound estimate, pinned tuples, the (D, V) design grid) and the attacks checked against the truth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdclab.core.markup import EVALUATION, RELEASE, decimal, esc, pct, section


def ckm_section(title: str, risk: Mapping[str, Any]) -> str:
    """The cell key method's own risks and the (D, V) design grid for a release like this one.

    The bound estimate, the pinned tuples and the design grid need only the release (and the
    public p-table); the checks of the attacks against the true counts are evaluation only."""
    a, b, c = risk["bound_disclosure"], risk["pinned"], risk["averaging"]
    design = risk["design"]
    scope = risk.get("scope")
    tuples = (
        "additive 3-tuples of the release (children of two-child parents and their parent)"
        if scope is None
        else f"additive tuples of the release (the children of parents with "
        f"{', '.join(map(str, scope['tuple_children'])) or 'no'} children and their parent)"
    )
    from_release = [
        f"Noise bound of large counts {a['large_count_bound']} (D = {a['noise_bound']}): "
        f"estimated as {a['bound_estimated']} from the "
        f"{a['tuples_present']:,} {tuples}; p1 = {_g(a['p1_independent'])} per tuple in the "
        f"paper's independence model, {_g(a['p1_exact_keys'])} with the exact integer keys; "
        f"disclosure risk over the tuples present {_decimal(a['risk_independent'])} "
        "(independence model).",
        f"Tuples whose published values pin the true counts once D is known: {b['pinned']} of "
        f"{b['tuples']}.",
    ]
    if scope is not None:
        from_release.append(_representations(c, scope))
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
    repeated = risk.get("repeated_queries", [])
    if isinstance(repeated, str):  # n/a, with the reason
        with_truth.append(f"Repeated queries: {repeated}.")
    for rq in [] if isinstance(repeated, str) else repeated:
        with_truth.append(
            f"Repeated queries ({rq['runs']} answers per cell, simulated on the confidential "
            f"data, SPSN {'on' if rq['spsn'] else 'off'}): {pct(rq['averaged_exact_share'])} "
            f"exact after averaging, {pct(rq['one_answer_exact_share'])} from one answer."
        )
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
            f"D(D+1)/3).{esc(averaging_note)}</p>" + _design_grid(design["grid"]),
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


def _g(value: Any) -> str:
    """A figure to three significant digits, or its n/a reason."""
    return value if isinstance(value, str) else f"{value:.3g}"


def _decimal(value: Any) -> str:
    return value if isinstance(value, str) else decimal(value)


def _representations(averaging: Mapping[str, Any], scope: Mapping[str, Any]) -> str:
    """What the averaging analysis read of a declared census: its tables, the most exposed
    statistic's representations, and the tables left out."""
    exposed = averaging["most_exposed"]
    best = (
        f"the most exposed statistic ({exposed[0]['table']} at {exposed[0]['level']}, "
        f"{exposed[0]['cell']}) has t = {exposed[0]['t']} representations"
        if exposed
        else "no statistic is published"
    )
    left = "; ".join(f"{n}: {why}" for n, why in scope["left_out"].items())
    return (
        f"Redundant representations across the tables {', '.join(scope['representation_tables'])} "
        f"(cells found from the query matrices) and the levels below: {best}."
        + (f" Not analysed: {left}." if left else "")
    )


def _design_grid(grid: list[Mapping[str, Any]]) -> str:
    """The risk of disclosing D for each (D, V) of the design grid, coloured by whether it is
    below the paper's heuristic; an empty cell where V is above the uniform limit."""
    variances = sorted({row["variance"] for row in grid})
    cells = {(row["bound"], row["variance"]): row for row in grid}
    header = "".join(f"<th>V={v:g}</th>" for v in variances)
    body = []
    for bound in sorted({row["bound"] for row in grid}):
        tds = []
        for v in variances:
            row = cells.get((bound, v))
            if row is None:
                tds.append("<td></td>")
                continue
            colour = "#d9f2d9" if row["below_constraint"] else "#f7d4d4"
            tds.append(f'<td style="background:{colour}">{row["risk"]:.2f}</td>')
        body.append(f"<tr><th>D={bound}</th>{''.join(tds)}</tr>")
    return f"<table><tr><th></th>{header}</tr>{''.join(body)}</table>"
