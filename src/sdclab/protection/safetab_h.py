"""SafeTab-H: household tables by detailed race and ethnicity, with adaptive detail, under zCDP.

The 2020 Detailed DHC-B (the SafeTab-H paper, Sexton et al. 2025, arXiv 2505.03072;
docs/safetab_h.md). A *population group* is a geounit
(nation, state, county, tract) and a characteristic iteration — a race group "alone", "alone or in
any combination", or an ethnicity group — at an iteration level (1 regional, 2 detailed). A
household belongs to the iterations of its householder's detailed codes: the "alone" iterations
common to all its race codes, the "alone or in any combination" iterations of any of them, and its
Hispanic origin's ethnicity iterations.

For every group present in the T01001 person totals, the group's size selects how much detail its
household-type table T03 (4 variants) and tenure table T04 (2 variants) get; the measured cells of
the chosen variant get discrete Gaussian noise σ² = s/(2ρ) (a household is in at most s groups of
a level, its stability, computed from the iteration mapping), and the coarser cells of the
variant are derived by summation. T01001 is an input: exact (an assumption the card states) or
noisy from a simple SafeTab-P-like release whose budget the card adds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab import accounting, noise, schema
from sdclab.accounting import SpecCard
from sdclab.arrays import IntArray
from sdclab.digest import frames_digest
from sdclab.errors import InputError
from sdclab.fileio import read_toml
from sdclab.geography import Geography, geoid_strings, parse_geoids
from sdclab.population import Population
from sdclab.privacy import Guarantee, Invariant, Loss, Number, Relation, group
from sdclab.protection import audit_plans
from sdclab.protection.base import (
    Mechanism,
    NoisePublication,
    Parameters,
    Unit,
    check_budget_range,
    decimal_text,
)
from sdclab.protection.checks import gaussian_reach
from sdclab.release import Release, frame_problem, geoid_problem
from sdclab.results import NotMeasured, as_json
from sdclab.tables.catalog import Dimension, Part, TableDef
from sdclab.tables.tabulate import level_step, record_cells

REGION_TYPES = {"USA": "nation", "STATE": "state", "COUNTY": "county", "TRACT": "tract"}
"""SafeTab-H's region types and the geography levels they are here (no places or AIANNH areas)."""
MAX_RACE_CODES = schema.DETAILED_RACE_MAX

# The measured cells of every variant (cell code → HOUSEHOLD_TYPE or tenure codes) and the
# derived cells (cell code → measured or derived cells summed); docs/safetab_h.md, *Variants*.
T3_VARIANTS: tuple[dict[int, tuple[int, ...]], ...] = (
    {0: (1, 2, 3, 4, 5)},
    {1: (1, 2, 3), 6: (4, 5)},
    {2: (1,), 3: (2, 3), 7: (4,), 8: (5,)},
    {2: (1,), 4: (2,), 5: (3,), 7: (4,), 8: (5,)},
)
T3_DERIVED: tuple[dict[int, tuple[int, ...]], ...] = (
    {},
    {0: (1, 6)},
    {1: (2, 3), 6: (7, 8), 0: (1, 6)},
    {3: (4, 5), 1: (2, 3), 6: (7, 8), 0: (1, 6)},
)
T4_VARIANTS: tuple[dict[int, tuple[int, ...]], ...] = ({0: (1, 2, 3)}, {1: (1,), 2: (2,), 3: (3,)})
T4_DERIVED: tuple[dict[int, tuple[int, ...]], ...] = ({}, {0: (1, 2, 3)})
"""Tenure here has no code 4 (occupied without payment of rent), so T04002's renter cell is {3}."""

PRODUCTION_THRESHOLDS: dict[tuple[str, int], dict[str, tuple[int, ...]]] = {
    ("USA", 1): {"T03": (4971, 19971, 149971), "T04": (4971,)},
    ("STATE", 1): {"T03": (4971, 19971, 149971), "T04": (4971,)},
    ("COUNTY", 1): {"T03": (4971, 19971, 149970), "T04": (4971,)},
    ("TRACT", 1): {"T03": (4971, 19971, 149970), "T04": (4971,)},
    ("USA", 2): {"T03": (471, 971, 6971), "T04": (471,)},
    ("STATE", 2): {"T03": (471, 971, 6971), "T04": (471,)},
    ("COUNTY", 2): {"T03": (971, 4971, 19971), "T04": (971,)},
    ("TRACT", 2): {"T03": (971, 4971, 19971), "T04": (971,)},
}
"""Production thresholds (NMFv5 config): T03 variant 3/2/1 at or above t3/t2/t1, T04 variant 1 at
or above u1, by region type and iteration level."""


MAJOR_RACE_NAMES = {
    "white": "White",
    "black": "Black or African American",
    "aian": "American Indian and Alaska Native",
    "asian": "Asian",
    "nhopi": "Native Hawaiian and Other Pacific Islander",
    "sor": "Some Other Race",
}


@dataclass(frozen=True)
class Group:
    """A race or ethnicity group of the iteration mapping: the detailed codes that map to it."""

    code: str
    name: str
    level: int
    kind: Literal["race", "ethnicity"]
    codes: tuple[int, ...]


def default_groups() -> tuple[Group, ...]:
    """Level 1: the six major races and Hispanic or Latino; level 2: every detailed race code
    (except the "no detail" codes) and every Hispanic origin."""
    groups = []
    for i, (major, codes) in enumerate(schema.DETAILED_RACE.items()):
        groups.append(
            Group(f"R{i + 1}", MAJOR_RACE_NAMES[major], 1, "race", tuple(c.code for c in codes))
        )
    hispanic = tuple(c.code for c in schema.HISPANIC_ORIGINS)
    groups.append(Group("H", "Hispanic or Latino", 1, "ethnicity", hispanic))
    for codes in schema.DETAILED_RACE.values():
        groups += [
            Group(f"D{c.code}", c.label, 2, "race", (c.code,))
            for c in codes
            if c.code % schema.DETAILED_RACE_BASE
        ]
    groups += [
        Group(f"E{c.code}", c.label, 2, "ethnicity", (c.code,)) for c in schema.HISPANIC_ORIGINS
    ]
    return tuple(groups)


def load_groups(path: Path) -> tuple[Group, ...]:
    """Groups from a TOML iteration file: ``[[group]]`` tables with code, name, level (1 or 2),
    kind ("race" or "ethnicity") and codes (detailed race codes or Hispanic origin codes)."""
    return parse_groups(read_toml(path, "iteration file").get("group", []), str(path))


