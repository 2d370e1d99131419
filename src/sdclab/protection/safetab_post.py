"""SafeTab-H's optional post-processing of its published group tables (docs/safetab_h.md,
*Post-processing*): every step reads only the noisy tables and public facts (the geography's
blocks; whether a geounit holds a housing unit, an invariant the card then lists).

* **Geographies without housing units** (``drop_no_housing``): a geounit holding no housing unit
  (occupied or vacant; group quarters are not housing units) publishes no household table — its
  groups exist only through group-quarters persons in T01001, and every cell would be noise
  around 0.
* **Coterminous geographies** (``coterminous``): a geounit whose blocks are exactly its parent's
  (the parent's only child in the geography) publishes its parent's tables, so that two names for
  one area give one set of counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.censuses.us2010.geography import geoid_strings
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.safetab_groups import REGION_OF, REGION_TYPES
from sdclab.core.geography import Geography
from sdclab.core.privacy import Invariant


class SafeTabHParameters(Protocol):
    """What the post-processing reads of SafeTab-H's parameters (``safetab_h``'s, whose module
    imports this one)."""

    @property
    def clamp(self) -> bool: ...
    @property
    def coterminous(self) -> bool: ...
    @property
    def drop_no_housing(self) -> bool: ...

    def rho(self, region: str, level: int) -> Fraction: ...


_LEVELS = list(REGION_OF)  # (top down)
LEVEL_ABOVE = dict(zip(_LEVELS[1:], _LEVELS, strict=False))
"""The parent level of every SafeTab-H geography level but the nation, top down."""

HOUSING_INVARIANT = Invariant(
    "whether a geounit holds a housing unit", "nation, state, county, tract"
)
"""What ``drop_no_housing`` reads beyond the noisy tables: public, as the 2020 Census held the
housing-unit counts invariant; the guarantee holds within it."""


def derived_margin(rho: Fraction, s: int, k: int) -> float:
    """The 95% margin of error of a cell summing ``k`` measured cells of ρ and stability s, by the
    normal approximation 1.96·√(k·s/(2ρ)) (the sum of k discrete Gaussians is not one itself)."""
    return 1.96 * math.sqrt(k * s / (2 * float(rho)))


def coterminous_units(geography: Geography, level: str) -> tuple[npt.NDArray[np.int64], ...]:
    """(children, parents): the geounits at ``level`` whose blocks are exactly their parent's —
    their parent's only child, since the children of a geounit partition its blocks — and those
    parents, as indices into the two levels' codes."""
    above = LEVEL_ABOVE[level]
    parent = geography.parents(above, level)
    children = np.bincount(parent, minlength=geography.n_units(above))
    alone = np.flatnonzero(children[parent] == 1)
    return alone, parent[alone]


def coterminous_counts(geography: Geography) -> dict[str, int]:
    """How many geounits of each level have their parent's extent (``"county=state"``: …)."""
    return {
        f"{level}={above}": len(coterminous_units(geography, level)[0])
        for level, above in LEVEL_ABOVE.items()
    }


def copy_coterminous(
    frame: pl.DataFrame, geography: Geography, measured: Callable[[str, int], bool]
) -> pl.DataFrame:
    """``frame`` (group tables or totals) with every coterminous geounit's rows replaced by its
    parent's, top down (a county equal to a state equal to the nation gets the nation's).

    ``measured(level, iteration_level)`` says whether a level is measured at an iteration level:
    rows are copied only where both the geounit's level and its parent's are (a level measured
    nowhere publishes nothing, and a geounit whose parent's level is not keeps its own rows)."""
    for level, above in LEVEL_ABOVE.items():
        child, parent = coterminous_units(geography, level)
        if not len(child):
            continue
        pairs = pl.DataFrame(
            {
                "geoid": geoid_strings(geography.codes(level)[child], level),
                "parent": geoid_strings(geography.codes(above)[parent], above),
            }
        )
        copied = [lv for lv in (1, 2) if measured(above, lv) and measured(level, lv)]
        its = pl.col("iteration_level").is_in(copied)
        replaced = (
            (pl.col("level") == level) & its & pl.col("geoid").is_in(pairs["geoid"].implode())
        )
        from_parent = (
            frame.filter((pl.col("level") == above) & its)
            .rename({"geoid": "parent"})
            .join(pairs, on="parent")
            .with_columns(level=pl.lit(level, dtype=pl.String))
            .select(frame.columns)
        )
        frame = pl.concat([frame.filter(~replaced), from_parent])
    return frame


