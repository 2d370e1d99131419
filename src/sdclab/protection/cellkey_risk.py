"""The cell key method's risk analyses run on a release (docs/cellkey.md, *Risk analyses*).

What an attacker can do with a CKM release and the public method (p-table and noise bound):

(a) additive 3-tuples — a geounit with exactly two children publishes F + M = T for every cell, so
    S = F̃ + M̃ − T̃ samples the noise; Ê = ⌈max|S|/3⌉ discloses the bound. Reported: the tuples
    present, the bound estimated from them, p1 in the independence model and in the exact key mode,
    and the risk over the tuples present;
(b) tuples whose extreme noise pins the true counts once the bound is known (checked against the
    truth when it is given — evaluation only);
(c) independent redundant representations (IRRs): a cell is also the sum of finer cells of other
    tables and of its children's cells; averaging them shrinks the noise variance to kV/t². t and
    k are counted for every published cell with and without SPSN, and the averaging attack is run.

Only person tables on the main geography enter (c); the representations of a cell are every
partition of it by the cells of a table (found from the query matrices, over the joint domain of
two tables declared on different schemas: the table's cells that meet the statistic must lie
inside it and cover it) at its own level or any level below.

Any census: what the analyses read of it (tables, tuple sizes, targets) is
:func:`sdclab.protection.cellkey_scope.risk_scope`. The US census keeps the paper's 3-tuples; a
declared census's main hierarchy gives tuples of every number of children c ≥ 2 (S = Σ children −
parent, Ê = max ⌈|S|/(c+1)⌉); a figure without a counterpart (exact keys without 3-tuples, pinned
tuples with too many assignments) is ``"n/a: <reason>"``, never 0.

The cells, the tuples (the geography relations with c parts) and the partitions are those of
:mod:`sdclab.core.tables.relations`, shared with complementary suppression.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from sdclab.core import cellkey_analysis as ck
from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.relations import (
    JOINT_MAX,
    PublishedCells,
    by_identity,
    joint_partitions,
)
from sdclab.core.tables.tabulate import Records, tabulate
from sdclab.protection import cellkey
from sdclab.protection.cellkey import (
    AnyPTable,
    CellKeyParameters,
    blocked,
    cell_noise,
    noise_bound,
    published_ptable,
)
from sdclab.protection.cellkey_scope import ATTACK_TARGETS, contributor_ids, risk_scope
from sdclab.protection.ptable import OnsPTable, large_count_noise, symmetry_row
from sdclab.release import Release

IntArray = npt.NDArray[np.int64]
LARGE_COUNT = 1_000
"""A count in every p-table's symmetry row (used for p1)."""


NA = "n/a: "
"""How a figure without a counterpart for a census starts (then the reason)."""


# ---------------------------------------------------------------------------------------------
# (a), (b): additive tuples along the geography
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tuples:
    """Published (child₁, …, child_c, parent) values of every cell of parents with c children."""

    values: IntArray
    table: npt.NDArray[np.str_]
    level: npt.NDArray[np.str_]
    """The parent's level."""
    parent: IntArray
    cell: IntArray
    members: IntArray
    """The numbers of the tuple's cells (children, then parent) in the release's
    :class:`~sdclab.core.tables.relations.PublishedCells`."""


def geographic_tuples(
    release: Release, components: int = 2, names: tuple[str, ...] | None = None
) -> Tuples:
    """Every cell of every parent geounit with exactly ``components`` children, in every table
    (of ``names``, default all) published at both levels, where the parent's published count is
    positive: the geography relations of the release's cells with that many parts."""
    cells = PublishedCells.from_release(release, names)
    relations = cells.geography_relations(children=components)
    relations = relations.select(cells.values_at(relations.whole) > 0)  # a suppressed cell is 0
    members = relations.members() if len(relations) else np.zeros((0, components + 1), np.int64)
    where = cells.locate(relations.whole)
    return Tuples(
        cells.values_at(members).astype(np.int64),
        np.array(cells.names, dtype=str)[where.table],
        np.array(cells.geography.levels, dtype=str)[where.level],
        where.row,
        where.cell,
        members,
    )


