"""SafeTab-H: household tables by detailed race and ethnicity, with adaptive detail, under zCDP.

The 2020 Detailed DHC-B (specs/topdown-safetab-h.md part B). A *population group* is a geounit
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

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab import accounting, noise, schema
from sdclab.accounting import Budget, SpecCard
from sdclab.digest import frames_digest
from sdclab.errors import InputError
from sdclab.fileio import read_toml
from sdclab.geography import Geography, geoid_strings, parse_geoids
from sdclab.population import Population
from sdclab.protection.base import Mechanism, Parameters, check_budget_range
from sdclab.release import Release
from sdclab.tables.tabulate import level_step

IntArray = npt.NDArray[np.int64]

REGION_TYPES = {"USA": "nation", "STATE": "state", "COUNTY": "county", "TRACT": "tract"}
"""SafeTab-H's region types and the geography levels they are here (no places or AIANNH areas)."""
MAX_RACE_CODES = schema.DETAILED_RACE_MAX
Z95 = Fraction(196, 100)

# The measured cells of every variant (cell code → HOUSEHOLD_TYPE or tenure codes) and the
# derived cells (cell code → measured or derived cells summed), spec B.2.
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
                int(entry["level"]),
                entry["kind"],
                tuple(int(c) for c in entry["codes"]),
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
            key = (str(entry["region"]), int(entry["level"]))
            t3, t4 = tuple(int(v) for v in entry["T03"]), tuple(int(v) for v in entry["T04"])
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
    """95% margin of error of a measured cell: ⌊1.96·√(s/(2ρ))⌋."""
    return int(np.floor(float(Z95) * np.sqrt(s / (2 * float(rho))) + 1e-12))


def rho_for_margin(moe: float, s: int) -> float:
    """The ρ whose measured cells have margin of error ``moe``: 1.96²·s/(2·MOE²) (17.287/MOE² for
    s = 9)."""
    return float(Z95) ** 2 * s / (2 * moe**2)


class SafeTabHParameters(Parameters):
    """Budgets per iteration level and region, the iteration file, stability, T01001, clamp."""

    rho_regional: Decimal = Field(Decimal("0.006915"), ge=0, description="level 1, every region")
    rho_detailed_national: Decimal = Field(
        Decimal("1.9208"), ge=0, description="level 2, USA/STATE"
    )
    rho_detailed_local: Decimal = Field(
        Decimal("0.142869"), ge=0, description="level 2, COUNTY/TRACT"
    )
    stability: int = Field(9, ge=1, le=1000, description="the s the budget is spent for")
    iterations: str | list[dict[str, Any]] = Field(
        "default",
        description='"default" or a TOML iteration file (in a release: its [[group]] entries)',
    )
    t01001: Literal["exact", "noisy"] = "exact"
    t01001_rho: Decimal = Field(Decimal("1"), gt=0, description="noisy T01001: its total rho")
    clamp: bool = Field(False, description="negative measured cells to 0 (production kept them)")
    thresholds: str | list[dict[str, Any]] = Field(
        "production",
        description='"production" or a TOML file of [[threshold]] entries (in a release: them)',
    )

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

    def total_rho(self) -> Fraction:
        """ρ of the household tables under add/remove neighbours (T03 and T04 everywhere)."""
        return sum((2 * self.rho(r, lv) for r in REGION_TYPES for lv in (1, 2)), Fraction(0))

    @model_validator(mode="after")
    def _within_sampler_range(self) -> SafeTabHParameters:
        """A ρ of 0 leaves its region types and level unmeasured (the card lists no row for
        them); every other ρ must give noise the exact sampler supports."""
        groups = self.groups()
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
            share = Fraction(self.t01001_rho) / (2 * len(REGION_TYPES))
            variances = [Fraction(stability(groups, lv)) / (2 * share) for lv in (1, 2)]
            check_budget_range(
                "t01001_rho", self.t01001_rho, variances, noise.SIGMA2_RANGE, "variance"
            )
        return self


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
# The mechanism
# ---------------------------------------------------------------------------------------------


def variant(counts: npt.NDArray[np.float64], thresholds: tuple[int, ...]) -> IntArray:
    """The variant index each group size selects: the number of thresholds it reaches."""
    return (counts[..., None] >= np.asarray(thresholds)).sum(axis=-1).astype(np.int64)


@dataclass(frozen=True)
class LevelCounts:
    """True counts at one iteration level and region type: T01001 and, per table, the household
    counts by HOUSEHOLD_TYPE (T03) or tenure (T04) value, each geounits × iterations."""

    level: int
    region: str
    geo_level: str
    codes: list[str]
    """The level's iteration codes (the columns of the count matrices)."""
    t01001: IntArray
    by_value: dict[str, dict[int, IntArray]]


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


