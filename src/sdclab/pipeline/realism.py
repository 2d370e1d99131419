"""Realism of a population against the 2010 attack: the figures that make the attack work or fail.

Every verdict sdclab prints about the US census is measured on a population, so the population
must have the properties Abowd et al. ("A Simulated Reconstruction and Reidentification Attack on
the 2010 U.S. Census") report for the confidential 2010 file: how often the proportional guesser is
right about nonmodal persons, how many blocks are populated, how many persons are unique on
{block, sex, age}, how many blocks the published tables pin down (solvar = 0) with and without the
race tables P8 and P10, how many persons are multiracial. Each function below takes a
:class:`~sdclab.censuses.us2010.population.Population` and returns one share (0–1); the solvar
figures reconstruct the population's exact release first. :data:`REFERENCES` holds the paper's value
and the target range of each figure; docs/synthetic-population.md (*Realism against the attack
paper*) says where the paper states it. The measuring instrument is independent of the generator, so
that it can calibrate it (``benchmarks/realism.py``).

Nonmodal persons are those of :func:`sdclab.attacks.linkage.block_modes` (a tie for a block's mode
goes to the smallest code), as the reidentification's breakdowns count them, so that the expected
precision here is what ``sdclab reidentify`` measures for the proportional guesser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from sdclab.attacks.linkage import block_modes, population_uniques, race_ethnicity
from sdclab.attacks.reconstruction import BLOCK_TABLES, TIME_LIMIT, TRACT_TABLES, reconstruct
from sdclab.attacks.variability import proven_zero, solution_variability
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import truncate
from sdclab.censuses.us2010.population import Population
from sdclab.core.execution import Executor
from sdclab.core.optimize.highs import OPTIMAL_STATUS
from sdclab.release import exact_release

ATTACK_TABLES = BLOCK_TABLES + TRACT_TABLES
"""The 34 person tables of the 2010 reconstruction: P1, P6–P11, P12, P12A–I, P14 and PCT12,
PCT12A–O."""
WITHOUT_P8_P10 = tuple(t for t in ATTACK_TABLES if t not in ("P8", "P10"))
"""The 32 tables of the Bureau's earlier runs, which left out P8 (race) and P10 (race, 18+)."""


@dataclass(frozen=True)
class Reference:
    """What the 2010 file gives for one figure, and the range a realistic population keeps to."""

    paper: str
    """The figure as the paper states it (or derives from figures it states)."""
    low: float
    high: float

    def holds(self, value: float) -> bool:
        """Whether ``value`` (a share 0–1) is inside the target range."""
        return self.low <= value <= self.high


REFERENCES = {
    "prg_nonmodal_precision": Reference("16.0%–16.7%", 0.16, 0.18),
    "populated_blocks": Reference("56.0% (6,207,027 of 11,078,297 blocks)", 0.50, 0.62),
    "unique_on_block_sex_age": Reference("44%", 0.40, 0.48),
    "solvar0_blocks": Reference("70% of populated blocks", 0.65, 0.75),
    "solvar0_persons": Reference("31.5% (97,238,000 of 308,745,538 persons)", 0.28, 0.35),
    "multiracial": Reference("2.9% (2010 census; not stated in the paper)", 0.025, 0.035),
}
"""Paper value and target range (shares 0–1) of each figure the realism benchmark holds."""
P8_P10_DROP = Reference("70% → 65% of populated blocks (5 points)", 0.03, 1.0)
"""How much dropping P8 and P10 must lower the share of solvar-0 blocks (a difference of shares:
0.03 is 3 points)."""


def _race_ethnicity_cells(population: Population) -> pl.DataFrame:
    """Per person: block, race, race-ethnicity ``code``, whether data-defined, persons of that
    code in the block (``same``), persons of the block (``size``) and whether the code is the
    block's mode."""
    persons = population.persons
    code = race_ethnicity(persons["race"].to_numpy(), persons["hispanic"].to_numpy())
    frame = pl.DataFrame(
        {
            "block": population.person_block_index,
            "race": persons["race"].to_numpy().astype(np.int64),
            "code": code,
            "data_defined": population.data_defined,
        }
    )
    return (
        frame.join(block_modes(frame), on="block")
        .with_columns(
            same=pl.len().over("block", "code"),
            size=pl.len().over("block"),
            modal=pl.col("code") == pl.col("mode"),
        )
        .drop("mode")
    )


def _share(mask: pl.Series | np.ndarray) -> float:
    """Share of true values (NaN when there is none to count)."""
    values = np.asarray(mask, dtype=bool)
    return float(values.mean()) if values.size else float("nan")