def true_values(
    tuples: Tuples, truth: Records, release: Release, names: tuple[str, ...] | None = None
) -> IntArray:
    """The true counts of each tuple's members (evaluation only), located among the cells of the
    tables ``names`` the tuples were found in (default: every table of the release)."""
    cells = PublishedCells.from_release(release, names)
    exact = tabulate(truth, sorted(set(tuples.table.tolist())))
    truth_cells = PublishedCells.from_tabulation(exact, release.geography)
    where = cells.locate(tuples.members)
    member_tables = np.array(cells.names, dtype=str)[where.table]
    return truth_cells.values_at(
        truth_cells.index(member_tables, where.level, where.row, where.cell)
    ).astype(np.int64)


EXACT_KEYS_MAX = 4096
"""Largest key space enumerated exactly (K² pairs); a long-format table with more keys is
evaluated on this many equally spaced keys."""
LARGE_COUNTS = tuple(range(LARGE_COUNT, LARGE_COUNT + 5))
"""True counts the large-count noise is taken over: five consecutive values cover the ONS 10/5
table's rounding period (a long-format table's symmetry row does not depend on the count)."""


def usable_tuples(
    release: Release,
    params: CellKeyParameters,
    components: int = 2,
    names: tuple[str, ...] | None = None,
) -> Tuples:
    """The release's tuples of ``components`` children and their parent an attacker can use
    (3-tuples by default): with a threshold, only those whose members are all shown (an absent
    cell may be a suppressed one)."""
    tuples = geographic_tuples(release, components, names)
    if not params.threshold:
        return tuples
    shown = (tuples.values > 0).all(axis=1)
    return Tuples(*(getattr(tuples, f.name)[shown] for f in fields(Tuples)))


def bound_disclosure(tuples: Tuples, params: CellKeyParameters, table: AnyPTable) -> dict[str, Any]:
    """(a): the bound of large-count noise estimated from the release's 3-tuples, and the p1 and
    risk they carry in the independence model and with the exact integer keys."""
    key_space = params.resolved_key_space(table)
    pmf = large_count_noise(table)
    bound = int(np.abs(pmf[0][pmf[1] > 0]).max())
    values = tuples.values
    s = values[:, 0] + values[:, 1] - values[:, 2]
    independent = ck.p1_independent(pmf, pmf, pmf, bound)
    space = key_space if isinstance(table, OnsPTable) else min(key_space, EXACT_KEYS_MAX)
    exact = float(
        np.mean(
            [
                ck.p1_exact(
                    lambda n, keys: cell_noise(table, n, keys, space), n_f, n_m, space, bound
                )
                for n_f in LARGE_COUNTS
                for n_m in LARGE_COUNTS
            ]
        )
    )
    m = int(len(s))
    estimated = ck.estimate_bound(s) if m else None
    return {
        "noise_bound": noise_bound(table),
        "large_count_bound": bound,
        "tuples_present": m,
        "bound_estimated": estimated,
        "bound_disclosed": estimated == bound,
        "tuples_at_extreme": int((np.abs(s) >= 3 * bound - 2).sum()),
        "p1_independent": independent,
        "p1_exact_keys": exact,
        "exact_key_space": space,
        "tuples_needed_95": ck.tuples_needed(independent, 0.95),
        "risk_independent": ck.disclosure_risk(independent, m),
        "risk_exact_keys": ck.disclosure_risk(exact, m),
        "ons_table": isinstance(table, OnsPTable),
    }