def level_counts(population: Population, groups: tuple[Group, ...]) -> list[LevelCounts]:
    """The true counts behind every table SafeTab-H measures: records are counted by tract and
    combination of codes, combinations are mapped to iterations, tracts summed up to the nation
    (sparse products, no loops over records)."""
    race, origin = person_codes(population)
    households = np.flatnonzero(population.household_type > 0)
    h_rows = population.householder_row[households]
    values = {
        "T03": population.household_type[households].astype(np.int64),
        "T04": population.units.get_column("tenure").to_numpy()[households].astype(np.int64),
    }
    geography = population.geography
    tract = geography.units("tract")[1]
    n_tracts = geography.n_units("tract")
    p_ids, p_race, p_origin = combinations(race, origin)
    h_ids, h_race, h_origin = combinations(race[h_rows], origin[h_rows])
    p_tract = tract[population.person_block_index]
    h_tract = tract[population.unit_block_index[households]]
    persons = _counts(p_tract, p_ids, n_tracts, len(p_race))
    by_combination = {
        table: {
            int(v): _counts(h_tract[vals == v], h_ids[vals == v], n_tracts, len(h_race))
            for v in np.unique(vals)
        }
        for table, vals in values.items()
    }
    steps = {lv: level_step(geography, lv) for lv in ("county", "state", "nation")}

    def up(by_tract: sp.csr_matrix) -> dict[str, IntArray]:
        """Counts at every region's level from the tract counts."""
        out = {"tract": by_tract}
        for lv, below in (("county", "tract"), ("state", "county"), ("nation", "state")):
            out[lv] = (steps[lv] @ out[below]).tocsr()
        return {lv: m.toarray() for lv, m in out.items()}

    out = []
    for level in (1, 2):
        p_its = iterations(groups, level, p_race, p_origin)
        h_its = iterations(groups, level, h_race, h_origin)
        t01001 = up(persons @ p_its.membership)
        by_value = {
            table: {v: up(m @ h_its.membership) for v, m in counts.items()}
            for table, counts in by_combination.items()
        }
        for region, geo_level in REGION_TYPES.items():
            out.append(
                LevelCounts(
                    level,
                    region,
                    geo_level,
                    p_its.codes,
                    t01001[geo_level],
                    {t: {v: d[geo_level] for v, d in c.items()} for t, c in by_value.items()},
                )
            )
    return out


def _counts(rows: IntArray, columns: IntArray, n_rows: int, n_columns: int) -> sp.csr_matrix:
    """Sparse counts of (row, column) pairs."""
    return sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int64), (rows, columns)), shape=(n_rows, n_columns)
    )


TABLES = {"T03": (T3_VARIANTS, T3_DERIVED), "T04": (T4_VARIANTS, T4_DERIVED)}


def cell_members(table: str, variant_index: int, cell: int) -> tuple[int, ...]:
    """The HOUSEHOLD_TYPE or tenure values a cell of a table variant counts (derived cells too)."""
    measured, derived = (part[variant_index] for part in TABLES[table])
    if cell in measured:
        return measured[cell]
    return tuple(
        sorted({v for part in derived[cell] for v in cell_members(table, variant_index, part)})
    )


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
    for lc in level_counts(population, groups):
        s = stability(groups, lc.level)
        t01001 = lc.t01001
        if p.t01001 == "noisy":
            # ρ split evenly over the 2 iteration levels × 4 region types
            share = Fraction(p.t01001_rho) / (2 * len(REGION_TYPES))
            t01001 = t01001 + noise.discrete_gaussian(Fraction(s) / (2 * share), t01001.shape, rng)
            totals.append(_group_frame(t01001, lc, population.geography))
        if not p.rho(lc.region, lc.level):
            continue  # a ρ of 0: this region type and level are not measured
        present = t01001 > 0
        sigma2 = Fraction(s) / (2 * p.rho(lc.region, lc.level))
        for table, (variants, derived) in TABLES.items():
            cuts = thresholds[lc.region, lc.level][table]
            chosen = np.where(present, variant(t01001.astype(float), cuts), -1)
            by_value = lc.by_value[table]
            for k, (cells, sums) in enumerate(zip(variants, derived, strict=True)):
                where = np.nonzero(chosen == k)
                if not len(where[0]):
                    continue
                zero = np.zeros(len(where[0]), dtype=np.int64)
                noisy = {
                    cell: sum((by_value[v][where] for v in members if v in by_value), zero)
                    + noise.discrete_gaussian(sigma2, len(zero), rng)
                    for cell, members in cells.items()
                }
                if p.clamp:
                    noisy = {cell: np.maximum(v, 0) for cell, v in noisy.items()}
                for cell, parts in sums.items():
                    noisy[cell] = sum((noisy[c] for c in parts), zero)
                frames.append(
                    _variant_frame(noisy, set(sums), where, lc, f"{table}00{k + 1}", population)
                )
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
        group_tables=group_tables,
        group_totals=pl.concat(totals) if totals else None,
    )


