"""Seeded synthetic census population, calibrated to published 2010 national marginals.

Real census microdata is confidential, so the lab ships a generator whose output looks like a census
edited file where it matters for disclosure control: many small blocks, segregated neighbourhoods,
households of related people, group-quarters facilities and rare race combinations
(docs/synthetic-population.md).

The generator works on one random *sequence* of occupied units (households and group-quarters
facilities). Every level of geography is a run of consecutive positions in that sequence, measured
in persons: blocks are runs of lognormal length, block groups and tracts runs of bounded length,
counties groups of tracts and states groups of counties. A unit belongs to the block that contains
its midpoint, so the hierarchy nests by construction and persons come out in geocode order.

Everything is vectorised numpy; the only Python loops run over a handful of categories (household
size classes, group-quarters types, relationship roles). Each stage draws from its own child stream
of one PCG64 generator, so a change to one stage does not reshuffle the others.

This module runs the stages and assembles their output; the stages are
:mod:`~sdclab.censuses.us2010.population.synth_households` (1, 3, 5, 6),
:mod:`~sdclab.censuses.us2010.population.synth_geography` (2) and
:mod:`~sdclab.censuses.us2010.population.synth_race` (4, 7), the targets
:mod:`~sdclab.censuses.us2010.population.synth_targets`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from sdclab.censuses.us2010.geography import truncate
from sdclab.censuses.us2010.population.columns import (
    HISPANIC_ORIGIN,
    PERSONS,
    RACE_CODE_COLUMNS,
    UNITS,
)
from sdclab.censuses.us2010.population.contract import Population
from sdclab.censuses.us2010.population.synth_geography import (
    GeographyCounts,
    GeographyPlan,
    place_in_blocks,
    plan_geography,
)
from sdclab.censuses.us2010.population.synth_households import (
    OccupiedUnits,
    People,
    draw_occupied_units,
    draw_people,
    draw_tenure,
    draw_vacant_units,
    with_empty_blocks,
)
from sdclab.censuses.us2010.population.synth_race import (
    RACE_MIXING,
    DetailedRace,
    draw_detailed_race,
    draw_race_ethnicity,
)
from sdclab.censuses.us2010.population.synth_targets import (
    TARGETS,
    measure_marginals,
    nonmodal_share,
    race_ethnicity_group,
)
from sdclab.core.arrays import IntArray
from sdclab.core.errors import InputError
from sdclab.core.randomness import make_rng

GENERATOR_VERSION = "2.0"
"""The version :func:`synthesize` makes unless told; bumped whenever a change alters the output
for a given seed. 1.1 added the detailed race and Hispanic origin columns; every column of 1.0 is
unchanged for every seed. 1.2 added the geography counts (a population made without them is
unchanged). 2.0 makes tracts diverse or dominated by one group, mixes race and ethnicity within
households as the 2010 census found them and adds blocks without any unit (:data:`RACE_MIXING`,
:data:`POPULATED_BLOCK_SHARE`)."""
GENERATOR_VERSIONS = ("1.2", "2.0")
"""The versions :func:`synthesize` can make, so that a study of an earlier version reproduces
byte for byte (1.0 and 1.1 are the populations 1.2 makes without geography counts)."""

STAGES = (
    "households",
    "geography",
    "people",
    "race",
    "tenure",
    "vacancy",
    "detailed_race",
    "empty_blocks",
)
"""The child streams, in spawn order. New stages go at the end: SeedSequence children are keyed by
their index, so appending a stage leaves every earlier stream (and column) unchanged."""


# =============================================================================================
# Public entry points
# =============================================================================================


def synthesize(
    n_persons: int,
    seed: int | None = None,
    geography: GeographyCounts | None = None,
    version: str = GENERATOR_VERSION,
) -> Population:
    """Seeded synthetic census population of exactly n_persons persons.

    The same seed gives identical frames; ``seed=None`` draws from OS entropy. ``geography``
    sets the number of tracts, counties or states (otherwise they follow the population's size).
    ``version`` is one of :data:`GENERATOR_VERSIONS`: an earlier version's population is made
    byte for byte as that version made it. :func:`build_report` measures it against
    :data:`TARGETS` for ``synth.json``.
    """
    check_version(version)
    if isinstance(n_persons, bool) or not isinstance(n_persons, int | np.integer):
        raise TypeError(f"n_persons must be an integer, got {type(n_persons).__name__}")
    if n_persons < 1:
        raise ValueError(f"n_persons must be at least 1, got {n_persons}")
    n = int(n_persons)
    geography = geography or GeographyCounts()
    geography.check(n)
    streams = dict(zip(STAGES, make_rng(seed).spawn(len(STAGES)), strict=True))

    units = draw_occupied_units(streams["households"], n)
    plan = plan_geography(streams["geography"], n, geography)
    unit_block = place_in_blocks(units.sizes, plan.block_end)
    people = draw_people(streams["people"], units)
    mixing = RACE_MIXING[version]
    race, hispanic = draw_race_ethnicity(streams["race"], plan, units, unit_block, people, mixing)
    tenure = draw_tenure(streams["tenure"], units, people)
    vacant_block = draw_vacant_units(streams["vacancy"], plan, units, unit_block)
    detailed = draw_detailed_race(streams["detailed_race"], units, people, race, hispanic)
    empty: IntArray | None = None
    if version != "1.2":
        populated = unit_block[units.sizes > 0]
        with_units = np.concatenate([unit_block, vacant_block])
        plan, empty = with_empty_blocks(streams["empty_blocks"], plan, populated, with_units)
    population = assemble(
        plan, units, unit_block, people, race, hispanic, tenure, vacant_block, detailed, empty
    )
    summary = population.geography.summary
    for level, given in (("tract", "tracts"), ("county", "counties"), ("state", "states")):
        asked = getattr(geography, given)
        if asked is not None and summary[level] != asked:  # a unit wider than a small tract
            raise InputError(
                f"{given} {asked}: this seed makes {summary[level]}, as a tract's persons all "
                f"fell into a neighbour's large unit (a group-quarters facility); ask for fewer "
                f"{given} or give another seed"
            )
    return population


def check_version(version: str) -> None:
    """ValueError in words for a version the generator cannot make."""
    if version not in GENERATOR_VERSIONS:
        raise ValueError(
            f"generator version {version!r}: expected one of {', '.join(GENERATOR_VERSIONS)}"
        )


# =============================================================================================
# Assembly and report
# =============================================================================================


def assemble(
    plan: GeographyPlan,
    units: OccupiedUnits,
    unit_block: IntArray,
    people: People,
    race: IntArray,
    hispanic: IntArray,
    tenure: IntArray,
    vacant_block: IntArray,
    detailed: DetailedRace,
    empty: IntArray | None = None,
) -> Population:
    """Contract frames: units ordered by block (occupied first), ids 0.. in that order; persons
    carry the optional detailed race and Hispanic origin columns; the blocks table lists the
    blocks ``empty`` (geocodes of blocks without any unit), when given."""
    all_block = np.concatenate([unit_block, vacant_block])
    is_vacant = np.concatenate([np.zeros(len(unit_block), bool), np.ones(len(vacant_block), bool)])
    order = np.lexsort((is_vacant, all_block))
    unit_id = np.empty(len(order), dtype=np.int64)
    unit_id[order] = np.arange(len(order))

    used, block_row = np.unique(all_block, return_inverse=True)
    code_strings = pl.Series("block", plan.block_code[used]).cast(pl.String).str.zfill(15)
    unit_type = np.concatenate([units.kind, np.zeros(len(vacant_block), dtype=np.int64)])
    all_tenure = np.concatenate([tenure, np.zeros(len(vacant_block), dtype=np.int64)])
    unit_frame = pl.DataFrame(
        {
            "unit_id": np.arange(len(order), dtype=np.int64),
            "block": code_strings.gather(block_row[order]),
            "unit_type": unit_type[order].astype(np.int8),
            "occupied": ~is_vacant[order],
            "tenure": all_tenure[order].astype(np.int8),
        },
        schema={spec.name: spec.dtype for spec in UNITS},
    ).with_columns(pl.col("tenure").replace(0, None))

    n = len(people.unit)
    person_frame = pl.DataFrame(
        {
            "person_id": np.arange(n, dtype=np.int64),
            "unit_id": unit_id[people.unit],
            "block": code_strings.gather(block_row[people.unit]),
            "relationship": people.relationship.astype(np.int8),
            "sex": people.sex.astype(np.int8),
            "age": people.age.astype(np.int16),
            "race": race.astype(np.int8),
            "hispanic": hispanic.astype(np.int8),
        },
        schema={spec.name: spec.dtype for spec in PERSONS},
    ).with_columns(
        *[
            pl.Series(name, detailed.codes[:, i], dtype=pl.Int16).replace(0, None)
            for i, name in enumerate(RACE_CODE_COLUMNS)
        ],
        pl.Series(HISPANIC_ORIGIN.name, detailed.origin, dtype=pl.Int16),
    )
    blocks = None
    if empty is not None:
        blocks = pl.DataFrame(
            {"block": pl.Series("block", np.sort(empty)).cast(pl.String).str.zfill(15)}
        )
    return Population._trusted(person_frame, unit_frame, blocks)  # valid by construction


def geography_counts(population: Population) -> dict[str, int]:
    """Number of units, blocks and geounits at every level."""
    geo = population.geography
    person_blocks = np.unique(population.person_block_index)
    unit_blocks = np.unique(population.unit_block_index)
    unit_type = population.units.get_column("unit_type").to_numpy()
    occupied = population.units.get_column("occupied").to_numpy()
    return {
        "persons": population.n_persons,
        "units": population.n_units,
        "housing_units": int((unit_type == 0).sum()),
        "occupied_housing_units": int(((unit_type == 0) & occupied).sum()),
        "vacant_housing_units": int(((unit_type == 0) & ~occupied).sum()),
        "gq_facilities": int((unit_type > 0).sum()),
        "blocks": geo.n_blocks,
        "populated_blocks": len(person_blocks),
        "blocks_with_units_only": len(unit_blocks) - len(person_blocks),
        "blocks_without_units": geo.n_blocks - len(unit_blocks),
        "block_groups": geo.n_units("block_group"),
        "tracts": geo.n_units("tract"),
        "counties": geo.n_units("county"),
        "states": geo.n_units("state"),
    }


def geounit_size_summary(population: Population) -> dict[str, dict[str, float]]:
    """Min, median and max persons per populated geounit at block, block group, tract, county."""
    geo = population.geography
    block_index = population.person_block_index
    summary = {}
    for level in ("block", "block_group", "tract", "county"):
        codes = truncate(geo.blocks, level)[block_index]
        _, sizes = np.unique(codes, return_counts=True)
        summary[level] = {
            "min": int(sizes.min()),
            "median": float(np.median(sizes)),
            "max": int(sizes.max()),
        }
    return summary


def build_report(
    population: Population,
    seed: int | None,
    geography: GeographyCounts | None = None,
    version: str = GENERATOR_VERSION,
) -> dict[str, Any]:
    """The ``synth.json`` document: parameters (with the geography counts given and the
    generator ``version`` that made the population), counts and marginals against targets."""
    generated = measure_marginals(population)
    persons = population.persons
    group = race_ethnicity_group(
        persons.get_column("race").to_numpy(), persons.get_column("hispanic").to_numpy()
    )
    block_sizes = np.bincount(population.person_block_index)
    return {
        "generator": "sdclab.censuses.us2010.population.synth",
        "parameters": {
            "n_persons": population.n_persons,
            "seed": seed,
            "randomness": "os-entropy" if seed is None else "seed",
            "generator_version": version,
            **(geography.to_dict() if geography else {}),
        },
        "counts": geography_counts(population),
        "geounit_persons": geounit_size_summary(population),
        "blocks_1000_plus_persons": int((block_sizes >= 1000).sum()),
        "nonmodal_share": round(nonmodal_share(population.person_block_index, group), 4),
        "marginals": {
            name: {
                "description": target.description,
                "unit": target.unit,
                "target": target.value,
                "generated": round(generated[name], 4),
                "tolerance": target.tolerance,
                "tolerance_is_relative": target.relative,
                "within_tolerance": target.accepts(generated[name]),
                "source": target.source,
            }
            for name, target in TARGETS.items()
        },
    }