def pinned_counts(
    tuples: Tuples,
    release: Release,
    table: AnyPTable,
    truth: Records | None,
    names: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """(b): 3-tuples whose published values pin their true counts once the bound is known."""
    result = ck.pinned_tuples(tuples.values, noise_bound(table), blocked(table))
    pinned = result["pinned"]
    out: dict[str, Any] = {
        "tuples": len(tuples.values),
        "pinned": int(pinned.sum()),
        "inconsistent": int((result["feasible"] == 0).sum()),
    }
    if truth is not None and pinned.any():
        kept = Tuples(*(getattr(tuples, f.name)[pinned] for f in fields(Tuples)))
        truth_values = true_values(kept, truth, release, names)
        out["pinned_correct"] = int(
            (truth_values == result["true_values"][pinned]).all(axis=1).sum()
        )
    return out


def _sums(tuples: Tuples) -> IntArray:
    """S = Σ children − parent of every tuple."""
    return tuples.values[:, :-1].sum(axis=1) - tuples.values[:, -1]


def _children(tuples: Tuples) -> int:
    return int(tuples.members.shape[1] - 1)


def bound_disclosure_of(
    groups: list[Tuples], params: CellKeyParameters, table: AnyPTable
) -> dict[str, Any]:
    """(a) over tuples of any sizes (``groups``: one per number of children c): Ê = max
    ⌈|S|/(c+1)⌉, p1 per size in the independence model, the risk over all tuples present; the
    exact-key p1 of the 3-tuples only (K² key pairs; more children would need K^c). Only
    3-tuples: exactly :func:`bound_disclosure`."""
    if [_children(g) for g in groups] == [2]:
        return bound_disclosure(groups[0], params, table)
    present = [g for g in groups if len(g.values)]
    pmf = large_count_noise(table)
    bound = int(np.abs(pmf[0][pmf[1] > 0]).max())
    sizes = [_children(g) for g in present]
    p1 = {c: ck.p1_children(pmf, c, bound) for c in sizes}
    counts = {c: len(g.values) for c, g in zip(sizes, present, strict=True)}
    s = np.concatenate([_sums(g) for g in present]) if present else np.zeros(0, np.int64)
    c_of = np.repeat(sizes, [len(g.values) for g in present]).astype(np.int64)
    none = f"{NA}no parent geounit has two or more children with a positive published count"
    mixed = f"{NA}tuples of {sizes} children differ in p1: see tuples_by_children"
    single = len(sizes) == 1
    three = next((g for g in present if _children(g) == 2), None)
    exact = bound_disclosure(three, params, table) if three is not None else None
    no_three = f"{NA}exact keys are enumerated for 3-tuples only (K² key pairs); none here"
    risk = 1 - float(np.prod([1 - ck.disclosure_risk(p1[c], counts[c]) for c in sizes]))
    return {
        "noise_bound": noise_bound(table),
        "large_count_bound": bound,
        "tuples_present": int(len(s)),
        "tuples_by_children": {
            str(c): {"tuples": counts[c], "p1_independent": p1[c]} for c in sizes
        },
        "bound_estimated": ck.estimate_bound_children(s, c_of) if len(s) else none,
        "bound_disclosed": ck.estimate_bound_children(s, c_of) == bound if len(s) else none,
        "tuples_at_extreme": int((np.abs(s) >= np.maximum((c_of + 1) * bound - c_of, 0)).sum()),
        "p1_independent": p1[sizes[0]] if single else (mixed if sizes else none),
        "p1_exact_keys": no_three if exact is None else exact["p1_exact_keys"],
        "exact_key_space": no_three if exact is None else exact["exact_key_space"],
        "tuples_needed_95": ck.tuples_needed(p1[sizes[0]], 0.95)
        if single
        else (mixed if sizes else none),
        "risk_independent": risk if sizes else none,
        "risk_exact_keys": no_three if exact is None else exact["risk_exact_keys"],
        "ons_table": isinstance(table, OnsPTable),
    }


def pinned_of(
    groups: list[Tuples],
    release: Release,
    table: AnyPTable,
    truth: Records | None,
    names: tuple[str, ...],
) -> dict[str, Any]:
    """(b) over tuples of every size (their feasible assignments are counted, in O(c²D) per
    tuple: no size is left out)."""
    parts = [pinned_counts(g, release, table, truth, names) for g in groups if len(g.values)]
    total = sum(len(g.values) for g in groups)
    out: dict[str, Any] = {"tuples": total}
    if not parts:
        return {**out, "pinned": f"{NA}no tuples", "inconsistent": f"{NA}no tuples"}
    for key in ("pinned", "inconsistent", "pinned_correct"):
        if any(key in part for part in parts):
            out[key] = sum(part.get(key, 0) for part in parts)
    return out


# ---------------------------------------------------------------------------------------------
# (c): redundant representations along tables and geography, and the averaging attack
# ---------------------------------------------------------------------------------------------


def person_tables(release: Release) -> list[TableDef]:
    """The release's tables of persons on its main geography: the representations come from
    them (of the US census: those on its person schema)."""
    return list(risk_scope(release).tables)


@by_identity
def canonical_parts(tables: Sequence[TableDef]) -> dict[str, IntArray]:
    """One id per distinct set of domain cells, for every cell of every table: cells of two tables
    with the same id have the same contributors (and so, under SPSN, the same noise). Tables on
    several schemas (a declared census's hypercubes), or on a schema too large to list its
    cells' domain cells (a hypercube crossing the country lists), compare by
    :func:`contributor_ids`."""
    large = any(t.schema.size > JOINT_MAX for t in tables)
    if len({id(t.schema) for t in tables}) > 1 or large:
        return contributor_ids(tables)
    ids: dict[bytes, int] = {}
    out = {}
    for table in tables:
        rows = table.query.tocsr()
        rows.sort_indices()
        out[table.name] = np.array(
            [
                ids.setdefault(
                    rows.indices[rows.indptr[i] : rows.indptr[i + 1]].tobytes(), len(ids)
                )
                for i in range(rows.shape[0])  # per table cell (hundreds), not per record
            ],
            dtype=np.int64,
        )
    return out


@dataclass(frozen=True)
class Representation:
    """A table whose cells partition a target cell: how many parts, which parts, which levels."""

    table: str
    parts: int
    key: frozenset[int]
    levels: tuple[str, ...]


@by_identity
def representations(target: TableDef, tables: Sequence[TableDef]) -> list[list[Representation]]:
    """For every cell of ``target``: the tables that represent it by their cells."""
    canon = canonical_parts(tables)
    tables_by_name = {t.name: t.levels for t in tables}
    out: list[list[Representation]] = [[] for _ in range(target.n_cells)]
    for name, inside in joint_partitions(target, tables).items():
        members = inside.tocsc()
        for j in range(members.shape[1]):
            parts = members.indices[members.indptr[j] : members.indptr[j + 1]]
            if len(parts):
                key = frozenset(canon[name][parts].tolist())
                out[j].append(Representation(name, len(parts), key, tables_by_name[name]))
    return out


def _below(level: str, levels: tuple[str, ...], hierarchy: tuple[str, ...]) -> list[str]:
    """The ``levels`` at or below ``level`` in ``hierarchy``."""
    return [lv for lv in levels if hierarchy.index(lv) >= hierarchy.index(level)]


def _distinct_levels(
    levels: list[str], counts: dict[str, IntArray]
) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    """Each level with the geounits for which it adds a new representation: a level whose
    geounit count equals the previous level's (single-child chains) repeats the same people."""
    out = []
    previous: IntArray | None = None
    for lv in levels:
        new = np.ones(len(counts[lv]), bool) if previous is None else counts[lv] != previous
        out.append((lv, new))
        previous = counts[lv]
    return out


@dataclass(frozen=True)
class Redundancy:
    """The IRRs of every cell of a target table at one level (geounits × cells): t, k (the noise
    terms, counted as in the paper: every part, empty or not), and the attacker's average of the
    representations, each weighted by one over its published non-zero parts (a true zero is
    published as 0 without noise, so those are the noise terms the attacker can see)."""

    t: IntArray
    k: IntArray
    estimate: npt.NDArray[np.float64]


def redundancy(
    release: Release,
    target: TableDef,
    level: str,
    spsn: bool,
    tables: list[TableDef] | None = None,
) -> Redundancy:
    """Count and average the IRRs of every cell of ``target`` at ``level``.

    Without SPSN every (table, level) publication of a representation carries fresh noise; with
    SPSN a representation made of the same contributor sets is the same noise however many tables
    or levels repeat it, so it counts once.
    """
    geography = release.geography
    tables = person_tables(release) if tables is None else tables
    reps = representations(target, tables)
    inside = joint_partitions(target, tables)
    n_geo, n_cells = geography.n_units(level), target.n_cells
    down = {
        lv: geography.containment(level, lv)
        for lv in geography.levels[geography.levels.index(level) + 1 :]
    }
    counts = {lv: np.asarray(m.sum(axis=1)).ravel() for lv, m in down.items()}
    counts[level] = np.ones(n_geo, np.int64)
    cache: dict[tuple[str, str], tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}

    def sums(name: str, lv: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """Per geounit and target cell, the sums over its descendants at ``lv`` of the table's
        published cells that represent the target cell, and of their non-zero indicators (every
        target cell at once)."""
        if (name, lv) not in cache:
            values = release.tables[name].matrix(lv)  # a suppressed cell is 0
            nonzero = (values > 0).astype(np.int64)
            m = down.get(lv)
            if m is not None:
                values, nonzero = m @ values, m @ nonzero
            cells = inside[name]
            cache[name, lv] = ((values @ cells).toarray(), (nonzero @ cells).toarray())
        return cache[name, lv]

    parts_of = {name: np.diff(m.tocsc().indptr) for name, m in inside.items()}
    shape = (n_geo, n_cells)
    t, k = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    numerator, weights = np.zeros(shape), np.zeros(shape)
    for cells, cell_reps in _alike(reps):
        for name, lv, include in _publications(cell_reps, level, counts, spsn, geography.levels):
            values, nonzero = sums(name, lv)
            value, terms = values[:, cells], nonzero[:, cells]
            once = include[:, None]
            t[:, cells] += once
            k[:, cells] += once * parts_of[name][cells][None, :] * counts[lv][:, None]
            weight = once / np.maximum(terms, 1)
            numerator[:, cells] += weight * value
            weights[:, cells] += weight
    with np.errstate(invalid="ignore", divide="ignore"):
        return Redundancy(t, k, numerator / weights)


def _alike(reps: list[list[Representation]]) -> list[tuple[IntArray, list[Representation]]]:
    """The target cells grouped by the shape of their representations (tables, levels, and which
    of them share contributors), with one cell's representations for each group: their
    publications are the same, so each group is counted at once."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for j, cell_reps in enumerate(reps):
        first: dict[frozenset[int], int] = {}
        shape = tuple((r.table, r.levels, first.setdefault(r.key, len(first))) for r in cell_reps)
        groups.setdefault(shape, []).append(j)
    return [(np.asarray(cells, dtype=np.int64), reps[cells[0]]) for cells in groups.values()]


def _publications(
    cell_reps: list[Representation],
    level: str,
    counts: dict[str, IntArray],
    spsn: bool,
    hierarchy: tuple[str, ...],
) -> list[tuple[str, str, npt.NDArray[np.bool_]]]:
    """(table, level, geounits for which it is a separate noisy representation) of one cell."""
    every = np.ones(len(counts[level]), bool)
    if not spsn:
        below = {r.table: _below(level, r.levels, hierarchy) for r in cell_reps}
        return [(r.table, lv, every) for r in cell_reps for lv in below[r.table]]
    out = []
    for key in dict.fromkeys(r.key for r in cell_reps):
        source = {
            lv: r.table
            for r in cell_reps
            if r.key == key
            for lv in _below(level, r.levels, hierarchy)
        }
        ordered = [lv for lv in hierarchy if lv in source]
        out += [(source[lv], lv, new) for lv, new in _distinct_levels(ordered, counts)]
    return out


def averaging(
    release: Release,
    params: CellKeyParameters,
    table: AnyPTable,
    truth: Records | None,
    targets: tuple[str, ...] = ATTACK_TARGETS,
    tables: list[TableDef] | None = None,
) -> dict[str, Any]:
    """(c) for the target tables at every level: the k/t² distribution over published cells, the
    most exposed cells with their Gaussian averaging success, and — with the truth — how many
    non-empty cells the weighted average of the IRRs recovers exactly."""
    v, p = large_count_noise(table)
    variance = float((v.astype(float) ** 2 * p).sum())
    exact = tabulate(truth, list(targets)) if truth is not None else None
    ratios: list[npt.NDArray[np.float64]] = []
    exposed: list[dict[str, Any]] = []
    attack = {"cells": 0, "published_exact": 0, "averaged_exact": 0}
    tables = person_tables(release) if tables is None else tables
    for name in (n for n in targets if n in release.tables):
        target = release.tables[name].table
        for level in target.levels:
            r = redundancy(release, target, level, params.spsn, tables)
            published = release.tables[name].matrix(level).toarray()  # suppressed: 0
            shown = published > 0
            ratio = np.where(shown, r.k / np.maximum(r.t, 1) ** 2, np.inf)
            ratios.append(ratio[shown])
            best = np.unravel_index(np.argmin(ratio), ratio.shape)
            if shown.any():
                exposed.append(
                    {
                        "table": name,
                        "level": level,
                        "cell": target.cell_labels[best[1]],
                        "t": int(r.t[best]),
                        "k": int(r.k[best]),
                        "k_over_t2": float(ratio[best]),
                        "success_gaussian": ck.averaging_success(
                            float(r.k[best]), float(r.t[best]), variance
                        ),
                    }
                )
            if exact is not None:
                truth_counts = exact[name].counts[level][1].toarray()
                real = truth_counts > 0
                attack["cells"] += int(real.sum())
                attack["published_exact"] += int((published == truth_counts)[real].sum())
                attack["averaged_exact"] += int((np.rint(r.estimate) == truth_counts)[real].sum())
    every = np.concatenate(ratios) if ratios else np.zeros(0)
    out: dict[str, Any] = {
        "spsn": params.spsn,
        "noise_variance": variance,
        "statistics": int(len(every)),
        "k_over_t2_quantiles": {
            str(q): float(np.quantile(every, q)) for q in (0.0, 0.01, 0.1, 0.5, 0.9, 1.0)
        }
        if len(every)
        else {},
        "most_exposed": sorted(exposed, key=lambda e: e["k_over_t2"])[:10],
    }
    if exact is not None:
        cells = max(attack["cells"], 1)
        out["attack"] = {
            **attack,
            "published_exact_share": attack["published_exact"] / cells,
            "averaged_exact_share": attack["averaged_exact"] / cells,
        }
    return out


def repeated_queries(
    population: Records,
    params: CellKeyParameters,
    table: AnyPTable,
    runs: int,
    rng: np.random.Generator,
    tables: tuple[str, ...] = ("P12",),
) -> dict[str, Any]:
    """The averaging attack on repeated queries (Bach's paper, §2.4): the same tables requested
    ``runs`` times from a table builder, averaged per cell. Without SPSN each answer carries
    fresh noise and the average converges to the truth; with SPSN every answer is the same.
    Evaluation only (it needs the population to simulate the table builder)."""
    from sdclab.protection import cellkey

    truth = tabulate(population, list(tables))
    total: dict[str, npt.NDArray[np.float64]] = {}
    key_space = params.resolved_key_space(table)
    people: Any = population  # record keys go on any census's records (the US type names them)
    keyed = (
        people if cellkey.has_keys(people) else cellkey.assign_record_keys(people, key_space, rng)
    )
    counted = cellkey.keyed_tables(keyed, list(tables), key_space)
    first: dict[str, npt.NDArray[np.float64]] = {}
    for run in range(runs):
        asked = counted if params.spsn else cellkey.independent_keys(counted, key_space, rng)
        out = cellkey.perturb(asked, table, key_space, params.threshold)
        for name, tc in out.items():
            for level, (_, matrix) in tc.counts.items():
                dense = matrix.toarray().astype(float)
                total[f"{name}/{level}"] = total.get(f"{name}/{level}", 0) + dense
                if run == 0:
                    first[f"{name}/{level}"] = dense
    cells = single = averaged = 0
    for name in tables:
        for level, (_, matrix) in truth[name].counts.items():
            true = matrix.toarray()
            real = true > 0
            cells += int(real.sum())
            single += int((first[f"{name}/{level}"] == true)[real].sum())
            averaged += int((np.rint(total[f"{name}/{level}"] / runs) == true)[real].sum())
    return {
        "spsn": params.spsn,
        "runs": runs,
        "tables": list(tables),
        "cells": cells,
        "one_answer_exact_share": single / max(cells, 1),
        "averaged_exact_share": averaged / max(cells, 1),
    }


DESIGN_BOUNDS = tuple(range(1, 11))
DESIGN_VARIANCES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0)
"""The (D, V) grid of the design table (V ≤ D(D+1)/3, the uniform limit)."""


def design_grid(tuples: int, k_over_t2: float | None) -> dict[str, Any]:
    """How to choose (D, V) for a release like this one (Bach's paper, Figs. 1–2, §3.3): per
    (D, V) the per-tuple p1 and the bound-disclosure risk over ``tuples`` 3-tuples (independence
    model,
    max-entropy symmetry row), whether it stays under the 0.68 heuristic, and the Gaussian
    averaging success for the most exposed statistic (its k/t²)."""

    def pmf(bound: int, variance: float) -> tuple[IntArray, npt.NDArray[np.float64]]:
        return np.arange(-bound, bound + 1), symmetry_row(bound, variance)

    grid = ck.p1_grid(pmf, DESIGN_BOUNDS, DESIGN_VARIANCES, max(tuples, 1))
    for row in grid:
        row["averaging_success"] = (
            None if not k_over_t2 else ck.averaging_success(k_over_t2, 1.0, row["variance"])
        )
    return {
        "tuples": tuples,
        "k_over_t2_most_exposed": k_over_t2,
        "averaging_min_variance": None
        if not k_over_t2
        else ck.variance_for_success(k_over_t2, 1.0, ck.RISK_CONSTRAINT),
        "grid": grid,
    }


REPEATED_RUNS = 50
"""Answers per query in the repeated-query averaging attack."""


def ckm_risk(
    release: Release, truth: Records | None = None, *, seed: int | None = 0
) -> dict[str, Any]:
    """All release-level analyses of a cell key release, on the tables its census offers
    (:func:`risk_scope`). With the truth, the attacks are scored (evaluation only) and the
    repeated-query attack is simulated with and without SPSN. The cell key mechanism offers it
    as its risk analysis (``Mechanism.risk_analysis``)."""
    params = CellKeyParameters.model_validate(
        release.parameters, context={"census": release.mechanism_census}
    )
    table = published_ptable(release, params)
    scope = risk_scope(release)
    out: dict[str, Any] = {}
    if scope.us:
        tuples = usable_tuples(release, params)
        out["bound_disclosure"] = bound_disclosure(tuples, params, table)
        out["pinned"] = pinned_counts(tuples, release, table, truth)
        three = out["bound_disclosure"]["tuples_present"]
    else:
        groups = [usable_tuples(release, params, c, scope.tuple_tables) for c in scope.children]
        out["bound_disclosure"] = bound_disclosure_of(groups, params, table)
        out["pinned"] = pinned_of(groups, release, table, truth, scope.tuple_tables)
        three = sum(len(g.values) for g in groups if g.members.shape[1] == 3)
    out["averaging"] = averaging(release, params, table, truth, scope.targets, list(scope.tables))
    exposed = out["averaging"]["most_exposed"]
    out["design"] = design_grid(three, exposed[0]["k_over_t2"] if exposed else None)
    if truth is not None and params.swap != "none":
        out["repeated_queries"] = (
            f"{NA}a table builder would answer from the swapped records, which the analysis "
            "does not simulate (the release's swap drew from its own stream)"
        )
    elif truth is not None:
        rng = np.random.default_rng(seed)
        out["repeated_queries"] = [
            repeated_queries(
                truth,
                params.model_copy(update={"spsn": spsn}),
                table,
                REPEATED_RUNS,
                rng,
                scope.repeated,
            )
            for spsn in (True, False)
        ]
        out["evaluation_only"] = [
            "pinned.pinned_correct",
            "averaging.attack",
            "repeated_queries",
        ]
    if not scope.us:
        out["scope"] = scope.summary()
    return out


@cellkey.MECHANISM.define("risk_analysis")
def risk_analysis(release: Release, truth: Records | None) -> dict[str, Any]:
    """The cell key method's own risk analyses of a release (:func:`ckm_risk`), on any census:
    its tables, levels and the relations among their cells come from the census."""
    return ckm_risk(release, truth)