def parse_groups(entries: Any, where: str) -> tuple[Group, ...]:
    """Groups from the ``[[group]]`` entries of an iteration file (or of :func:`groups_data`)."""
    if not isinstance(entries, list):
        raise InputError(f"{where}: expected a list of [[group]] entries")
    known_race = set(schema.DETAILED_RACE_LABELS)
    known_origin = {c.code for c in schema.HISPANIC_ORIGINS}
    groups = []
    for n, entry in enumerate(entries, start=1):
        try:
            group = Group(
                str(entry["code"]),
                str(entry["name"]),
                _whole(entry["level"]),
                entry["kind"],
                tuple(_whole(c) for c in entry["codes"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"{where}: group {n}: expected code, name, level, kind, codes ({exc})"
            ) from None
        if group.level not in (1, 2) or group.kind not in ("race", "ethnicity"):
            raise InputError(
                f"{where}: group {n} ({group.code}): level must be 1 or 2 and kind race or "
                "ethnicity"
            )
        unknown = set(group.codes) - (known_race if group.kind == "race" else known_origin)
        if unknown:
            raise InputError(f"{where}: group {n} ({group.code}): unknown codes {sorted(unknown)}")
        groups.append(group)
    if not groups:
        raise InputError(f"{where}: no [[group]] entries")
    if len({g.code for g in groups}) != len(groups):
        raise InputError(f"{where}: group codes must be unique")
    return tuple(groups)


def _whole(value: Any) -> int:
    """A whole number of an entry: an integer, its text or a number equal to one (2.0); 1.5 or
    true is an error, not a count rounded towards zero."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal | Fraction):
        raise TypeError(f"{value!r} is not a whole number")
    if isinstance(value, int | str):
        return int(value)
    try:
        whole = int(value)
    except (OverflowError, ValueError):
        raise ValueError(f"{value!r} is not a whole number") from None
    if whole != value:
        raise ValueError(f"{value!r} is not a whole number")
    return whole


def load_thresholds(path: Path) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
    """Thresholds from a TOML file: one ``[[threshold]]`` per region type (USA, STATE, COUNTY,
    TRACT) and iteration level (1, 2) with ``T03`` (three increasing counts) and ``T04`` (one)."""
    return parse_thresholds(read_toml(path, "thresholds file").get("threshold", []), str(path))


def parse_thresholds(entries: Any, where: str) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
    """Thresholds from the ``[[threshold]]`` entries of a thresholds file (or of
    :func:`thresholds_data`)."""
    if not isinstance(entries, list):
        raise InputError(f"{where}: expected a list of [[threshold]] entries")
    table: dict[tuple[str, int], dict[str, tuple[int, ...]]] = {}
    for n, entry in enumerate(entries, start=1):
        try:
            key = (str(entry["region"]), _whole(entry["level"]))
            t3, t4 = tuple(_whole(v) for v in entry["T03"]), tuple(_whole(v) for v in entry["T04"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"{where}: threshold {n}: expected region, level, T03, T04 ({exc})"
            ) from None
        if key[0] not in REGION_TYPES or key[1] not in (1, 2):
            raise InputError(f"{where}: threshold {n}: unknown region {key[0]!r} or level {key[1]}")
        if len(t3) != 3 or len(t4) != 1 or list(t3) != sorted(t3) or min(t3 + t4) < 0:
            raise InputError(
                f"{where}: threshold {n}: T03 needs three increasing counts and T04 one, all ≥ 0"
            )
        table[key] = {"T03": t3, "T04": t4}
    missing = set(PRODUCTION_THRESHOLDS) - set(table)
    if missing:
        shown = ", ".join(f"{r} level {lv}" for r, lv in sorted(missing))
        raise InputError(f"{where}: no thresholds for {shown}")
    return table


def groups_data(groups: tuple[Group, ...]) -> list[dict[str, Any]]:
    """Groups as the ``[[group]]`` entries of an iteration file."""
    return [
        {"code": g.code, "name": g.name, "level": g.level, "kind": g.kind, "codes": list(g.codes)}
        for g in groups
    ]


def thresholds_data(
    table: dict[tuple[str, int], dict[str, tuple[int, ...]]],
) -> list[dict[str, Any]]:
    """Thresholds as the ``[[threshold]]`` entries of a thresholds file."""
    return [
        {"region": region, "level": level, **{t: list(v) for t, v in cuts.items()}}
        for (region, level), cuts in table.items()
    ]


def stability(groups: tuple[Group, ...], level: int, max_codes: int = MAX_RACE_CODES) -> int:
    """s = h_r·max(2, r) + h_e: the most population groups of a level one household is in, with
    h_r (h_e) the most race (ethnicity) groups one code maps to and r the codes per person."""

    def most(kind: str) -> int:
        counts: dict[int, int] = {}
        for g in groups:
            if g.level == level and g.kind == kind:
                for c in set(g.codes):
                    counts[c] = counts.get(c, 0) + 1
        return max(counts.values(), default=0)

    return most("race") * max(2, max_codes) + most("ethnicity")


def margin_of_error(rho: Fraction, s: int) -> int:
    """95% margin of error of a measured cell: the smallest integer E with P(|X| ≤ E) ≥ 95% for
    the exact discrete Gaussian X of variance s/(2ρ)."""
    return accounting.gaussian_margin_of_error(Fraction(s) / (2 * Fraction(rho)))


def margin_coverage(rho: Fraction, s: int) -> float:
    """P(|X| ≤ margin_of_error(ρ, s)): the exact coverage of the 95% margin of error."""
    sigma2 = Fraction(s) / (2 * Fraction(rho))
    return 1 - accounting.gaussian_tail(sigma2, accounting.gaussian_margin_of_error(sigma2))


def rho_for_margin(moe: int, s: int) -> float:
    """The smallest ρ whose measured cells have a 95% margin of error of at most ``moe`` (the
    exact inverse of :func:`margin_of_error`): ρ = s/(2σ²) for the largest σ² with
    P(|X| ≤ moe) ≥ 95%."""
    return s / (2 * accounting.gaussian_variance_for_margin(moe))


class SafeTabHParameters(Parameters):
    """Budgets per iteration level and region, the iteration file, stability, T01001, clamp."""

    rho_regional: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("0.006915"), ge=0)
    """budget of each of T03 and T04 for level 1 (regional) iterations, at every region type
    (0: not measured)"""
    rho_detailed_national: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("1.9208"), ge=0)
    """budget of each of T03 and T04 for level 2 (detailed) iterations at the nation and the
    states (0: not measured)"""
    rho_detailed_local: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("0.142869"), ge=0)
    """budget of each of T03 and T04 for level 2 (detailed) iterations at counties and
    tracts (0: not measured)"""
    stability: Annotated[int, Unit("groups")] = Field(9, ge=1, le=1000)
    """s the budget is spent for: the most groups of a level one household may be in (a
    mapping with a larger s is refused)"""
    iterations: str | list[dict[str, Any]] = "default"
    """"default" (iterations from the code lists) or a TOML iteration file (in a release:
    its [[group]] entries)"""
    t01001: Literal["exact", "noisy"] = "exact"
    """exact: the true group person totals choose the tables (an assumption the card
    states); noisy: measured here with t01001_rho"""
    t01001_rho: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("1"), gt=0)
    """t01001=noisy only: the total budget of the noisy T01001, added to the card"""
    clamp: bool = False
    """true: set negative measured cells to 0; false: keep them (as production did)"""
    thresholds: str | list[dict[str, Any]] = "production"
    """"production" (the production thresholds per region type and level) or a TOML file of
    [[threshold]] entries (in a release: them)"""

    FILE_SETTINGS: ClassVar[dict[str, tuple[str, ...]]] = {
        "iterations": ("default",),
        "thresholds": ("production",),
    }

    def threshold_table(self) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
        if isinstance(self.thresholds, list):
            return parse_thresholds(self.thresholds, "parameter thresholds")
        if self.thresholds == "production":
            return PRODUCTION_THRESHOLDS
        return load_thresholds(Path(self.thresholds))

    def groups(self) -> tuple[Group, ...]:
        if isinstance(self.iterations, list):
            return parse_groups(self.iterations, "parameter iterations")
        return (
            default_groups() if self.iterations == "default" else load_groups(Path(self.iterations))
        )

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if self.iterations != "default":
            data["iterations"] = groups_data(self.groups())
        if self.thresholds != "production":
            data["thresholds"] = thresholds_data(self.threshold_table())
        return data

    def rho(self, region: str, level: int) -> Fraction:
        """ρ of each of T03 and T04 at a region type and iteration level."""
        if level == 1:
            return Fraction(self.rho_regional)
        national = region in ("USA", "STATE")
        return Fraction(self.rho_detailed_national if national else self.rho_detailed_local)

    def t01001_share(self) -> Fraction:
        """ρ of each of noisy T01001's measurements: the budget split evenly over the two
        iteration levels and the region types."""
        return Fraction(self.t01001_rho) / (2 * len(REGION_TYPES))

    def total_rho(self) -> Fraction:
        """ρ of the household tables under add/remove neighbours (T03 and T04 everywhere)."""
        return sum((2 * self.rho(r, lv) for r in REGION_TYPES for lv in (1, 2)), Fraction(0))

    @model_validator(mode="after")
    def _within_sampler_range(self) -> SafeTabHParameters:
        """A ρ of 0 leaves its region types and level unmeasured (the card lists no row for
        them); every other ρ must give noise the exact sampler supports."""
        if self.t01001 == "exact" and self.t01001_rho != 1:
            raise ValueError(
                f"t01001_rho={self.t01001_rho} applies only with t01001=noisy (with t01001=exact "
                "T01001 is exact input and no budget is spent on it)"
            )
        groups = self.groups()
        self.threshold_table()  # bad thresholds are an error here, before any data is read
        if not self.total_rho():
            raise ValueError("every rho is 0: no household table would be measured")
        for name, level, region in (
            ("rho_regional", 1, "USA"),
            ("rho_detailed_national", 2, "USA"),
            ("rho_detailed_local", 2, "TRACT"),
        ):
            rho = self.rho(region, level)
            if rho:
                variance = Fraction(stability(groups, level)) / (2 * rho)
                given = getattr(self, name)
                check_budget_range(name, given, [variance], noise.SIGMA2_RANGE, "variance")
        if self.t01001 == "noisy":
            share = self.t01001_share()
            variances = [Fraction(stability(groups, lv)) / (2 * share) for lv in (1, 2)]
            check_budget_range(
                "t01001_rho", self.t01001_rho, variances, noise.SIGMA2_RANGE, "variance"
            )
        return self


MECHANISM = Mechanism(
    "safetab_h",
    "SafeTab-H: household tables by detailed race and ethnicity (zCDP, adaptive detail)",
    SafeTabHParameters,
)


# ---------------------------------------------------------------------------------------------
# Membership: records × iterations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Iterations:
    """The iterations of one level: codes, names, and a records × iterations 0/1 matrix."""

    codes: list[str]
    names: list[str]
    membership: sp.csr_matrix


def iterations(
    groups: tuple[Group, ...], level: int, race: npt.NDArray[np.int16], origin: IntArray
) -> Iterations:
    """Which iterations of ``level`` each record (rows of ``race``: its detailed codes, 0 for an
    empty slot; ``origin``: its Hispanic origin) is in."""
    race_groups = [g for g in groups if g.level == level and g.kind == "race"]
    ethnic = [g for g in groups if g.level == level and g.kind == "ethnicity"]
    n = len(race)
    codes, names, columns = [], [], []
    if race_groups:
        top = int(race.max(initial=0)) + 1
        code_to_group = sp.lil_matrix((top, len(race_groups)), dtype=np.int64)
        for j, g in enumerate(race_groups):
            for c in g.codes:
                if c < top:
                    code_to_group[c, j] = 1
        mapping = code_to_group.tocsr()
        slots = race.astype(np.int64)
        filled = slots > 0
        rows = np.repeat(np.arange(n), filled.sum(axis=1))
        hits = (
            sp.csr_matrix(
                (np.ones(int(filled.sum()), dtype=np.int64), (rows, slots[filled])), shape=(n, top)
            )
            @ mapping
        )  # records × groups: how many of the record's codes map to each group
        n_codes = filled.sum(axis=1)
        hits = hits.tocoo()
        alone = hits.data == n_codes[hits.row]
        for kind, keep, suffix in (("alone", alone, "A"), ("combination", hits.data > 0, "C")):
            columns.append(
                sp.csr_matrix(
                    (np.ones(int(keep.sum()), dtype=np.int64), (hits.row[keep], hits.col[keep])),
                    shape=(n, len(race_groups)),
                )
            )
            codes += [f"{g.code}{suffix}" for g in race_groups]
            names += [
                f"{g.name} {'alone' if kind == 'alone' else 'alone or in any combination'}"
                for g in race_groups
            ]
    if ethnic:
        top = max(int(origin.max(initial=0)), max(max(g.codes) for g in ethnic)) + 1
        origin_to_group = np.zeros((top, len(ethnic)), dtype=np.int64)
        for j, g in enumerate(ethnic):
            origin_to_group[list(g.codes), j] = 1
        columns.append(sp.csr_matrix(origin_to_group[origin]))
        codes += [g.code for g in ethnic]
        names += [g.name for g in ethnic]
    membership = sp.hstack(columns, format="csr") if columns else sp.csr_matrix((n, 0))
    return Iterations(codes, names, membership)


def person_codes(population: Population) -> tuple[npt.NDArray[np.int16], IntArray]:
    """Every person's detailed race codes and Hispanic origin."""
    if not population.has_detailed_race:
        raise InputError(
            "safetab_h needs detailed race and ethnicity codes (persons columns race_code1…"
            "race_code8 and hispanic_origin); `sdclab synth` writes them"
        )
    origin = population.persons.get_column("hispanic_origin").to_numpy().astype(np.int64)
    return population.race_codes, origin


# ---------------------------------------------------------------------------------------------
# The tables: every variant of T03 and T04 a linear query over the household schema
# ---------------------------------------------------------------------------------------------

CELL_LABELS = {
    "T03": {
        0: "all households",
        1: "family households",
        2: "married-couple family",
        3: "other family",
        4: "other family, male householder, no spouse present",
        5: "other family, female householder, no spouse present",
        6: "non-family households",
        7: "householder living alone",
        8: "householder not living alone",
    },
    "T04": {0: "all households", **{c: schema.TENURE_LABELS[c] for c in (1, 2, 3)}},
}
"""The label of every cell code of T03 and T04 (docs/safetab_h.md, *Variants*)."""


@dataclass(frozen=True)
class Variant:
    """One variant of T03 or T04 (T03001 … T04002) as a linear query over
    :data:`sdclab.schema.HOUSEHOLD`: one 0/1 query row per published cell, measured and derived,
    in cell-code order. Each row is a Kronecker product — the cell's HOUSEHOLD_TYPE codes × every
    tenure (T03), or every household type × the cell's tenure codes (T04) — within households.
    A group's cells are ``histogram @ table.query.T``."""

    table: TableDef
    """The variant as a table: name (T03001 …), cells and query matrix."""
    cells: tuple[int, ...]
    """The published cell code of every query row."""
    measured: tuple[bool, ...]
    """Whether each cell is measured (noisy) or derived (a sum of measured cells)."""

    @property
    def name(self) -> str:
        return self.table.name

    @cached_property
    def measured_query(self) -> sp.csr_matrix:
        """The query rows of the measured cells, in cell-code order (the order of the draws)."""
        return self.table.query[np.flatnonzero(self.measured)]

    @cached_property
    def derivation(self) -> sp.csr_matrix:
        """Cells × measured cells, 0/1: the measured cells every cell sums (itself for a measured
        cell), read from the query rows. The measured cells partition the households, so a cell
        is exactly the sum of the measured cells inside it."""
        q, m = self.table.query, self.measured_query
        size = np.asarray(m.sum(axis=1)).ravel()
        inside = sp.csr_matrix((q @ m.T).toarray() == size[None, :], dtype=np.int64)
        if (inside @ m != q).nnz:
            raise AssertionError(f"{self.name}: a cell is not a sum of measured cells")
        return inside


def _variant(
    table: str, k: int, measured: dict[int, tuple[int, ...]], derived: dict[int, tuple[int, ...]]
) -> Variant:
    """Variant ``k`` of ``table`` from its cell definitions: the measured cells' codes, each
    derived cell the sum of the cells it lists."""
    if list(measured) != sorted(measured):
        raise AssertionError(f"{table} variant {k + 1}: measured cells out of order (the draws')")
    attribute = schema.HOUSEHOLD_TYPE if table == "T03" else schema.TENURE
    members = {
        cell: np.isin(attribute.codes, codes).astype(np.int8) for cell, codes in measured.items()
    }
    for cell, parts in derived.items():  # parts precede the cells they are summed into
        members[cell] = np.sum([members[c] for c in parts], axis=0).astype(np.int8)
    cells = tuple(sorted(members))
    membership = np.array([members[c] for c in cells], dtype=np.int8)
    if membership.max() > 1:
        raise AssertionError(f"{table} variant {k + 1}: a derived cell sums overlapping cells")
    labels = tuple(CELL_LABELS[table][c] for c in cells)
    households = {"household_type": schema.HOUSEHOLD_TYPE.codes > 0}
    title = "Household type" if table == "T03" else "Tenure"
    definition = TableDef(
        f"{table}00{k + 1}",
        f"{title} (variant {k + 1})",
        "households",
        schema.HOUSEHOLD,
        (Part((Dimension(attribute.name, labels, membership),), households),),
        top="nation",
        bottom="tract",
    )
    return Variant(definition, cells, tuple(c in measured for c in cells))


VARIANTS: dict[str, tuple[Variant, ...]] = {
    table: tuple(
        _variant(table, k, m, d) for k, (m, d) in enumerate(zip(measured, derived, strict=True))
    )
    for table, (measured, derived) in {
        "T03": (T3_VARIANTS, T3_DERIVED),
        "T04": (T4_VARIANTS, T4_DERIVED),
    }.items()
}
"""The variants of T03 (4) and T04 (2), in order: a group whose size reaches k thresholds gets
variant k."""
VARIANT_TABLES: dict[str, Variant] = {v.name: v for vs in VARIANTS.values() for v in vs}
"""Every variant by its published table name (T03001 … T04002)."""


# ---------------------------------------------------------------------------------------------
# The histograms of the population groups
# ---------------------------------------------------------------------------------------------


def variant(counts: npt.NDArray[np.float64], thresholds: tuple[int, ...]) -> IntArray:
    """The variant index each group size selects: the number of thresholds it reaches."""
    return (counts[..., None] >= np.asarray(thresholds)).sum(axis=-1).astype(np.int64)


@dataclass(frozen=True)
class GroupHistograms:
    """The population groups of one iteration level at one region type: T01001 and the groups'
    household histograms, from which every variant's true cells are ``households @ query.T``."""

    level: int
    region: str
    geo_level: str
    codes: list[str]
    """The level's iteration codes."""
    t01001: IntArray
    """Persons of every group: geounits × iterations."""
    households: sp.csr_matrix
    """Households of every group over :data:`sdclab.schema.HOUSEHOLD`: one row per group,
    geounit-major (row ``geounit · len(codes) + iteration``)."""

    def cells(self, v: Variant, rows: npt.NDArray[np.intp]) -> IntArray:
        """The true cells of ``v`` for the groups at ``rows``: groups × cells."""
        return np.asarray((self.households[rows] @ v.table.query.T).toarray(), dtype=np.int64)


CODE_BITS = 13
"""Detailed race codes are below 2¹³ (and Hispanic origins below 2⁸): four codes and an origin
pack into one int64, the other four into a second."""


def combinations(
    race: npt.NDArray[np.int16], origin: IntArray
) -> tuple[IntArray, npt.NDArray[np.int16], IntArray]:
    """The distinct (race codes, origin) combinations of the records: each record's combination,
    and the combinations' codes and origins. Few thousand combinations stand for a million
    records, so iterations are worked out per combination."""
    codes = race.astype(np.int64)
    low = origin.astype(np.int64)
    high = np.zeros(len(codes), dtype=np.int64)
    for slot in range(4):
        low = (low << CODE_BITS) | codes[:, slot]
        high = (high << CODE_BITS) | codes[:, slot + 4]
    frame = pl.DataFrame({"low": low, "high": high})
    unique = frame.unique(maintain_order=True).with_row_index("id")
    ids = frame.join(unique, on=["low", "high"], how="left", maintain_order="left")["id"]
    packed = unique.select("low", "high").to_numpy()
    mask = (1 << CODE_BITS) - 1
    shifts = CODE_BITS * np.arange(3, -1, -1)
    race_unique = np.concatenate(
        [(packed[:, [0]] >> shifts) & mask, (packed[:, [1]] >> shifts) & mask], axis=1
    ).astype(np.int16)
    origin_unique = (packed[:, 0] >> (4 * CODE_BITS)).astype(np.int64)
    return ids.to_numpy().astype(np.int64), race_unique, origin_unique


@dataclass(frozen=True)
class _Records:
    """Records (persons, or households by their householder's codes) counted once by tract ×
    combination of codes × domain cell: a tracts × (combinations · cells) matrix."""

    by_tract: sp.csr_matrix
    race: npt.NDArray[np.int16]
    origin: IntArray
    n_cells: int

    @classmethod
    def count(
        cls,
        tract: IntArray,
        race: npt.NDArray[np.int16],
        origin: IntArray,
        cell: IntArray,
        n_tracts: int,
        n_cells: int,
    ) -> _Records:
        ids, race_unique, origin_unique = combinations(race, origin)
        by_tract = sp.csr_matrix(
            (np.ones(len(ids), dtype=np.int64), (tract, ids * n_cells + cell)),
            shape=(n_tracts, len(race_unique) * n_cells),
        )
        return cls(by_tract, race_unique, origin_unique, n_cells)

    def by_group(self, membership: sp.csr_matrix, geography: Geography) -> dict[str, sp.csr_matrix]:
        """Counts by population group and cell at every region's level, geounits × (iterations ·
        cells): combinations map to their iterations (``membership ⊗ I``), tracts are summed up
        the geography."""
        identity = sp.identity(self.n_cells, dtype=np.int64, format="csr")
        out = {"tract": (self.by_tract @ sp.kron(membership, identity, format="csr")).tocsr()}
        for lv, below in (("county", "tract"), ("state", "county"), ("nation", "state")):
            out[lv] = (level_step(geography, lv) @ out[below]).tocsr()
        return out


def group_histograms(population: Population, groups: tuple[Group, ...]) -> list[GroupHistograms]:
    """The true counts behind every table SafeTab-H measures, for both iteration levels and every
    region type: persons (T01001) and households (over :data:`sdclab.schema.HOUSEHOLD`) counted
    once by tract, combination of codes and cell, combinations mapped to iterations, tracts summed
    up to the nation (sparse products, no loops over records)."""
    race, origin = person_codes(population)
    households = np.flatnonzero(population.household_type > 0)
    heads = population.householder_row[households]
    geography = population.geography
    tract = geography.units("tract")[1]
    n_tracts = geography.n_units("tract")
    persons = _Records.count(
        tract[population.person_block_index],
        race,
        origin,
        np.zeros(len(race), dtype=np.int64),
        n_tracts,
        1,
    )
    homes = _Records.count(
        tract[population.unit_block_index[households]],
        race[heads],
        origin[heads],
        record_cells(population, schema.HOUSEHOLD)[households],
        n_tracts,
        schema.HOUSEHOLD.size,
    )
    out = []
    for level in (1, 2):
        p_its = iterations(groups, level, persons.race, persons.origin)
        h_its = iterations(groups, level, homes.race, homes.origin)
        t01001 = persons.by_group(p_its.membership, geography)
        by_group = homes.by_group(h_its.membership, geography)
        n_its = len(p_its.codes)
        for region, geo_level in REGION_TYPES.items():
            n_geo = geography.n_units(geo_level)
            out.append(
                GroupHistograms(
                    level,
                    region,
                    geo_level,
                    p_its.codes,
                    t01001[geo_level].toarray(),
                    by_group[geo_level].reshape((n_geo * n_its, schema.HOUSEHOLD.size)).tocsr(),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------


@MECHANISM.define("protect")
def protect(population: Population, p: SafeTabHParameters, rng: np.random.Generator) -> Release:
    """Measure T03 and T04 of every population group present in T01001, at every region type and
    iteration level, with the variant its size selects."""
    groups = p.groups()
    for level in (1, 2):
        s = stability(groups, level)
        if s > p.stability:
            raise InputError(
                f"safetab_h: the iteration mapping gives stability {s} at level {level}, above the "
                f"{p.stability} the budget is spent for (set stability={s} or fix the mapping)"
            )
    thresholds = p.threshold_table()
    frames, totals = [], []
    for gh in group_histograms(population, groups):
        s = stability(groups, gh.level)
        t01001 = gh.t01001
        if p.t01001 == "noisy":
            share = p.t01001_share()
            t01001 = t01001 + noise.discrete_gaussian(Fraction(s) / (2 * share), t01001.shape, rng)
            totals.append(_group_frame(t01001, gh, population.geography))
        if not p.rho(gh.region, gh.level):
            continue  # a ρ of 0: this region type and level are not measured
        present = (t01001 > 0).ravel()
        sigma2 = Fraction(s) / (2 * p.rho(gh.region, gh.level))
        for table, variants in VARIANTS.items():
            cuts = thresholds[gh.region, gh.level][table]
            chosen = np.where(present, variant(t01001.astype(float).ravel(), cuts), -1)
            for k, v in enumerate(variants):
                where = np.flatnonzero(chosen == k)
                if not len(where):
                    continue
                measured = gh.households[where] @ v.measured_query.T
                noisy = measured.toarray().astype(np.int64) + np.column_stack(
                    [
                        noise.discrete_gaussian(sigma2, len(where), rng)
                        for _ in range(measured.shape[1])
                    ]
                )  # one draw per measured cell, in cell order
                if p.clamp:
                    noisy = np.maximum(noisy, 0)
                every = np.asarray(v.derivation @ noisy.T, dtype=np.int64).T
                frames.append(_variant_frame(every, v, where, gh, population))
    group_tables = pl.concat(frames) if frames else pl.DataFrame(schema=GROUP_SCHEMA)
    notes: dict[str, Any] = {
        "stability": {str(lv): stability(groups, lv) for lv in (1, 2)},
        "t01001": p.t01001,
        "groups_with_tables": int(
            group_tables.select("level", "geoid", "iteration").unique().height
        ),
    }
    return Release(
        mechanism="safetab_h",
        parameters=p.recorded(),
        card=card(p),
        tables={},
        randomness={},
        input_digest=frames_digest(population.persons, population.units),
        geography=population.geography,
        notes=notes,
        artifacts={
            GROUP_TABLES_ARTIFACT: group_tables,
            **({GROUP_TOTALS_ARTIFACT: pl.concat(totals)} if totals else {}),
        },
    )


def true_cells(population: Population, release: Release) -> pl.DataFrame:
    """The release's group tables with a ``true`` column: what each cell counts in the truth
    (evaluation only)."""
    group_tables = release.artifacts[GROUP_TABLES_ARTIFACT]
    p = SafeTabHParameters.model_validate(release.parameters)
    parts = []
    for gh in group_histograms(population, p.groups()):
        rows = group_tables.filter(
            (pl.col("level") == gh.geo_level) & (pl.col("iteration_level") == gh.level)
        )
        if not rows.height:
            continue
        codes = population.geography.codes(gh.geo_level)
        geo = np.searchsorted(codes, parse_geoids(rows["geoid"], gh.geo_level))
        iteration_codes = np.array(gh.codes)
        order = np.argsort(iteration_codes)
        it = order[np.searchsorted(iteration_codes[order], rows["iteration"].to_numpy())]
        group = geo * len(gh.codes) + it
        truth = np.zeros(rows.height, dtype=np.int64)
        tables = rows["table"].to_numpy()
        cells = rows["cell"].to_numpy()
        for name in np.unique(tables):
            mine = np.flatnonzero(tables == name)
            v = VARIANT_TABLES[str(name)]
            column = np.searchsorted(v.cells, cells[mine])
            truth[mine] = gh.cells(v, group[mine])[np.arange(len(mine)), column]
        parts.append(rows.with_columns(true=pl.Series(truth)))
    return pl.concat(parts)


GROUP_SCHEMA = {
    "level": pl.String,
    "geoid": pl.String,
    "iteration_level": pl.Int8,
    "iteration": pl.String,
    "table": pl.String,
    "cell": pl.Int8,
    "count": pl.Int64,
    "derived": pl.Boolean,
}
"""Columns of the published population-group tables."""
GROUP_TOTALS_SCHEMA = {
    "level": pl.String,
    "geoid": pl.String,
    "iteration_level": pl.Int8,
    "iteration": pl.String,
    "count": pl.Int64,
}
"""Columns of the published population-group totals (a noisy T01001)."""
GROUP_TABLES_ARTIFACT = "group_tables"
GROUP_TOTALS_ARTIFACT = "group_totals"


def _frame_check(
    columns: dict[str, Any], what: str
) -> Callable[[pl.DataFrame, Geography], str | None]:
    """The check of an artifact frame: ``columns`` with the kinds
    :func:`sdclab.release.frame_problem` checks, its geounits this release's."""
    kinds = {
        name: "string" if t == pl.String else "boolean" if t == pl.Boolean else "integer"
        for name, t in columns.items()
    }

    def check(frame: pl.DataFrame, geography: Geography) -> str | None:
        return frame_problem(frame, kinds) or geoid_problem(frame, geography)

    check.__doc__ = f"The {what}' columns and kinds; their geounits this release's."
    return check


check_group_tables = MECHANISM.publishes(
    GROUP_TABLES_ARTIFACT,
    "T03 and T04 of every population group present in T01001: level, geoid, "
    "iteration_level, iteration, table (its variant), cell, noisy count, derived",
)(_frame_check(GROUP_SCHEMA, "group tables"))
check_group_totals = MECHANISM.publishes(
    GROUP_TOTALS_ARTIFACT,
    "the noisy population-group totals (T01001, with t01001=noisy): level, geoid, "
    "iteration_level, iteration, count",
)(_frame_check(GROUP_TOTALS_SCHEMA, "group totals"))


def iteration_codes(groups: tuple[Group, ...], level: int) -> list[str]:
    """The iteration codes of ``level`` (as :func:`iterations` names them): every race group
    alone, then in combination, then every ethnicity group."""
    races = [g.code for g in groups if g.level == level and g.kind == "race"]
    ethnic = [g.code for g in groups if g.level == level and g.kind == "ethnicity"]
    return [f"{c}A" for c in races] + [f"{c}C" for c in races] + ethnic


@MECHANISM.define("check")
def check_release(release: Release, p: SafeTabHParameters) -> str | None:
    """Every published group cell is one the recorded parameters measure: a region type and
    iteration level with a budget, an iteration of the mapping, a cell of a variant (derived as
    the variant derives it), a count within the noise's reach of a count of 0 or more (at least
    0 when clamped); T01001's noisy totals are published with t01001=noisy, and only then."""
    totals = release.artifacts.get(GROUP_TOTALS_ARTIFACT)
    if (totals is not None) != (p.t01001 == "noisy"):
        return (
            f"artifacts/{GROUP_TOTALS_ARTIFACT}.parquet is published with t01001=noisy, and only "
            f"then; the recorded t01001 is {p.t01001}"
        )
    for name, frame in (
        (GROUP_TABLES_ARTIFACT, release.artifacts.get(GROUP_TABLES_ARTIFACT)),
        (GROUP_TOTALS_ARTIFACT, totals),
    ):
        problem = None if frame is None else _group_problem(frame, p, name == GROUP_TOTALS_ARTIFACT)
        if problem is not None:
            return f"artifacts/{name}.parquet: {problem}"
    return None


def _group_problem(frame: pl.DataFrame, p: SafeTabHParameters, totals: bool) -> str | None:
    """The first row of a group tables (or, with ``totals``, group totals) frame that the
    parameters ``p`` do not measure, or None."""
    groups = p.groups()
    region_of = {level: region for region, level in REGION_TYPES.items()}
    keys = ["level", "geoid", "iteration_level", "iteration"] + (
        [] if totals else ["table", "cell"]
    )
    if frame.select(pl.struct(keys).is_duplicated().any()).item():
        return f"a ({', '.join(keys)}) appears more than once"
    for row in frame.select("level", "iteration_level").unique().iter_rows(named=True):
        level, it_level = row["level"], row["iteration_level"]
        if level not in region_of or it_level not in (1, 2):
            return f"level {level!r}, iteration level {it_level} is not one SafeTab-H publishes"
        if not totals and not p.rho(region_of[level], it_level):
            return f"{level} at iteration level {it_level} has no budget (rho 0): nothing measured"
        part = frame.filter((pl.col("level") == level) & (pl.col("iteration_level") == it_level))
        unknown = part.filter(~pl.col("iteration").is_in(iteration_codes(groups, it_level)))
        if unknown.height:
            return f"iteration {unknown['iteration'][0]!r} is not one of level {it_level}"
        share = p.t01001_share() if totals else p.rho(region_of[level], it_level)
        reach = gaussian_reach(float(Fraction(stability(groups, it_level)) / (2 * share)))
        problem = (
            _count_problem(part, 1, reach, p.clamp and not totals)
            if totals
            else _cells_problem(part, reach, p.clamp)
        )
        if problem is not None:
            return problem
    return None


def _cells_problem(part: pl.DataFrame, reach: float, clamp: bool) -> str | None:
    """The first group cell that is no cell of its variant, is derived where the variant
    measures it (or the reverse), or lies beyond the reach of its noise."""
    for name, rows in part.group_by("table", maintain_order=True):
        variant = VARIANT_TABLES.get(str(name[0]))
        if variant is None:
            return f"table {name[0]!r} is not a variant of T03 or T04 ({', '.join(VARIANT_TABLES)})"
        unknown = rows.filter(~pl.col("cell").is_in(list(variant.cells)))
        if unknown.height:
            return f"cell {unknown['cell'][0]} is not one of {variant.name}'s {list(variant.cells)}"
        summed = np.asarray(variant.derivation.sum(axis=1)).ravel()
        index = np.searchsorted(np.array(variant.cells), rows["cell"].to_numpy())  # in order
        derived = ~np.array(variant.measured)[index]
        wrong = np.flatnonzero(rows["derived"].to_numpy() != derived)
        if wrong.size:
            cell = rows["cell"][int(wrong[0])]
            return (
                f"cell {cell} of {variant.name} is {'derived' if derived[wrong[0]] else 'measured'}"
            )
        for terms in np.unique(summed[index]):
            problem = _count_problem(
                rows.filter(pl.Series(summed[index] == terms)), int(terms), reach, clamp
            )
            if problem is not None:
                return problem
    return None


def _count_problem(rows: pl.DataFrame, terms: int, reach: float, clamp: bool) -> str | None:
    """The first count (a sum of ``terms`` noisy cells of ``reach`` each) below what any count
    of 0 or more gives."""
    lowest = 0.0 if clamp else -terms * reach
    below = rows.filter(pl.col("count") < lowest)
    if below.height:
        r = below.row(0, named=True)
        return (
            f"count {r['count']} at {r['level']} {r['geoid']}, iteration {r['iteration']} lies "
            f"below {lowest:.4g}, beyond the noise's reach of any count of 0 or more"
        )
    return None


def _variant_frame(
    values: IntArray,
    v: Variant,
    where: npt.NDArray[np.intp],
    gh: GroupHistograms,
    population: Population,
) -> pl.DataFrame:
    """The cells (``values``: groups × cells) of the groups at ``where`` (rows of
    ``gh.households``) in one variant, cell by cell."""
    n_its, n_cells = len(gh.codes), len(v.cells)
    geoids = geoid_strings(population.geography.codes(gh.geo_level), gh.geo_level)
    return pl.DataFrame(
        {
            "geoid": geoids.gather(np.tile(where // n_its, n_cells)),
            "iteration": pl.Series(gh.codes, dtype=pl.String).gather(
                np.tile(where % n_its, n_cells)
            ),
            "cell": pl.Series(np.repeat(v.cells, len(where)), dtype=pl.Int8),
            "count": pl.Series(values.T.ravel(), dtype=pl.Int64),
            "derived": pl.Series(np.repeat(~np.array(v.measured), len(where)), dtype=pl.Boolean),
        }
    ).select(
        pl.lit(gh.geo_level, dtype=pl.String).alias("level"),
        "geoid",
        pl.lit(gh.level, dtype=pl.Int8).alias("iteration_level"),
        "iteration",
        pl.lit(v.name, dtype=pl.String).alias("table"),
        "cell",
        "count",
        "derived",
    )


def _group_frame(counts: IntArray, lc: GroupHistograms, geography: Geography) -> pl.DataFrame:
    geo, it = np.indices(counts.shape).reshape(2, -1)
    return pl.DataFrame(
        {
            "geoid": geoid_strings(geography.codes(lc.geo_level), lc.geo_level).gather(geo),
            "iteration": pl.Series(lc.codes).gather(it),
            "count": pl.Series(counts[geo, it], dtype=pl.Int64),
        }
    ).select(
        pl.lit(lc.geo_level, dtype=pl.String).alias("level"),
        "geoid",
        pl.lit(lc.level, dtype=pl.Int8).alias("iteration_level"),
        "iteration",
        "count",
    )


SAFETAB_BUDGETS = ("rho_regional", "rho_detailed_national", "rho_detailed_local", "t01001_rho")


@MECHANISM.define("rescale")
def rescale(p: SafeTabHParameters, factor: Fraction) -> dict[str, str]:
    """Every ρ times ``factor`` (T01001's only where it is noisy: else it spends none)."""
    names = SAFETAB_BUDGETS if p.t01001 == "noisy" else SAFETAB_BUDGETS[:-1]
    return {name: decimal_text(Fraction(getattr(p, name)) * factor) for name in names}


@MECHANISM.define("guarantee")
def card(p: SafeTabHParameters) -> SpecCard:
    """ρ-zCDP of the household tables (add/remove; twice that bounded), with T01001's caveat."""
    groups = p.groups()
    rows = []
    for level in (1, 2):
        s = stability(groups, level)
        for region in REGION_TYPES:
            rho = p.rho(region, level)
            if rho == 0:
                continue
            rows.append(
                {
                    "iteration level": level,
                    "region": region,
                    "rho (T03, T04 each)": float(rho),
                    "stability s": s,
                    "sigma2": float(Fraction(s) / (2 * rho)),
                    "95% MOE": margin_of_error(rho, s),
                    "coverage": margin_coverage(rho, s),
                }
            )
    guarantee, lines = safetab_guarantee(p)
    return SpecCard(
        mechanism="safetab_h",
        domain="occupied housing units (households) and, for T01001, persons",
        multiverse="a single universe" + (" given T01001" if p.t01001 == "exact" else ""),
        guarantee=guarantee,
        covers="T03 and T04 of every population group present in T01001 at the nation, state, "
        "county and tract, each variant's measured cells with discrete Gaussian noise"
        + ("; T01001 itself, with discrete Gaussian noise" if p.t01001 == "noisy" else ""),
        caveats=(
            *lines,
            "Margins of error are the smallest integer whose coverage under the exact discrete "
            "Gaussian is at least 95%; a derived cell sums k measured cells (variance "
            "k·s/(2 rho)).",
        ),
        allocation=tuple(rows),
    )


HOUSEHOLD_CAP = 20
"""The household size up to which the household guarantee of a noisy T01001 is stated (the
synthetic generator's largest household): a household of k persons moves each of its groups'
T01001 counts by k, costing k²·ρ_T01001 by group privacy."""


def safetab_guarantee(p: SafeTabHParameters) -> tuple[Guarantee, list[str]]:
    """SafeTab-H's guarantee: for households and for persons, with T01001 exact or noisy.

    The household tables cost ρ_H under add/remove of one household (Δ₂² = s: a household is in
    at most s groups, one cell each) and 2ρ_H under a household replace (Δ₂² = 2s). A noisy
    T01001 costs ρ_T per person added or removed and 2ρ_T per person replaced.

    One person's record changed touches at most two household records: a person who moves
    leaves one household and joins another (in the same tract, T01001 unchanged). Each
    household's change moves the tables by ‖Δ‖² ≤ 2s over T03 and T04 together (its type changes,
    or it appears or disappears), so ‖Δ‖² ≤ (√(2s) + √(2s))² = 8s: 4ρ_H."""
    household = p.total_rho()
    replace_h = 2 * household
    person_h = 4 * household
    moves = (
        "one person's record changed touches at most two household records (a person moving "
        "between households); each moves the household tables by ‖Δ‖² ≤ 2s, together ≤ 8s: 4ρ_H"
    )
    if p.t01001 == "exact":
        relation: Relation = "replace"
        loss: Number = replace_h
        person: Number = person_h
        derivation: tuple[str, ...] = (
            "with T01001 exact, the universe holds every group's population fixed: its "
            "neighbours replace household records keeping T01001 (one: Δ₂² = 2s, 2ρ_H)",
            moves + ", within the invariants",
        )
        invariants: tuple[Invariant, ...] = (
            Invariant("T01001 population-group totals", "nation, state, county, tract"),
        )
        lines = [
            "T01001 is exact public input: adding or removing a household changes it, so those "
            "datasets are not neighbours here; a change that moves a group's T01001 across a "
            "detail threshold changes which cells are published, and its privacy loss is "
            "infinite — the guarantee covers only changes that keep T01001.",
            "An end-to-end guarantee must compose SafeTab-P's budget for T01001.",
        ]
    else:
        t01001 = Fraction(p.t01001_rho)
        cap_loss, cap_step = group(Loss("zcdp", rho=t01001), HOUSEHOLD_CAP)
        assert cap_loss.rho is not None
        relation = "add_remove"
        households = household + cap_loss.rho
        loss, person = households, person_h + 2 * t01001
        derivation = (moves, "and moves the person between T01001 groups (Δ₂² ≤ 2s: 2ρ_T)")
        invariants = ()
        lines = [
            f"Households (add or remove one of up to {HOUSEHOLD_CAP} persons): rho = "
            f"{float(household):.4g} (household tables) + {HOUSEHOLD_CAP}² × {float(t01001):g} "
            f"(T01001, {cap_step}) = {float(households):.4g}; a household of k persons costs "
            f"{float(household):.4g} + k² × {float(t01001):g}.",
            f"Persons (one person's record changed, up to two households): rho = 4 × "
            f"{float(household):.4g} + 2 × {float(t01001):g} = {float(person):.4g}; a person added "
            f"or removed costs {float(household + t01001):.4g}.",
        ]
    guarantee = Guarantee(
        measure="zcdp",
        unit="household",
        relation=relation,
        loss=Loss("zcdp", rho=loss),
        person_replace=Loss("zcdp", rho=person),
        derivation=derivation,
        invariants=invariants,
    )
    return guarantee, lines


def group_accuracy(release: Release, truth: Population) -> list[dict[str, Any]]:
    """Error of a SafeTab-H release's measured and derived cells, by geography and iteration
    level: mean absolute error, and the share of measured cells within their 95% margin."""
    params = SafeTabHParameters.model_validate(release.parameters)
    groups = params.groups()
    cells = true_cells(truth, release).with_columns(error=pl.col("count") - pl.col("true"))
    region_of = {level: region for region, level in REGION_TYPES.items()}
    no_measured = as_json(NotMeasured("no measured cell at this level"))
    no_derived = as_json(NotMeasured("no derived cell at this level"))
    rows = []
    for (level, it_level), part in cells.group_by("level", "iteration_level", maintain_order=True):
        level, it_level = str(level), int(str(it_level))
        moe = margin_of_error(params.rho(region_of[level], it_level), stability(groups, it_level))
        derived = part["derived"].to_numpy()
        error = np.abs(part["error"].to_numpy())
        rows.append(
            {
                "level": level,
                "iteration_level": it_level,
                "groups": part.select("geoid", "iteration").unique().height,
                "measured_cells": int((~derived).sum()),
                "mae_measured": float(error[~derived].mean()) if (~derived).any() else no_measured,
                "mae_derived": float(error[derived].mean()) if derived.any() else no_derived,
                "moe": moe,
                "within_moe": float((error[~derived] <= moe).mean())
                if (~derived).any()
                else no_measured,
            }
        )
    return rows


@MECHANISM.define("diagnostics")
def diagnostics(truth: Population, release: Release) -> dict[str, object]:
    """Evaluation only: the error of the measured and derived cells of every population group."""
    return {"group_accuracy": group_accuracy(release, truth)}


@MECHANISM.define("noise")
def published_noise(p: SafeTabHParameters) -> NoisePublication:
    groups = p.groups()
    variances = {
        f"{region} level {level}": float(Fraction(stability(groups, level)) / (2 * rho))
        for region in REGION_TYPES
        for level in (1, 2)
        if (rho := p.rho(region, level)) > 0
    }
    return NoisePublication(
        distribution="discrete Gaussian on every measured cell of T03 and T04, independent"
        + ("; negative cells then set to 0" if p.clamp else ""),
        published=(
            "parameters: the rho of each region type and iteration level and the stability "
            "fix every variance",
            f"artifact {GROUP_TABLES_ARTIFACT}: which cells are measured and which derived",
        ),
        parameters={"variance": variances},
    )


AUDIT_THETA = (1, 2, 3)
"""The level-2 T03 thresholds (T04: the last) of the noisy-T01001 audit: its group of three
persons sits at θ3, and the householder's race change takes it one below."""


def _audit_codes(code: int) -> dict[str, Any]:
    """A person of one detailed race code (its major race in ``race``), not Hispanic."""
    return {"race": code // schema.DETAILED_RACE_BASE, "race_code1": code, "hispanic_origin": 0} | {
        f"race_code{i}": None for i in range(2, 9)
    }


@MECHANISM.define("audit_plan")
def audit_plan(settings: Mapping[str, Any], trials: int, seed: int) -> audit_plans.Trials:
    """Neighbours inside the guarantee's universe, one tract each.

    T01001 exact: one couple of detailed races 1001 and 2001, headed by the first; in D′ by the
    second (a household replaced: it moves between groups, T01001 unchanged). T01001 noisy: one
    household of three persons of race 1001, a group at θ3 of the audit's thresholds
    (:data:`AUDIT_THETA`); D′ changes the householder's code to 1002, taking the group one below
    θ3, so the noisy T01001 may choose different variants. Observed: every measured tract-level
    cell, and with a noisy T01001 the tract's group totals."""
    p = MECHANISM.parse(dict(settings))
    run = dict(settings)
    overrides = {f"race_code{i}": pl.Int16 for i in range(1, 9)}
    if p.t01001 == "exact":
        if p.thresholds != "production":
            raise InputError(
                "audit safetab_h: with t01001=exact only the production thresholds are audited"
            )

        def couple(head: int) -> list[dict[str, Any]]:  # the same two persons, either heads
            spouse = 2001 if head == 1001 else 1001
            return [
                audit_plans.person(0, 0, 0, **_audit_codes(head)),
                audit_plans.person(1, 0, 0, relationship=1, sex=2, **_audit_codes(spouse)),
            ]

        units = [audit_plans.unit(0, 0)]
        datasets = [(couple(1001), units), (couple(2001), units)]
        neighbours = "replace one household (which person heads it), T01001 unchanged"
    else:
        table = dict(PRODUCTION_THRESHOLDS)
        for region in REGION_TYPES:
            table[region, 2] = {"T03": AUDIT_THETA, "T04": (AUDIT_THETA[-1],)}
        run["thresholds"] = thresholds_data(table)

        def household(head: int) -> list[dict[str, Any]]:
            return [
                audit_plans.person(0, 0, 0, **_audit_codes(head)),
                audit_plans.person(1, 0, 0, relationship=1, sex=2, **_audit_codes(1001)),
                audit_plans.person(2, 0, 0, relationship=2, age=10, **_audit_codes(1001)),
            ]

        units = [audit_plans.unit(0, 0)]
        datasets = [(household(1001), units), (household(1002), units)]
        neighbours = "replace one person's record (the householder's race), crossing θ3"
    releases = [
        MECHANISM.run(
            audit_plans.replicate(
                pl.DataFrame(people, schema_overrides=overrides), pl.DataFrame(units), trials
            ),
            run,
            seed + i,
        )
        for i, (people, units) in enumerate(datasets)
    ]
    frames = []
    for r in releases:
        parts = [
            r.artifacts[GROUP_TABLES_ARTIFACT]
            .filter((pl.col("level") == "tract") & ~pl.col("derived"))
            .select(
                copy=audit_plans.copy_of_geoid(pl.col("geoid")),
                key=pl.concat_str("iteration", "table", "cell", separator="|"),
                value=pl.col("count").cast(pl.Float64),
            )
        ]
        if GROUP_TOTALS_ARTIFACT in r.artifacts:
            parts.append(
                r.artifacts[GROUP_TOTALS_ARTIFACT]
                .filter(pl.col("level") == "tract")
                .select(
                    copy=audit_plans.copy_of_geoid(pl.col("geoid")),
                    key=pl.concat_str(pl.lit("T01001"), "iteration", separator="|"),
                    value=pl.col("count").cast(pl.Float64),
                )
            )
        frames.append(pl.concat(parts))
    d, d_prime = audit_plans.copy_matrix(frames, trials)
    # a replace costs twice the add/remove ρ of each tract-level measurement (Δ₂² = 2s)
    claimed = sum((2 * 2 * p.rho("TRACT", level) for level in (1, 2)), Fraction(0))
    observed = "T03 and T04 of every tract-level group"
    if p.t01001 == "noisy":
        claimed += 2 * 2 * p.t01001_share()
        observed += " and the tract's noisy T01001"
    claim = audit_plans.Claim("zcdp", float(claimed), observed, neighbours)
    return audit_plans.Trials(claim, d, d_prime)