def prg_nonmodal_precision(population: Population) -> float:
    """Expected precision of the proportional guesser (PRG) on nonmodal persons.

    PRG draws each record's race-ethnicity from its block's exact distribution, so it is right
    about a person with the probability that their own race-ethnicity is drawn: the share of their
    block that shares it. This is the mean of that share over nonmodal persons; with a
    census-quality attacker (every person linked once, on their true block, sex and age) it is
    the expectation of PRG's nonmodal precision. Over data-defined persons, as the paper counts
    them (every person of a population without the column)."""
    cells = _race_ethnicity_cells(population).filter(~pl.col("modal") & pl.col("data_defined"))
    share = cells["same"].to_numpy() / cells["size"].to_numpy()
    return float(share.mean()) if share.size else float("nan")


def populated_blocks(population: Population) -> float:
    """Share of the blocks of the population's geography with at least one person."""
    populated = np.unique(population.person_block_index).size
    return populated / population.geography.n_blocks


def unique_on_block_sex_age(population: Population) -> float:
    """Share of persons alone in their block with their sex and single year of age."""
    return population_uniques(population)["unique_on_block_sex_age"]


def multiracial(population: Population) -> float:
    """Share of persons of two or more races."""
    return _share(schema.race_bit_count(population.persons["race"].to_numpy()) >= 2)


def one_race_ethnicity_households(population: Population) -> float:
    """Share of households of two or more persons (occupied housing units; group quarters left
    out) whose persons all have one race-ethnicity (63 races × Hispanic origin)."""
    persons = population.persons
    unit = population.person_unit_row
    in_household = population.units["unit_type"].to_numpy()[unit] == 0
    frame = pl.DataFrame(
        {
            "unit": unit[in_household],
            "code": race_ethnicity(persons["race"].to_numpy(), persons["hispanic"].to_numpy())[
                in_household
            ],
        }
    )
    households = frame.group_by("unit").agg(persons=pl.len(), codes=pl.col("code").n_unique())
    return _share(households.filter(pl.col("persons") >= 2)["codes"] == 1)


def alone_in_race_ethnicity_cell(population: Population) -> float:
    """Share of persons with no one else of their race-ethnicity in their block."""
    return _share(_race_ethnicity_cells(population)["same"] == 1)


def multiracial_unique_on_race(population: Population) -> float:
    """Share of multiracial persons with no one else of their race (the 63-race code) in their
    block."""
    cells = _race_ethnicity_cells(population).with_columns(same_race=pl.len().over("block", "race"))
    multi = schema.race_bit_count(cells["race"].to_numpy()) >= 2
    return _share(cells["same_race"].to_numpy()[multi] == 1)


# ---------------------------------------------------------------------------------------------
# Solution variability of the exact release
# ---------------------------------------------------------------------------------------------


def exact_solvar(
    population: Population,
    tables: Sequence[str] = ATTACK_TABLES,
    workers: Executor | int | None = None,
    seed: int = 0,
    time_limit: float = TIME_LIMIT,
) -> pl.DataFrame:
    """solvar per populated block (:func:`~sdclab.attacks.variability.solution_variability`) of
    the population's exact release of ``tables``, reconstructed from those tables alone."""
    release = exact_release(population, list(tables))
    records = reconstruct(release, workers, seed, time_limit)
    return solution_variability(release, records, workers, seed, time_limit)


@dataclass(frozen=True)
class SolvarZero:
    """Blocks whose reconstruction is proven unique (solvar = 0, program solved to optimality)."""

    blocks: float
    """Share of the populated blocks measured."""
    persons: float
    """Share of their persons."""
    measured: int
    """Populated blocks measured."""
    unproven: int
    """Blocks whose program stopped before proving its optimum (never counted as solvar 0)."""


def solvar_zero(solvar: pl.DataFrame) -> SolvarZero:
    """The solvar-0 shares of a frame of :func:`exact_solvar` (or ``solvar.parquet``)."""
    proven = pl.col("status") == OPTIMAL_STATUS
    zero = solvar.filter(proven_zero(solvar))
    persons = int(solvar["persons"].sum())
    return SolvarZero(
        blocks=zero.height / solvar.height if solvar.height else float("nan"),
        persons=int(zero["persons"].sum()) / persons if persons else float("nan"),
        measured=solvar.height,
        unproven=solvar.filter(~proven).height,
    )


def tract_sample(population: Population, tracts: int, seed: int) -> Population:
    """The persons and units of ``tracts`` populated tracts drawn at random (all if there are no
    more): a population whose tracts reconstruct as they do in the whole, since each tract's
    program reads only that tract's tables."""
    blocks = population.geography.blocks
    of_person = np.unique(truncate(blocks[population.person_block_index], "tract"))
    if tracts >= of_person.size:
        return population
    chosen = np.random.default_rng(seed).choice(of_person, tracts, replace=False)
    keep = lambda frame: frame.filter(  # noqa: E731
        pl.Series(np.isin(truncate(frame["block"].cast(pl.Int64).to_numpy(), "tract"), chosen))
    )
    return Population(persons=keep(population.persons), units=keep(population.units))