def housing_geounits(population: Population, level: str) -> pl.Series:
    """The geoids at ``level`` that hold at least one housing unit (unit type 0, occupied or
    vacant)."""
    geography = population.geography
    housing = population.units.get_column("unit_type").to_numpy() == 0
    blocks = np.bincount(population.unit_block_index[housing], minlength=geography.n_blocks)
    per_unit = geography.aggregation(level) @ blocks
    return geography.geoids(level).filter(pl.Series(per_unit > 0))


def drop_no_housing(frame: pl.DataFrame, population: Population) -> tuple[pl.DataFrame, int]:
    """``frame`` without the rows of geounits that hold no housing unit, and how many geounits
    with published rows were removed."""
    key = pl.concat_str("level", "geoid", separator="|")
    housing = pl.concat(
        [lv + "|" + housing_geounits(population, lv) for lv in REGION_TYPES.values()]
    )
    inside = frame.select(key.is_in(housing.implode())).to_series()
    gone = frame.filter(~inside).select("level", "geoid").unique().height
    return frame.filter(inside), gone


def coterminous_problem(
    frame: pl.DataFrame, geography: Geography, measured: Callable[[str, int], bool]
) -> str | None:
    """The first coterminous geounit whose published rows differ from its parent's, or None."""
    expected = copy_coterminous(frame, geography, measured)
    differ = pl.concat(
        [
            frame.join(expected, on=frame.columns, how="anti", nulls_equal=True),
            expected.join(frame, on=frame.columns, how="anti", nulls_equal=True),
        ]
    )
    if differ.height:
        r = differ.row(0, named=True)
        return (
            f"{r['level']} {r['geoid']} has its parent's extent but not its parent's counts "
            f"(iteration {r['iteration']})"
        )
    return None


def measured_at(p: SafeTabHParameters, totals: bool) -> Callable[[str, int], bool]:
    """Whether a geography level is measured at an iteration level: everywhere for a noisy
    T01001's totals, else where the level's ρ there is not 0."""
    if totals:
        return lambda _level, _it_level: True
    return lambda level, it_level: bool(p.rho(REGION_OF[level], it_level))


def post_process(
    group_tables: pl.DataFrame,
    totals: list[pl.DataFrame],
    population: Population,
    p: SafeTabHParameters,
) -> tuple[pl.DataFrame, list[pl.DataFrame], dict[str, Any]]:
    """The optional post-processing of the noisy tables (and totals), after every draw: the
    coterminous copies, then the geographies without housing units removed; the notes say how
    many geounits each step touched."""
    notes: dict[str, Any] = {}
    geography = population.geography
    if p.coterminous:
        group_tables = copy_coterminous(group_tables, geography, measured_at(p, totals=False))
        if totals:
            every = pl.concat(totals)
            totals = [copy_coterminous(every, geography, measured_at(p, totals=True))]
        notes["coterminous_geounits"] = coterminous_counts(geography)
    if p.drop_no_housing:
        group_tables, gone = drop_no_housing(group_tables, population)
        notes["geounits_without_housing_dropped"] = gone
    return group_tables, totals, notes


def post_processing_lines(p: SafeTabHParameters) -> list[str]:
    """The card's lines on the post-processing steps: each reads only noisy cells and public
    facts, so the guarantee above is unchanged; the derived cells' margin of error."""
    lines = [
        "Marginal aggregation (post-processing, guarantee unchanged): a variant's coarser cells "
        "are sums of its k measured cells (k = 2 to 5), not measured; their 95% margin of error "
        "is 1.96·√(k·s/(2 rho)) by the normal approximation."
    ]
    if p.clamp:
        lines.append(
            "clamp (post-processing, guarantee unchanged): negative measured cells are set to 0 "
            "before the derived cells are summed; the cells are then biased upwards near 0."
        )
    if p.drop_no_housing:
        lines.append(
            "drop_no_housing (post-processing of public facts): a geounit holding no housing "
            "unit publishes no table; whether a geounit holds one is read as public (the 2020 "
            "Census held housing-unit counts invariant), so the guarantee holds within that "
            "invariant, its budget unchanged."
        )
    if p.coterminous:
        lines.append(
            "coterminous (post-processing, guarantee unchanged): a geounit whose blocks are "
            "exactly its parent's publishes its parent's noisy tables (and a noisy T01001) in "
            "place of its own measurement, which is still drawn and charged; its margin of error "
            "is its parent's."
        )
    return lines
