"""The cell key method (CKM): post-tabular noise that is the same for the same contributors.

Every record carries a fixed key rk (``record_key``, integer 0..K−1). A published cell's key is the
sum of its contributors' keys modulo K; the p-table maps (true count, cell key) to a bounded
integer noise (docs/cellkey.md, *How it works*). Because the noise depends only on the contributor
set, identical cells get identical noise in every table and margin (SPSN), repeating a query gains
an attacker nothing, and zeros stay zero.

Tables are computed as linear queries twice over the same records: once counting them and once
summing rk + 1. Both matrices have the same sparsity pattern (every entry is a sum of positive
terms over the same contributors), so cell keys are ``(weighted − counts) mod K`` entry by entry,
for every table at every level, without a loop over cells.

The ESS 2021 recipe — targeted record swapping, then CKM on the swapped tables — is
``swap=swap`` (record keys travel with the records they belong to).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sdclab.censuses.us2010.population import Population
from sdclab.core.arrays import FloatArray
from sdclab.core.cell_model import CellBounds, bounds
from sdclab.core.diagnostics import Diagnostics, HiddenCells
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured
from sdclab.core.geography import Geography
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate
from sdclab.protection import swapping
from sdclab.protection.base import NoisePublication
from sdclab.protection.cellkey_card import REPORTED_EPSILONS, card, cell_guarantee, cells_per_person
from sdclab.protection.cellkey_params import (
    EXACT_FLOAT,
    MECHANISM,
    PTABLE_ARTIFACT,
    PTABLE_PRESETS,
    AnyPTable,
    CellKeyParameters,
    check_reachable_variance,
)
from sdclab.protection.cellkey_perturb import (
    KeyedCells,
    assign_record_keys,
    blocked,
    cell_noise,
    check_published,
    has_keys,
    independent_keys,
    keyed_tables,
    keys_from_ids,
    noise_bound,
    perturb,
)
from sdclab.protection.checks import counts_problem
from sdclab.protection.ptable import (
    OnsPTable,
    PTable,
    ptable_from_frame,
)
from sdclab.protection.ptable_analysis import (
    is_invertible,
    preimage_bounds,
    smallest_shown,
)
from sdclab.release import Release, artifact_file

__all__ = [  # the mechanism's parts live in cellkey_params, _perturb and _card; one import path
    "EXACT_FLOAT",
    "MECHANISM",
    "PTABLE_ARTIFACT",
    "PTABLE_PRESETS",
    "REPORTED_EPSILONS",
    "AnyPTable",
    "CellKeyParameters",
    "KeyedCells",
    "assign_record_keys",
    "blocked",
    "card",
    "cell_guarantee",
    "cell_noise",
    "cells_per_person",
    "check_published",
    "check_reachable_variance",
    "has_keys",
    "independent_keys",
    "keyed_tables",
    "keys_from_ids",
    "noise_bound",
    "perturb",
    "published_ptable",
    "protect",
]

# ---------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------


@MECHANISM.define("protect")
def protect(population: Population, p: CellKeyParameters, rng: np.random.Generator) -> Release:
    """Every table of the workload (default: of the census) at every level, perturbed by the
    p-table (after swapping, if asked)."""
    table = p.table()
    key_space = p.resolved_key_space(table)
    notes: dict[str, object] = {}
    source = population
    randomness: dict[str, object] = {}  # drawn keys: the stream is the only source
    if p.keys == "ids":
        source = keys_from_ids(population, key_space)
        notes["record_keys"] = f"person_id / unit_id mod {key_space}"
        randomness = {
            "source": f"record ids (person_id / unit_id mod {key_space})",
            "fit_for_publication": False,
            "note": "cell keys derived from record ids are only as secret as the ids, and "
            "sequential ids can be guessed: use stored or drawn record keys for publication",
        }
    elif p.keys == "drawn" or not has_keys(population):
        source = assign_record_keys(population, key_space, rng)
        notes["record_keys"] = f"drawn uniformly on 0..{key_space - 1} for this release" + (
            "" if p.keys == "drawn" else " (the population had no record_key column)"
        )
    else:
        notes["record_keys"] = "the population's record_key column"
        check_stored_keys(population, key_space)
        randomness = {
            "source": "the population's record_key column",
            "fit_for_publication": True,
            "note": "the cell keys are as secret as the stored record keys",
        }
    swap = p.swap_parameters()
    if swap is not None:
        swapped = swapping.swap_population(source, swap, rng)  # type: ignore[arg-type]
        source = swapped.population
        # not the swap's household count: an invariant of the swap, but H3 is perturbed here
        notes["swap"] = {
            "mechanism": p.swap,
            **({"settings": p.swap_settings} if p.swap_settings else {}),
            "target_swap_rate": swapped.notes["target_swap_rate"],
        }
    names = None if p.tables is None else p.workload_names()
    cells = keyed_tables(source, names, key_space)
    if not p.spsn:
        cells = independent_keys(cells, key_space, rng)
        notes["spsn"] = "off: every published cell has an independent uniform cell key"
    published = perturb(cells, table, key_space, p.threshold)
    notes["key_space"] = key_space
    notes["ptable"] = ptable_notes(p, table)
    if p.threshold:
        notes["absent_rows"] = (
            f"a cell absent from a table was published as 0 or was below the threshold "
            f"{p.threshold} (suppressed): the two are not distinguished"
        )
    return Release(
        mechanism="cellkey",
        parameters=p.recorded(),
        card=card(p, table),
        tables={name: PublishedTable.from_counts(tc) for name, tc in published.items()},
        randomness=randomness,
        artifacts={PTABLE_ARTIFACT: table.to_frame()} if p.ptable_file else {},
        input_digest=population.digest,
        geography=population.geography,
        notes=notes,
    )


@MECHANISM.define("unprotected")
def unprotected(population: Population, p: CellKeyParameters, release: Release) -> str | None:
    """Why a cell key release protects nothing though its counts may differ from the exact
    ones: a p-table whose noise is a fixed, invertible function of the count, with no threshold
    that withholds a count of 1 or more (a threshold at or below every count the table shows
    withholds nothing), or stored record keys that are all equal (every cell key is then a
    function of the cell's count, and so is its noise)."""
    if p.maxent_design() is None:  # a max-entropy table has variance V > 0
        table = published_ptable(release, p)
        if is_invertible(table) and p.threshold <= smallest_shown(table):
            return (
                "the p-table gives every count one published value and no two counts the same "
                "one, and no count is withheld: anyone can undo the noise"
            )
    if p.keys == "stored" and p.spsn and has_keys(population):
        for kind, label in (("persons", "persons"), ("households", "units")):
            keys = population.record_keys(kind)
            if keys is not None and len(keys) > 1 and len(np.unique(keys)) == 1:
                return (
                    f"every one of the {label}' record keys is the same: a cell's key, and so "
                    "its noise, is a function of its count"
                )
    return None


def check_stored_keys(population: Population, key_space: int) -> None:
    """Stored keys must lie in 0..K−1 for the cell keys to be uniform."""
    for kind, label in (("persons", "persons"), ("households", "units")):
        keys = population.record_keys(kind)
        top = int(np.nan_to_num(keys).max(initial=0)) if keys is not None else 0
        if top >= key_space:
            raise InputError(
                f"{label}: record_key goes up to {top}, outside 0..{key_space - 1} "
                f"(set key_space to the keys' range)"
            )


def ptable_notes(p: CellKeyParameters, table: AnyPTable) -> dict[str, object]:
    """The release notes on its p-table: a preset's design in words, then :func:`describe`."""
    if p.preset is None:
        return describe(table, p.pstay)
    return {"preset": f"{p.ptable}: {p.preset.text()}"} | describe(table, p.preset.pstay)


def describe(table: AnyPTable, pstay: Decimal | None = None) -> dict[str, object]:
    """What the release notes say about its p-table, including where it does not honour its
    parameters: rows whose variance stays below V, rows where p(i→i) fell below ``pstay``."""
    if isinstance(table, OnsPTable):
        return {"format": "ONS", "key_space": table.key_space, "bound": noise_bound(table)}
    out: dict[str, object] = {"format": "long", "D": table.D, "V": table.V, "js": table.js}
    if table.flagged:
        rows = "row i = {} has" if len(table.flagged) == 1 else "rows i = {} have"
        out["rows_below_V"] = (
            f"{rows.format(row_list(table.flagged))} a variance below V = {table.V:g}: the noise "
            "of a small count cannot reach below -count"
        )
    if pstay is not None:
        stays = {}
        for i in range(1, table.i_max + 1):
            v, p = table.row(i)
            stays[i] = float(p[v == 0].sum())
        # the intervals are rounded to 8 decimals, so a bound met exactly may read 1e-8 below
        relaxed = [i for i, stay in stays.items() if stay < float(pstay) - 1e-8]
        if relaxed:
            out["pstay_relaxed"] = (
                f"p(i→i) is below pstay = {pstay} in rows i = {row_list(relaxed)} (down to "
                f"{min(stays[i] for i in relaxed):.4g}): the bound is relaxed in steps of 0.05 "
                "until the row reaches variance V, as the ptable package does"
            )
    return out


def row_list(rows: tuple[int, ...] | list[int]) -> str:
    """``[1, 2, 3, 5]`` → ``"1-3, 5"``."""
    runs: list[list[int]] = []
    for row in sorted(rows):
        if runs and row == runs[-1][-1] + 1:
            runs[-1].append(row)
        else:
            runs.append([row])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


@MECHANISM.define("diagnostics")
def diagnostics(population: Population, release: Release) -> tuple[Diagnostics, ...]:
    """Evaluation only: with a threshold, the non-empty true cells the release does not show, by
    level (published below the threshold — or emptied by a swap first). A reader cannot tell them
    from empty cells, so the release does not say how many there are."""
    if not CellKeyParameters.model_validate(
        release.parameters, context={"census": release.mechanism_census}
    ).threshold:
        return ()
    hidden = {level: 0 for level in release.geography.all_levels}
    for name, tc in tabulate(population, list(release.tables)).items():
        table = release.table(name)
        for level, (_, truth) in tc.counts.items():
            nonempty = truth != 0
            # published: a non-zero count or a suppressed cell (a null row of the file)
            shown = (table.matrix(level) != 0).maximum(table.suppressed(level))
            hidden[level] += nonempty.nnz - nonempty.multiply(shown).nnz
    levels = {level for table in release.tables.values() for level in table.levels}
    return (HiddenCells({lv: n for lv, n in hidden.items() if lv in levels}),)


@MECHANISM.define("noise")
def published_noise(p: CellKeyParameters) -> NoisePublication:
    design: dict[str, Any] = {"ptable": p.ptable} if p.ptable in PTABLE_PRESETS else {}
    if p.ptable == "maxent":
        design |= {"bound": p.bound, "variance": float(p.variance or 0), "js": p.js}
    if p.preset is not None:
        design |= p.preset.settings() | {"design": p.preset.text()}
    return NoisePublication(
        distribution="integer noise looked up in the p-table by each cell's key (the sum of "
        "its contributors' record keys): the same contributors get the same noise"
        + ("" if p.spsn else "; spsn=false: every published cell draws its own key"),
        published=(
            "parameters: the p-table's design (a preset, or maxent's bound and variance)",
            f"artifact {PTABLE_ARTIFACT}: the p-table itself, when it came from a file",
            "not published: the record keys",
        ),
        parameters=design | {"threshold": p.threshold},
    )


def published_ptable(release: Release, params: CellKeyParameters) -> AnyPTable:
    """The p-table of a cell key release: the one it publishes (a p-table from a file) or the
    preset its parameters name."""
    if not params.ptable_file:
        return params.table()
    if PTABLE_ARTIFACT not in release.artifacts:
        raise InputError(f"the release publishes no {artifact_file(PTABLE_ARTIFACT)}")
    return ptable_from_frame(
        release.artifacts[PTABLE_ARTIFACT], Path(artifact_file(PTABLE_ARTIFACT))
    )


@MECHANISM.define("check")
def check_release(release: Release, p: CellKeyParameters) -> str | None:
    """Every count is one the release's p-table and threshold publish, and none means more
    records than its geounit's total allows; the p-table is published when it came from a
    file, and only then."""
    if p.ptable_file != (PTABLE_ARTIFACT in release.artifacts):
        return (
            f"{artifact_file(PTABLE_ARTIFACT)} is published only with a p-table from a file, and "
            f"then always; the recorded ptable is {p.ptable!r}"
        )
    table = published_ptable(release, p)

    def true_range(_table: str, _level: str, counts: FloatArray) -> tuple[FloatArray, FloatArray]:
        low, high = preimage_bounds(table, p.threshold, counts)
        return low.astype(np.float64), high.astype(np.float64)

    rule = "a count its p-table turns some count into" + (
        f", 0 or at least the threshold {p.threshold}" if p.threshold else ""
    )
    return counts_problem(release, true_range, rule)


@MECHANISM.publishes(
    PTABLE_ARTIFACT, "the p-table, when it came from a file (a preset is named by the parameters)"
)
def check_ptable(frame: pl.DataFrame, _: Geography | None = None) -> str | None:
    """Whether the frame is a p-table, checked as a p-table file is; the problem, or None."""
    where = Path(artifact_file(PTABLE_ARTIFACT))
    try:
        ptable_from_frame(frame, where)
    except InputError as exc:
        return exc.one_line().removeprefix(f"{where}: ")
    return None


@MECHANISM.define("cell_model")
def cell_model(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """The attacker's model: the counts the p-table (and the threshold) can turn into the
    published one, distance weight 1 (the p-table's mass is largest at no change)."""
    p = CellKeyParameters.model_validate(
        release.parameters, context={"census": release.mechanism_census}
    )
    table = published_ptable(release, p)
    shown = np.nan_to_num(published, nan=0.0)
    if np.any(shown < 0) or np.any(shown != np.rint(shown)):
        raise InputError("release (cellkey): published counts must be non-negative integers")
    low, high = (bound.astype(np.float64) for bound in preimage_bounds(table, p.threshold, shown))
    impossible = ~np.isnan(published) & (low > high)
    if impossible.any():
        raise InputError(
            f"release (cellkey): a published count of {int(shown[impossible][0])} at {level} "
            "cannot come from its p-table; the release and its parameters disagree"
        )
    return bounds(published, low, high, np.ones_like(published))


@MECHANISM.define("cell_noise")
def one_cell_noise(p: CellKeyParameters, count: int | None) -> dict[str, Any]:
    """The noise of one published cell under the p-table, for a cell key uniform on [0, 1) as
    on the card: of a large count (the symmetry row, or an ONS table's rows over one period of
    counts), or of ``count``. Every table at every level takes its noise from the same p-table.
    The method has no budget: the card's reason is stated instead."""
    from sdclab.core.accounting import margin_of_error
    from sdclab.protection.ptable import large_count_noise

    ptable = p.table()
    if count is not None:
        values, probabilities = ptable.row(count)
        row = f"the row of a count of {count}"
    elif isinstance(ptable, PTable):
        values, probabilities = large_count_noise(ptable)
        row = f"the row of every count from {ptable.i_max} up (the symmetry row)"
        if ptable.i_max > 1:
            row += f"; counts 1 to {ptable.i_max - 1} have rows of their own (--count N)"
    else:
        values, probabilities = large_count_noise(ptable)
        row = (
            "the rows of counts 501 to 750 taken together, each count equally likely (rows "
            "repeat with period 250 above 750); a given count's noise differs (--count N)"
        )
    shown = probabilities > 0
    values, probabilities = values[shown], probabilities[shown]
    mean = float((values * probabilities).sum())
    common = card(p, ptable).common
    reason = common.reason if isinstance(common, NotMeasured) else common.text()
    return {
        "mechanism": "cellkey",
        "ptable": p.ptable,
        "count": count,
        "row": row,
        "noise": {int(v): float(q) for v, q in zip(values, probabilities, strict=True)},
        "mean": mean,
        "variance": float(((values - mean) ** 2 * probabilities).sum()),
        "max_abs": int(np.abs(values).max()),
        "bound": noise_bound(ptable),
        "moe_95": margin_of_error(values, probabilities),
        "stated_variance": None if isinstance(ptable, OnsPTable) else float(ptable.V),
        "budget": (
            f"none: {reason} (docs/cellkey.md, The card); the noise is the same for a cell of "
            "any table at any level"
        ),
        "what": (
            "the noise of one published cell for a cell key uniform on [0, 1), as on the card "
            f"(with K = {p.resolved_key_space(ptable)} integer keys each probability is the share "
            "of the keys k/K in its interval)"
        ),
    }
