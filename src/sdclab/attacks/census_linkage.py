"""Reidentification for a declared census: the attack of :mod:`sdclab.attacks.linkage` on the
census's own quasi-identifiers.

An attacker file holds an identifier, the geounit of the reconstruction's level and the census's
quasi-identifiers (``[attack] quasi_identifiers``), with the defects of the attacker's preset:
``coverage`` of the persons, a share ``moved`` to another geounit of the same program's geounit
(the US file moves a record within its county instead), and each quasi-identifier wrong with
probability ``sex_error`` (an attribute named ``sex``) or ``age_error`` (any other): another code
of its code list, drawn uniformly (the US file shifts a wrong age by 1 to 5 years). Reconstructed
records are linked one-to-one on {geounit, quasi-identifiers}, then the leftovers on the categories
of the quasi-identifiers the census resolves only to a breakdown (``[reconstruction] resolved``);
ties are broken in a seeded random order. A link is confirmed when the identifier's person has the
geounit and every attribute the link states (a quasi-identifier resolved to a breakdown: its
category, in the second pass; an inferred attribute resolved to one: its category always, since the
tables publish no finer). Groups: all; modal and nonmodal (whether a person's inferred attributes,
those that are not quasi-identifiers, are the most common combination of their geounit); unique on
{geounit, quasi-identifiers}. The baselines (:mod:`sdclab.attacks.census_baselines`: the release's
MDG and PRG, the fixed ``mdg_exact``, ``prg_exact`` and ``random_draw``) and the upper bound
``confidential`` (the confidential records themselves) are linked and confirmed exactly as the
reconstruction's records, on the same attacker file. The US upper bound ``swapped`` (the US
swap-low swap) has no counterpart here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from sdclab.attacks import census_baselines as baselines
from sdclab.attacks.linkage import AttackerParameters, Subsets, paired, rates, unpaired
from sdclab.core.arrays import IntArray
from sdclab.core.census.model import Census
from sdclab.core.census.records import CensusRecords
from sdclab.core.errors import InputError
from sdclab.core.randomness import make_rng
from sdclab.release import Release

GEOUNIT = "block"
"""The column of a record's geounit (at the reconstruction's level) in every frame here."""
NO_SWAPPED = "the swapped-microdata upper bound is the US 2010 census's swap-low swap"
"""Why a declared census has no ``swapped`` upper bound."""


@dataclass(frozen=True)
class LinkKeys:
    """What the attack links on and what it infers, from the census."""

    quasi: tuple[str, ...]
    inferred: tuple[str, ...]
    category: Mapping[str, IntArray]
    """For a quasi-identifier resolved to a breakdown: the category of each code position."""
    codes: Mapping[str, tuple[str, ...]]
    representative: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """For an inferred attribute resolved to a breakdown: per code, its category's first code
    (what a reconstructed record states of it), so that it is confirmed on its category."""

    @classmethod
    def of(cls, census: Census) -> LinkKeys:
        settings = census.reconstruction
        quasi = tuple(census.quasi_identifiers)
        missing = [a for a in quasi if a not in settings.attributes]
        if missing:
            raise InputError(
                f"census {census.name}: quasi-identifier {missing[0]!r} is not an attribute the "
                "reconstruction solves for"
            )
        category = {
            a: np.argmax(census.attribute(a).breakdown(b).membership, axis=0)
            for a, b in settings.resolved.items()
            if a in quasi
        }
        codes = {a: census.attribute(a).codes for a in settings.attributes}
        representative = {}
        for a, b in settings.resolved.items():
            if a not in quasi:
                membership = census.attribute(a).breakdown(b).membership
                first = np.argmax(membership, axis=1)[np.argmax(membership, axis=0)]
                representative[a] = tuple(codes[a][i] for i in first)
        inferred = tuple(a for a in settings.attributes if a not in quasi)
        return cls(quasi, inferred, category, codes, representative)

    def at_resolution(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with each resolved inferred attribute stated as its category's first code:
        an attack learns it no finer than the tables publish it."""
        return frame.with_columns(
            pl.col(a).replace_strict(list(self.codes[a]), list(first), default=None)
            for a, first in self.representative.items()
            if a in frame.columns
        )

    def with_categories(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with a ``<attribute>_category`` column per resolved quasi-identifier."""
        return frame.with_columns(
            pl.col(a)
            .replace_strict(list(self.codes[a]), self.category[a].tolist(), default=None)
            .alias(f"{a}_category")
            for a in self.category
        )

    @property
    def second(self) -> list[str]:
        return [GEOUNIT, *(f"{a}_category" if a in self.category else a for a in self.quasi)]


def truth_frame(records: CensusRecords) -> pl.DataFrame:
    """Every person: id (their row), geounit at the reconstruction's level and text codes."""
    census = records.census
    level = census.reconstruction.level
    geography = records.geography
    unit = geography.block_codes_at(level)[records.block_index("persons")]
    columns: dict[str, Any] = {
        "id": np.arange(records.n_persons, dtype=np.int64),
        GEOUNIT: geography.geoid_strings(unit, level),
    }
    for a in census.reconstruction.attributes:
        codes = np.asarray(census.attribute(a).codes, dtype=object)
        columns[a] = pl.Series(codes[records.attributes[a]], dtype=pl.String)
    return pl.DataFrame(columns)


def attacker_file(
    truth: pl.DataFrame,
    keys: LinkKeys,
    params: AttackerParameters,
    geounits: Geounits,
    rng: np.random.Generator,
) -> pl.DataFrame:
    """Simulated external records: id, geounit and the quasi-identifiers (id < 0: not a census
    person); a moved record lands on another geounit of its program's geounit."""
    keep = rng.random(truth.height) < params.coverage
    chosen = truth.filter(pl.Series(keep))
    n = chosen.height
    unit = geounits.of_person[keep].copy()
    moved = rng.random(n) < params.moved
    unit[moved] = geounits.neighbour(unit[moved], rng)
    columns: dict[str, Any] = {
        "id": chosen["id"].to_numpy(),
        GEOUNIT: geounits.geoids[unit],
    }
    for a in keys.quasi:
        codes = np.asarray(keys.codes[a], dtype=object)
        position = chosen[a].replace_strict(list(keys.codes[a]), range(len(codes))).to_numpy()
        error = params.sex_error if a == "sex" else params.age_error
        wrong = (rng.random(n) < error) & (len(codes) > 1)
        shift = rng.integers(1, max(len(codes), 2), size=n)  # another code, uniformly
        columns[a] = codes[np.where(wrong, (position + shift) % len(codes), position)]
    kinds = {"id": pl.Int64, GEOUNIT: pl.String} | dict.fromkeys(keys.quasi, pl.String)
    frame = pl.DataFrame(columns, schema=kinds)
    extra = int(round(params.extra_records * n))
    if extra and truth.height:
        pick = rng.integers(0, truth.height, size=extra)
        fake = truth[pick].with_columns(id=pl.Series(-1 - np.arange(extra, dtype=np.int64)))
        frame = pl.concat([frame, fake.select(frame.columns)])
    return frame.sample(fraction=1.0, shuffle=True, seed=int(rng.integers(0, 2**32)))


@dataclass(frozen=True)
class Geounits:
    """The geounits of the reconstruction's level: each person's, their geoids, and each one's
    geounit at the programs' level (sorted geounits are grouped by it)."""

    of_person: IntArray
    geoids: np.ndarray
    parent: IntArray

    @classmethod
    def of(cls, records: CensusRecords) -> Geounits:
        census = records.census
        level = census.reconstruction.level
        geography = records.geography
        index = geography.units(level)[1][records.block_index("persons")]
        geoids = geography.geoids(level).to_numpy().astype(object)
        return cls(index, geoids, geography.parents(census.within, level))

    def neighbour(self, unit: IntArray, rng: np.random.Generator) -> IntArray:
        """A uniformly random other geounit of the same parent (itself if it is the only one)."""
        start = np.searchsorted(self.parent, self.parent[unit], side="left")
        stop = np.searchsorted(self.parent, self.parent[unit], side="right")
        others = stop - start - 1
        pick = start + (rng.random(len(unit)) * np.maximum(others, 0)).astype(np.int64)
        pick = np.where(pick >= unit, pick + 1, pick)
        return np.where(others > 0, np.minimum(pick, len(self.parent) - 1), unit)


def link(inferred: pl.DataFrame, attacker: pl.DataFrame, keys: LinkKeys, seed: int) -> pl.DataFrame:
    """Putative links, one-to-one: on {geounit, quasi-identifiers}, then the leftovers on the
    categories of the resolved ones; each link states the attacker's id and the record's
    attributes, and its pass (1, 2)."""
    exact = [
        pl.col(f"{a}_min") == pl.col(f"{a}_max")
        for a in keys.category
        if f"{a}_min" in inferred.columns and f"{a}_max" in inferred.columns
    ]  # a record pinned to a category only is linked on it, not on its first code
    known = pl.all_horizontal(*(pl.col(a).is_not_null() for a in keys.quasi), *exact).fill_null(
        False
    )
    left = keys.with_categories(inferred).with_row_index("_r")
    right = keys.with_categories(attacker).with_row_index("_a")
    first_key = [GEOUNIT, *keys.quasi]
    first = paired(left.filter(known), right, first_key, seed)
    columns = ["id", GEOUNIT, *keys.quasi, *keys.inferred]
    out = [first.select(columns).with_columns(link_pass=pl.lit(1, pl.Int8))]
    if keys.category:
        second = paired(*unpaired(left, right, first), keys.second, seed + 2)
        out.append(second.select(columns).with_columns(link_pass=pl.lit(2, pl.Int8)))
    return pl.concat(out)


def confirm(links: pl.DataFrame, truth: pl.DataFrame, keys: LinkKeys) -> pl.DataFrame:
    """Adds ``confirmed`` and ``confirmed_pass``: first on every attribute, then, for the links
    the first pass left, on the categories of the resolved quasi-identifiers."""
    attributes = [*keys.quasi, *keys.inferred]
    true = keys.with_categories(truth).rename(
        {c: f"true_{c}" for c in truth.columns if c != "id"}
        | {f"{a}_category": f"true_{a}_category" for a in keys.category}
    )
    joined = keys.with_categories(links).join(true, on="id", how="left")
    same = [pl.col(GEOUNIT) == pl.col(f"true_{GEOUNIT}")]
    exact = pl.all_horizontal(
        *same, *(pl.col(a) == pl.col(f"true_{a}") for a in attributes)
    ).fill_null(False)
    coarse = pl.all_horizontal(
        *same,
        *(
            pl.col(f"{a}_category") == pl.col(f"true_{a}_category")
            if a in keys.category
            else pl.col(a) == pl.col(f"true_{a}")
            for a in attributes
        ),
    ).fill_null(False)
    on_second = coarse & ~exact if keys.category else pl.lit(False)
    passed = pl.when(exact).then(1).when(on_second).then(2).otherwise(None).cast(pl.Int8)
    return joined.with_columns(confirmed=exact | on_second, confirmed_pass=passed).select(
        *links.columns, "confirmed", "confirmed_pass"
    )


def groups(attacker: pl.DataFrame, truth: pl.DataFrame, keys: LinkKeys) -> Subsets:
    """all; modal / nonmodal on the inferred attributes; unique on {geounit, quasi-identifiers}:
    by the true record behind each attacker id (census persons only, beyond ``all``)."""
    facts = truth.with_columns(
        _combination=pl.concat_str(list(keys.inferred) or [pl.lit("")], separator="\x1f")
    )
    mode = (
        facts.group_by(GEOUNIT, "_combination")
        .len()
        .sort("len", "_combination", descending=[True, False])
        .group_by(GEOUNIT, maintain_order=True)
        .first()
        .select(GEOUNIT, _mode="_combination")
    )
    cell = facts.group_by(GEOUNIT, *keys.quasi).len("_cell")
    facts = (
        facts.join(mode, on=GEOUNIT)
        .join(cell, on=[GEOUNIT, *keys.quasi])
        .select("id", modal=pl.col("_combination") == pl.col("_mode"), unique=pl.col("_cell") == 1)
    )
    joined = attacker.select("id").join(facts, on="id", how="left")
    census = joined["modal"].is_not_null().to_numpy()
    modal = joined["modal"].fill_null(False).to_numpy()
    unique = joined["unique"].fill_null(False).to_numpy()
    return Subsets(
        {
            "all": np.ones(attacker.height, dtype=bool),
            "modal": census & modal,
            "nonmodal": census & ~modal,
            "unique": census & unique,
            "nonmodal_unique": census & ~modal & unique,
        }
    )


def baseline_files(
    release: Release, records: CensusRecords, rng: np.random.Generator
) -> tuple[dict[str, pl.DataFrame], str]:
    """The files of the release's baselines (MDG, PRG), of the fixed ones and of the upper bound
    ``confidential``, and what ``baselines`` says of the release's (computed, or why not)."""
    found = baselines.plan(records.census, tuple(release.tables))
    files: dict[str, pl.DataFrame] = {}
    if isinstance(found, str):
        status = f"not measured: {found}"
    else:
        status = "computed"
        files["mdg"] = baselines.baseline_records(release, found, "mdg", rng)
        files["prg"] = baselines.baseline_records(release, found, "prg", rng)
    files |= baselines.fixed_files(records, make_rng(baselines.FIXED_BASELINE_SEED))
    files["confidential"] = truth_frame(records).drop("id")
    return files, status


def linked(
    files: Mapping[str, pl.DataFrame],
    attacker: pl.DataFrame,
    truth: pl.DataFrame,
    keys: LinkKeys,
    seed: int,
) -> dict[str, pl.DataFrame]:
    """Each file's confirmed links to the attacker file, linked as the reconstruction's, every
    inferred attribute confirmed at the resolution the tables publish it."""
    out = {}
    truth = keys.at_resolution(truth)
    for method, frame in files.items():
        bounds = [c for a in keys.category for c in (f"{a}_min", f"{a}_max") if c in frame.columns]
        inferred = keys.at_resolution(frame.select(GEOUNIT, *keys.quasi, *keys.inferred, *bounds))
        out[method] = confirm(link(inferred, attacker, keys, seed), truth, keys)
    return out


def reidentify(
    reconstructed: pl.DataFrame,
    release: Release,
    records: CensusRecords,
    params: AttackerParameters,
    rng: np.random.Generator,
) -> tuple[dict[str, Any], pl.DataFrame]:
    """Figures of the reconstruction's links and the baselines' (in the form of
    :func:`.linkage.reidentify`'s), and the reconstruction's links."""
    census = records.census
    keys = LinkKeys.of(census)
    unknown = [a for a in keys.quasi if reconstructed[a].null_count() == reconstructed.height]
    if unknown and reconstructed.height:
        raise InputError(
            f"reidentification is not applicable: the release's tables do not determine "
            f"{', '.join(unknown)}, which the attack links on"
        )
    truth = keys.at_resolution(truth_frame(records))
    attacker = attacker_file(truth, keys, params, Geounits.of(records), rng)
    seed = int(rng.integers(0, 2**31))
    files, status = baseline_files(release, records, rng)
    links = linked({"reconstruction": reconstructed, **files}, attacker, truth, keys, seed)
    share = attacker.join(truth.select("id", GEOUNIT, *keys.quasi), on=["id", GEOUNIT, *keys.quasi])
    subsets = groups(attacker, truth, keys)
    figures: dict[str, Any] = {
        "baselines": status,
        "attacker": params.model_dump(),
        "attacker_records": attacker.height,
        "attacker_match_share": share.height / attacker.height if attacker.height else float("nan"),
        **{method: rates(found, attacker, subsets) for method, found in links.items()},
        "confirmation_passes": {
            method: {
                "putative": found.height,
                "first_pass": int((found["confirmed_pass"] == 1).sum()),
                "second_pass": int((found["confirmed_pass"] == 2).sum()),
            }
            for method, found in links.items()
        },
    }
    return figures, links["reconstruction"]