def true_cells(population: Population, release: Release) -> pl.DataFrame:
    """The release's group tables with a ``true`` column: what each cell counts in the truth
    (evaluation only)."""
    assert release.group_tables is not None
    p = SafeTabHParameters.model_validate(release.parameters)
    parts = []
    for lc in level_counts(population, p.groups()):
        rows = release.group_tables.filter(
            (pl.col("level") == lc.geo_level) & (pl.col("iteration_level") == lc.level)
        )
        if not rows.height:
            continue
        codes = population.geography.codes(lc.geo_level)
        geo = np.searchsorted(codes, parse_geoids(rows["geoid"], lc.geo_level))
        column = {c: i for i, c in enumerate(lc.codes)}
        it = np.array([column[c] for c in rows["iteration"].to_list()], dtype=np.int64)
        truth = np.zeros(rows.height, dtype=np.int64)
        tables = rows["table"].to_numpy()
        cells = rows["cell"].to_numpy()
        for name in np.unique(tables):
            for cell in np.unique(cells[tables == name]):
                mine = (tables == name) & (cells == cell)
                by_value = lc.by_value[name[:3]]
                for v in cell_members(name[:3], int(name[-1]) - 1, int(cell)):
                    if v in by_value:
                        truth[mine] += by_value[v][geo[mine], it[mine]]
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


def _variant_frame(
    noisy: dict[int, IntArray],
    derived: set[int],
    where: tuple[npt.NDArray[np.intp], ...],
    lc: LevelCounts,
    table: str,
    population: Population,
) -> pl.DataFrame:
    keys = pl.DataFrame(
        {
            "geoid": geoid_strings(population.geography.codes(lc.geo_level), lc.geo_level).gather(
                where[0]
            ),
            "iteration": pl.Series(lc.codes).gather(where[1]),
        }
    )
    return pl.concat(
        [
            keys.select(
                pl.lit(lc.geo_level, dtype=pl.String).alias("level"),
                "geoid",
                pl.lit(lc.level, dtype=pl.Int8).alias("iteration_level"),
                "iteration",
                pl.lit(table, dtype=pl.String).alias("table"),
                pl.lit(cell, dtype=pl.Int8).alias("cell"),
                pl.Series("count", values, dtype=pl.Int64),
                pl.lit(cell in derived, dtype=pl.Boolean).alias("derived"),
            )
            for cell, values in sorted(noisy.items())
        ]
    )


def _group_frame(counts: IntArray, lc: LevelCounts, geography: Geography) -> pl.DataFrame:
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
                }
            )
    household_rho = p.total_rho()
    total = household_rho + (Fraction(p.t01001_rho) if p.t01001 == "noisy" else 0)
    t01001_caveat = (
        "T01001 (population-group totals) is taken as exact public input here: the group sizes "
        "that select each group's detail are not protected; an end-to-end guarantee must compose "
        "SafeTab-P's budget."
        if p.t01001 == "exact"
        else f"T01001 is measured here with rho = {float(p.t01001_rho):g} per person (included in "
        "the total as one person's; a whole household of k persons costs k² times that, by group "
        "privacy)."
    )
    return SpecCard(
        mechanism="safetab_h",
        domain="occupied housing units (households) and, for T01001, persons",
        multiverse="a single universe" + (" given T01001" if p.t01001 == "exact" else ""),
        invariants=("T01001 population-group totals",) if p.t01001 == "exact" else (),
        protection_unit="household (a person for T01001)",
        neighbours="add or remove one household (bounded neighbours: twice the rho)",
        output_premetric="zCDP",
        budget=Budget(rho=float(total)),
        covers="T03 and T04 of every population group present in T01001 at the nation, state, "
        "county and tract, each variant's measured cells with discrete Gaussian noise",
        caveats=(
            t01001_caveat,
            f"Bounded neighbours (one household changed): rho = {2 * float(household_rho):g}.",
            f"(epsilon, delta) at delta = 1e-10: epsilon = "
            f"{accounting.epsilon_for_delta(float(total), 1e-10):.2f} (tight conversion)",
            "Derived cells sum k measured cells: their 95% margin of error is "
            "1.96·sqrt(k·s/(2 rho)).",
        ),
        allocation=tuple(rows),
    )


MECHANISM = Mechanism(
    name="safetab_h",
    summary="SafeTab-H: household tables by detailed race and ethnicity (zCDP, adaptive detail)",
    parameters=SafeTabHParameters,
    guarantee=card,
    protect=protect,
)
