"""SafeTab-H's population groups: the race and ethnicity groups of the iteration mapping, the
thresholds that choose each group's detail, their files, and which iterations a record is in.

A household belongs to the iterations of its householder's detailed codes: the "alone" iterations
common to all its race codes, the "alone or in any combination" iterations of any of them, and its
Hispanic origin's ethnicity iterations (docs/safetab_h.md)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population import Population
from sdclab.core.arrays import IntArray
from sdclab.core.errors import InputError
from sdclab.core.fileio import read_toml

REGION_TYPES = {"USA": "nation", "STATE": "state", "COUNTY": "county", "TRACT": "tract"}
"""SafeTab-H's region types and the geography levels they are here (no places or AIANNH areas)."""
REGION_OF = {level: region for region, level in REGION_TYPES.items()}
"""The region type of each of those geography levels."""
MAX_RACE_CODES = schema.DETAILED_RACE_MAX


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


def iteration_codes(groups: tuple[Group, ...], level: int) -> list[str]:
    """The iteration codes of ``level`` (as :func:`iterations` names them): every race group
    alone, then in combination, then every ethnicity group."""
    races = [g.code for g in groups if g.level == level and g.kind == "race"]
    ethnic = [g.code for g in groups if g.level == level and g.kind == "ethnicity"]
    return [f"{c}A" for c in races] + [f"{c}C" for c in races] + ethnic
