"""A seeded synthetic population for the EU 2021 census: the European demo's default microdata.

Real census microdata is confidential, so the lab ships a generator whose output has what makes
small areas disclosive (docs/europe.md, "The synthetic population"): thousands of small LAUs and a
large capital, sparse rural 1 km cells, households of related people whose statuses hang
together, and foreign-born persons concentrated in a few regions and towns.

The stages: households and their members (:mod:`~sdclab.censuses.eu2021.synth_households`),
where they live (:mod:`~sdclab.censuses.eu2021.synth_geography`) and the traits that follow from
age and place (:mod:`~sdclab.censuses.eu2021.synth_traits`). Each stage draws from its own child
stream of the seed, so a change to one stage does not reshuffle the others. Everything is
vectorised; the only Python loops run over household types.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from sdclab.censuses.eu2021 import census
from sdclab.censuses.eu2021.synth_geography import (
    COUNTRY,
    Geography,
    grid_codes,
    place_households,
    region_codes,
)
from sdclab.censuses.eu2021.synth_households import People, draw_households, draw_people
from sdclab.censuses.eu2021.synth_traits import (
    CAS,
    CAS_AGE_EDGES,
    CAS_BY_AGE,
    EDU,
    EDU_AGE_EDGES,
    EDU_BY_AGE,
    birthplace_and_citizenship,
    by_age_band,
    countries,
    lau_foreign_shares,
    locality_size,
    origin_units,
    region_foreign_shares,
    residence_a_year_before,
)

GENERATOR_VERSION = "1.2"
"""Bumped whenever a change alters the output for a given seed."""
STAGES = (
    "households",
    "people",
    "geography",
    "regions",
    "origins",
    "moves",
    "activity",
    "education",
    "countries",
)
"""The child streams, in spawn order (new stages go at the end, leaving earlier streams as they
were)."""
PERSONS_PER_LAU = 150
"""Persons per LAU unless told (300,000 persons make 2,000 LAUs)."""
COLUMNS = (
    "person_id", "household_id", "country", "nuts1", "nuts2", "nuts3", "lau", "grid10km",
    "grid1km", "SEX", "AGE", "COC", "POB", "CAS", "EDU", "HST", "FST", "LMS", "ROY", "LOC",
)  # fmt: skip
"""The frame's columns, in order: identifiers, geography, then the census's attributes."""
SMALL_LAU = 500
"""describe() reports the share of LAUs with fewer persons than this."""


def synthesize(persons: int, seed: int, *, laus: int | None = None) -> pl.DataFrame:
    """One row per person of a synthetic EU 2021 census population: ``persons`` persons in
    ``laus`` LAUs (default one per :data:`PERSONS_PER_LAU` persons; at most one per household).

    The same seed gives an identical frame. Every column is text, coded as the ``eu2021``
    census declares it."""
    for name, value in (("persons", persons), ("seed", seed), ("laus", laus)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if persons < 1 or seed < 0 or (laus is not None and laus < 1):
        raise ValueError("persons and laus must be at least 1 and seed non-negative")
    laus = max(1, persons // PERSONS_PER_LAU) if laus is None else laus
    children = np.random.SeedSequence(seed).spawn(len(STAGES))
    rng = {
        s: np.random.Generator(np.random.PCG64(c)) for s, c in zip(STAGES, children, strict=True)
    }
    households = draw_households(rng["households"], persons)
    people = draw_people(rng["people"], households)
    geography = place_households(rng["geography"], households.size, laus)
    columns = _geography_columns(people, geography) | _trait_columns(rng, people, geography)
    return _frame(columns, people, geography)


def _geography_columns(people: People, geography: Geography) -> dict[str, Any]:
    """Each person's admin units (codes) and 1 km cell (km coordinates, coded later)."""
    codes = region_codes(geography)
    lau = geography.lau[people.household]
    nuts3 = geography.nuts3_of_lau[lau]
    nuts2 = geography.nuts2_of_nuts3[nuts3]
    return {
        "country": np.full(len(lau), COUNTRY),
        "nuts1": np.asarray(codes["nuts1"])[geography.nuts1_of_nuts2[nuts2]],
        "nuts2": np.asarray(codes["nuts2"])[nuts2],
        "nuts3": np.asarray(codes["nuts3"])[nuts3],
        "lau": np.asarray(codes["lau"])[lau],
        "east_km": geography.east_km[people.household],
        "north_km": geography.north_km[people.household],
    }


