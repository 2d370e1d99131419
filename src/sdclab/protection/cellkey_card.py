"""The cell key method's card: (ε, δ) per released cell from the p-table's neighbouring count
pairs, and why it does (or does not) compose over the cells a person is in (docs/cellkey.md,
*The card*)."""

from __future__ import annotations

import numpy as np

from sdclab.core.accounting import SpecCard
from sdclab.core.census.model import cells_per_person
from sdclab.core.figures import NotMeasured
from sdclab.core.privacy import Guarantee, Loss, composed_over_cells, no_guarantee
from sdclab.protection.cellkey_params import MECHANISM, AnyPTable, CellKeyParameters
from sdclab.protection.ptable_analysis import (
    delta_pairs,
    is_deterministic,
)

REPORTED_EPSILONS = (0.5, 1.0, 2.0, 4.0)
"""ε values at which the card lists δ_n(ε) per neighbouring count pair."""


@MECHANISM.define("guarantee")
def card(p: CellKeyParameters, table: AnyPTable | None = None) -> SpecCard:
    """(ε, δ) per released cell from the p-table's neighbouring count pairs (docs/cellkey.md)."""
    table = table or p.table()
    rows: list[dict[str, object]] = []
    for eps in dict.fromkeys((*REPORTED_EPSILONS, p.epsilon)):
        deltas = delta_pairs(table, eps)
        worst = int(np.argmax(deltas))
        rows.append(
            {
                "epsilon": eps,
                "delta (max over pairs)": float(deltas.max()),
                "worst pair": f"({worst}, {worst + 1})",
                "delta, symmetry pair": float(deltas[-1]),
            }
        )
    delta = float(delta_pairs(table, p.epsilon).max())
    floor = float(delta_pairs(table, 50.0).max())
    guarantee, release_level = cell_guarantee(p, table, delta)
    return SpecCard(
        mechanism="cellkey",
        domain="person and unit records of the tabulated population",
        multiverse="a single universe: no published cell is exact by design "
        "(but zeros are published as zeros)",
        guarantee=guarantee,
        covers=(
            ("every table" if p.tables is None else f"the tables {', '.join(p.workload_names())}")
            + " of the swapped population, each cell perturbed by the p-table"
            if p.swap != "none"
            else "one released cell: its count's neighbouring pairs (n, n+1) under the p-table, "
            "with a uniformly distributed cell key"
        ),
        caveats=(
            release_level,
            f"Strict epsilon-DP is impossible with bounded noise: delta is at least {floor:.4g} "
            "whatever epsilon (the mass the neighbour cannot reach).",
            "The noise bound D and the p-table are public; combined with additive margins they "
            "allow the noise-bound and averaging attacks of `sdclab ckm-risk`.",
            *preset_caveat(p),
        ),
        allocation=tuple(rows),
        allocation_title="Delta per released cell at each epsilon (no budget is split)",
    )


def cell_guarantee(p: CellKeyParameters, table: AnyPTable, delta: float) -> tuple[Guarantee, str]:
    """The per-cell (ε, δ) as a guarantee, with why it does (or does not) compose over the cells
    a person is in, and what the release-level figure is where it does."""
    per_cell = Loss("approximate", epsilon=p.epsilon, delta=delta)
    t = cells_per_person(p.census, None if p.tables is None else tuple(p.workload_names()))
    if p.swap != "none":
        reason = (
            f"targeted swapping ({p.swap}{'; ' + p.swap_settings if p.swap_settings else ''}) "
            "runs first and has no formal guarantee of its own; the "
            "joint guarantee of swapping followed by perturbation is an open problem (Bailie, "
            "Gong & Meng)"
        )
        return no_guarantee(reason, unit="household"), (
            f"The chain has no formal guarantee: {reason}. The cell key part alone gives, per "
            f"released cell of the swapped tables, {per_cell.text()}."
        )
    if is_deterministic(table):
        reason = (
            "the p-table publishes one value per count whatever the cell key (deterministic "
            "rounding, delta = 1): there is no randomness to compose"
        )
    elif p.spsn and p.keys == "ids":
        reason = (
            "keys=ids makes every record key, hence every cell key, a deterministic function of "
            "the data: there is no randomness to compose"
        )
    elif p.spsn:
        reason = (
            "cell keys are sums of the contributors' record keys modulo K (same participants, "
            "same noise): cells sharing contributors have dependent noise, so the per-cell "
            "guarantees do not compose by the standard theorem"
        )
    else:
        guarantee = composed_over_cells(per_cell, t)
        released = guarantee.loss
        assert released is not None  # (a composed loss)
        text = (
            f"Independent cell keys (spsn=false): over the t = {t:,} cells a person is in, "
            f"basic composition gives epsilon = {float(released.epsilon or 0):.4g}, delta = "
            f"{float(released.delta or 0):.3g} for the release."
        )
        return guarantee, text
    guarantee = Guarantee(
        measure="approximate",
        unit="person",
        relation="add_remove",
        loss=per_cell,
        person_replace=NotMeasured(reason),
        scope="cell",
    )
    return guarantee, (
        f"The guarantee is per released cell; a person is in t = {t:,} published cells, and no "
        f"release-level figure is stated: {reason}."
    )


def preset_caveat(p: CellKeyParameters) -> tuple[str, ...]:
    """The settings a p-table preset stands for, as a caveat of its card (none otherwise)."""
    if p.preset is None:
        return ()
    return (f"ptable={p.ptable} is {p.preset.text()}.",)