def _trait_columns(
    rng: dict[str, np.random.Generator], people: People, geography: Geography
) -> dict[str, Any]:
    """The census's attributes of every person."""
    lau = geography.lau[people.household]
    region_of_lau = geography.nuts2_of_nuts3[geography.nuts3_of_lau]
    region_share = region_foreign_shares(rng["regions"], int(geography.nuts2_of_nuts3.max()) + 1)
    lau_share = lau_foreign_shares(region_share, region_of_lau, geography.lau_persons)
    unit = origin_units(people)
    pob, coc, foreign = birthplace_and_citizenship(rng["origins"], people, unit, lau_share[lau])
    pob, coc = countries(rng["countries"], unit, pob, coc)  # own stream: the continents stay
    return {
        "SEX": np.where(people.female, "F", "M"),
        "AGE": np.asarray(census().attribute("AGE").codes)[people.age],  # AGE.H: year by year
        "COC": coc,
        "POB": pob,
        "CAS": by_age_band(rng["activity"], people.age, CAS_AGE_EDGES, CAS_BY_AGE, CAS),
        "EDU": by_age_band(rng["education"], people.age, EDU_AGE_EDGES, EDU_BY_AGE, EDU),
        "HST": people.hst,
        "FST": people.fst,
        "LMS": people.lms,
        "ROY": residence_a_year_before(rng["moves"], people.age, unit, foreign),
        "LOC": locality_size(geography.lau_persons)[lau],
    }


def _frame(columns: dict[str, Any], people: People, geography: Geography) -> pl.DataFrame:
    """The persons as a frame in geographic order, households numbered in that order."""
    order = np.lexsort((geography.north_km, geography.east_km, geography.lau))
    number = np.empty(len(order), dtype=np.int64)
    number[order] = np.arange(len(order))
    household = number[people.household]
    rows = np.argsort(household, kind="stable")
    frame = pl.DataFrame({k: np.asarray(v)[rows] for k, v in columns.items()})
    one, ten = grid_codes(pl.col("east_km"), pl.col("north_km"))
    width = len(str(len(rows)))
    return frame.with_columns(
        person_id=pl.format("P{}", pl.int_range(1, len(rows) + 1).cast(pl.String).str.zfill(width)),
        household_id=pl.format(
            "H{}", pl.Series(household[rows] + 1).cast(pl.String).str.zfill(width)
        ),
        grid10km=ten,
        grid1km=one,
    ).select(pl.col(c).cast(pl.String) for c in COLUMNS)


def describe(frame: pl.DataFrame) -> dict[str, Any]:
    """A small summary of a synthetic population for ``synth.json``: its size, how small its
    areas are and how unevenly the foreign-born are spread."""
    lau_sizes = frame.group_by("lau").len()
    largest = lau_sizes.sort(["len", "lau"], descending=[True, False]).row(0, named=True)
    foreign = pl.col("POB") != "NAT"
    by_region = frame.group_by("nuts2").agg(foreign.mean().alias("share"))["share"]
    private = frame.filter(~pl.col("HST").is_in(["INST", "HOMELESS"]))
    sizes = private.group_by("household_id").len()["len"]
    counts = sizes.clip(upper_bound=6).value_counts().sort("len")
    return {
        "generator_version": GENERATOR_VERSION,
        "persons": frame.height,
        "households": frame["household_id"].n_unique(),
        "laus": lau_sizes.height,
        "share_of_laus_under_500": _rounded((lau_sizes["len"] < SMALL_LAU).mean()),
        "largest_lau": {"lau": largest["lau"], "persons": largest["len"]},
        "grid1km_cells": frame["grid1km"].n_unique(),
        "grid10km_squares": frame["grid10km"].n_unique(),
        "foreign_born_share": _rounded(frame.select(foreign.mean()).item()),
        "foreign_born_share_by_nuts2": {
            "min": _rounded(by_region.min()),
            "max": _rounded(by_region.max()),
        },
        "private_household_sizes": {
            ("6+" if s == 6 else str(s)): int(c) for s, c in counts.iter_rows()
        },
        "mean_private_household_size": _rounded(private.height / max(1, sizes.len())),
        "institutional_persons": int((frame["HST"] == "INST").sum()),
        "homeless_persons": int((frame["HST"] == "HOMELESS").sum()),
    }


def _rounded(value: Any) -> float:
    """A share or mean to four decimals (0 for an empty frame)."""
    return 0.0 if value is None else round(float(value), 4)
