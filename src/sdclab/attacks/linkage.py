"""Reidentification: link reconstructed records to an attacker's file of names and addresses.

As in Abowd et al., "A Simulated Reconstruction and Reidentification Attack on the 2010 U.S.
Census" (docs/reidentification.md). An attacker file holds an identifier and
{block, sex, age} with realistic defects. Reconstructed records are linked to it one-to-one on
{block, sex, age}, then the leftovers on {block, sex, agebin}; ties are broken in a seeded random
order. A link is *putative*; it is *confirmed* when the attacker's identifier belongs to a census
person whose block, sex, age (or agebin, for second-pass links), race and Hispanic origin all equal
what the link says. Precision = confirmed / putative; rates are over attacker records.

The attack needs the key it links on and the inference it attaches: a reconstruction that lacks
sex, age, race or Hispanic origin for every record (that of a PL 94-171 release, which publishes no
sex and no single-year age) cannot be linked this way, and :func:`reidentify` refuses it. Linking it
on {block, voting age} would pair each name with a random neighbour of the same voting age, a
proportional guess that the figures would dress up as reidentification. Records that lack an
attribute only in part of a reconstruction are simply never linked on it.

Two baselines need no reconstruction, only the release's block tables: the modal guesser (MDG)
gives everyone the block's most common race-ethnicity, the proportional guesser (PRG) draws it from
the block's distribution. Both keep the published {block, sex, agebin} counts (P12 + P14).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sdclab.attacks.variability import proven_solvar_zero
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import truncate
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.person_records import unknown_attributes, with_agebin
from sdclab.core.arrays import IntArray
from sdclab.core.errors import InputError
from sdclab.core.randomness import make_rng
from sdclab.core.size_classes import BLOCK_SIZE_CLASSES, size_class_label
from sdclab.core.tables.published import PublishedTable
from sdclab.protection.base import did_you_mean, problems
from sdclab.release import Release, exact_release

RACE_ETHNICITIES = 63 * 2
"""Race (63) × Hispanic origin: 126 combinations, one of them modal in a block."""
BASELINE_TABLES = ("P8", "P9", "P12", "P14")
"""Block tables the modal and proportional guessers read."""
WHITE_NOT_HISPANIC = 0
"""Race-ethnicity code (race − 1) * 2 + hispanic of non-Hispanic white alone: the national mode."""


def race_ethnicity(race: npt.ArrayLike, hispanic: npt.ArrayLike) -> IntArray:
    return (np.asarray(race, dtype=np.int64) - 1) * 2 + np.asarray(hispanic, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Attacker files
# ---------------------------------------------------------------------------------------------


class AttackerParameters(BaseModel):
    """Defects of a simulated external file (commercial data, or the census's own)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    coverage: float = Field(1.0, ge=0, le=1, description="share of census persons in the file")
    extra_records: float = Field(
        0.0, ge=0, le=5, description="records of people not in the census, per covered person"
    )
    moved: float = Field(0.0, ge=0, le=1, description="share with another block of the county")
    age_error: float = Field(0.0, ge=0, le=1, description="share whose age is off by 1–5 years")
    sex_error: float = Field(0.0, ge=0, le=1, description="share with the other sex")


ATTACKER_PRESETS = {
    "census": AttackerParameters(
        coverage=1.0, extra_records=0.0, moved=0.0, age_error=0.0, sex_error=0.0
    ),
    "commercial": AttackerParameters(
        coverage=0.85, extra_records=0.45, moved=0.28, age_error=0.30, sex_error=0.02
    ),
}
"""``census``: the census's own {id, block, sex, age}. ``commercial``: calibrated so that about
37% of its records match a census record on {id, block, sex, agebin}, as in 2010 (37.1%)."""


def attacker_parameters(preset: str, overrides: Mapping[str, str | float]) -> AttackerParameters:
    if preset not in ATTACKER_PRESETS:
        raise InputError(
            f"unknown attacker {preset!r}{did_you_mean(preset, list(ATTACKER_PRESETS))} "
            f"(attackers: {', '.join(ATTACKER_PRESETS)})"
        )
    try:
        return AttackerParameters.model_validate(
            {**ATTACKER_PRESETS[preset].model_dump(), **overrides}
        )
    except ValidationError as exc:
        found = problems(f"attacker {preset}", AttackerParameters, exc.errors())
        raise InputError(found[0], found[1:]) from None


def identified(truth: Population) -> pl.DataFrame:
    """The persons a record linkage can tie to a name: the data-defined ones (every person of a
    population without the column). A person whose record was imputed has no identifier in the
    census file, so no attacker's record can be confirmed as theirs (the attack paper's
    attacker files and rates are of data-defined persons)."""
    return truth.persons.filter(truth.data_defined)


def attacker_file(
    truth: Population, params: AttackerParameters, rng: np.random.Generator
) -> pl.DataFrame:
    """Simulated external records: id, block, sex, age (id < 0: not a census person). The
    ``coverage`` is of the data-defined persons (:func:`identified`); the records of people not
    in the census look like the whole population."""
    persons = truth.persons
    linkable = identified(truth)
    keep = rng.random(linkable.height) < params.coverage
    chosen = linkable.filter(pl.Series(keep))
    n = chosen.height
    blocks = truth.geography.blocks
    block = chosen["block"].cast(pl.Int64).to_numpy().copy()
    moved = rng.random(n) < params.moved
    block[moved] = _block_in_same_county(block[moved], blocks, rng)
    age = chosen["age"].to_numpy().astype(np.int64)
    off = rng.random(n) < params.age_error
    shift = rng.integers(1, 6, size=n) * np.where(rng.random(n) < 0.5, -1, 1)
    age = np.where(off, np.clip(age + shift, 0, schema.AGE_MAX), age)
    sex = chosen["sex"].to_numpy().astype(np.int64)
    sex = np.where(rng.random(n) < params.sex_error, 3 - sex, sex)
    n_extra = int(round(params.extra_records * n))
    pick = rng.integers(0, max(persons.height, 1), size=n_extra)
    extra_block = _block_in_same_county(
        persons["block"].cast(pl.Int64).to_numpy()[pick], blocks, rng
    )
    records = pl.DataFrame(
        {
            "id": np.r_[chosen["person_id"].to_numpy(), -1 - np.arange(n_extra)],
            "block": np.r_[block, extra_block],
            "sex": np.r_[sex, rng.integers(1, 3, n_extra)],
            "age": np.r_[
                age, persons["age"].to_numpy()[rng.integers(0, max(persons.height, 1), n_extra)]
            ],
        }
    )
    return records.sample(fraction=1.0, shuffle=True, seed=int(rng.integers(0, 2**32)))


def _block_in_same_county(block: IntArray, blocks: IntArray, rng: np.random.Generator) -> IntArray:
    """A uniformly random *other* block of the same county (the same block if it is the only one).

    ``blocks`` are sorted, hence grouped by county.
    """
    county = truncate(blocks, "county")
    mine = truncate(block, "county")
    start = np.searchsorted(county, mine, side="left")
    stop = np.searchsorted(county, mine, side="right")
    here = np.searchsorted(blocks, block)
    others = stop - start - 1
    pick = start + (rng.random(len(block)) * np.maximum(others, 0)).astype(np.int64)
    pick = np.where(pick >= here, pick + 1, pick)
    return np.where(others > 0, blocks[np.minimum(pick, len(blocks) - 1)], block)


# ---------------------------------------------------------------------------------------------
# One-to-one linkage
# ---------------------------------------------------------------------------------------------


def _ranked(frame: pl.DataFrame, key: list[str], seed: int) -> pl.DataFrame:
    """Each record's rank within its key, in a seeded random order (ties broken at random)."""
    canonical = frame.sort(pl.all().exclude("_r", "_a"))  # the seed alone decides, not input order
    shuffled = canonical.with_columns(
        _order=pl.Series(np.random.default_rng(seed).permutation(frame.height))
    )
    return (
        shuffled.sort("_order").with_columns(_rank=pl.int_range(pl.len()).over(key)).drop("_order")
    )


def paired(left: pl.DataFrame, right: pl.DataFrame, key: list[str], seed: int) -> pl.DataFrame:
    """One-to-one pairs of ``left`` (row index ``_r``) and ``right`` (``_a``) records equal on
    ``key``, the k-th of each key in a seeded random order with the k-th of the other (``seed``
    and ``seed + 1``); a right column of a left one's name gets the suffix ``_att``."""
    return _ranked(left, key, seed).join(
        _ranked(right, key, seed + 1), on=[*key, "_rank"], how="inner", suffix="_att"
    )


def unpaired(
    left: pl.DataFrame, right: pl.DataFrame, pairs: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The records of ``left`` and ``right`` that ``pairs`` leaves out."""
    return (
        left.join(pairs.select("_r"), on="_r", how="anti"),
        right.join(pairs.select("_a"), on="_a", how="anti"),
    )


INFERRED = ("block", "sex", "age", "race", "hispanic")
"""The columns of the records an attack links (int64), besides the optional age bounds."""
AGE_BOUNDS = ("age_min", "age_max")
"""Optional columns of the linked records: the youngest and oldest age they may have."""


def single_year(inferred: pl.DataFrame) -> pl.Series:
    """Whether each record's single year of age is known: its age bounds (:data:`AGE_BOUNDS`)
    meet, or it has none (every age known)."""
    if not set(AGE_BOUNDS) <= set(inferred.columns):
        return pl.Series(np.ones(inferred.height, dtype=bool))
    return inferred.select((pl.col("age_min") == pl.col("age_max")).fill_null(False)).to_series()


def link(inferred: pl.DataFrame, attacker: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Putative links: attacker id, block, sex, age + inferred race, hispanic, and the pass (1, 2).

    ``inferred`` has block (int64), sex, age, race, hispanic and may have ``age_min`` and
    ``age_max``; ``attacker`` id, block, sex, age. One-to-one without replacement: a record used in
    pass 1 is not used again. A record whose single year is not known (its bounds differ: a
    reconstruction from block tables alone, a baseline's frame, whose ``age`` is its agebin's
    first year) is linked on agebin only, as the attack paper links its block-only
    reconstruction: pairing it on that first year would prefer the attacker's records of that
    year within the bin, and call the link exact.
    """
    known = single_year(inferred)
    left = with_agebin(inferred.select(INFERRED)).with_row_index("_r")
    right = with_agebin(attacker).with_row_index("_a")
    first_key = ["block", "sex", "age"]
    first = paired(left.filter(known), right, first_key, seed)
    second_key = ["block", "sex", "agebin"]
    rest_left, rest_right = unpaired(left, right, first)
    second = paired(rest_left, rest_right, second_key, seed + 2)
    columns = ["id", "block", "sex", "age_att", "race", "hispanic"]
    return pl.concat(
        [
            first.with_columns(age_att=pl.col("age"))
            .select(columns)
            .with_columns(link_pass=pl.lit(1, pl.Int8)),
            second.select(columns).with_columns(link_pass=pl.lit(2, pl.Int8)),
        ]
    ).rename({"age_att": "age"})


def confirm(links: pl.DataFrame, truth: Population) -> pl.DataFrame:
    """Adds ``confirmed`` and ``confirmed_pass``: the paper's confirmation (its Algorithm 4) in
    two passes over every putative link, whichever pass linked it — first on {id, block, sex,
    age, race, ethnicity}, then, for the links the first pass left, on agebin instead of age.
    ``confirmed_pass`` is 1 or 2 for a confirmed link, null otherwise. Only a data-defined
    person (:func:`identified`) can be confirmed: the others have no identifier to link on."""
    true = identified(truth).select(
        pl.col("person_id").alias("id"),
        pl.col("block").cast(pl.Int64).alias("true_block"),
        pl.col("sex").cast(pl.Int64).alias("true_sex"),
        pl.col("age").cast(pl.Int64).alias("true_age"),
        pl.col("race").cast(pl.Int64).alias("true_race"),
        pl.col("hispanic").cast(pl.Int64).alias("true_hispanic"),
    )
    joined = links.join(true, on="id", how="left")
    agebin = pl.Series(schema.agebin38(joined["age"].to_numpy()))
    true_agebin = pl.Series(schema.agebin38(joined["true_age"].fill_null(0).to_numpy()))
    rest = (
        (pl.col("block") == pl.col("true_block"))
        & (pl.col("sex") == pl.col("true_sex"))
        & (pl.col("race") == pl.col("true_race"))
        & (pl.col("hispanic") == pl.col("true_hispanic"))
    ).fill_null(False)
    on_age = rest & (pl.col("age") == pl.col("true_age")).fill_null(False)
    on_agebin = rest & (agebin == true_agebin) & pl.col("true_age").is_not_null()
    passed = pl.when(on_age).then(1).when(on_agebin).then(2).otherwise(None).cast(pl.Int8)
    return joined.with_columns(confirmed=on_age | on_agebin, confirmed_pass=passed).drop(
        "true_block", "true_sex", "true_age", "true_race", "true_hispanic"
    )


# ---------------------------------------------------------------------------------------------
# Baselines from the release's block tables
# ---------------------------------------------------------------------------------------------


def block_race_ethnicity(release: Release, level: str = "block") -> tuple[IntArray, IntArray]:
    """(geounit codes, geounits × 126 race-ethnicity counts) from P8 and P9 (Hispanic = P8 − P9)."""
    codes = release.geography.codes(level)
    p8 = _whole(_table(release, "P8").dense(level, suppressed=0))
    p9 = _whole(_table(release, "P9").dense(level, suppressed=0))
    order = np.array(schema.race_codes_by_bit_count()) - 1  # P8 cell k → race − 1
    counts = np.zeros((len(codes), RACE_ETHNICITIES), dtype=np.int64)
    counts[:, order * 2] = p9[:, 1:]  # not Hispanic, by race
    counts[:, order * 2 + 1] = np.maximum(p8 - p9[:, 1:], 0)  # Hispanic, by race
    return codes, counts


def _table(release: Release, name: str) -> PublishedTable:
    if name not in release.tables:
        raise InputError(f"the baselines need table {name} in the release")
    return release.tables[name]


def _whole(counts: npt.NDArray[Any]) -> IntArray:
    """Published counts as counts of persons: rounded, and clipped at 0 (noise)."""
    return np.maximum(np.rint(counts), 0).astype(np.int64)


def block_sex_agebins(release: Release) -> pl.DataFrame:
    """Persons by block, sex and agebin from P12 + P14, as records: age is the bin's first year,
    ``age_min`` and ``age_max`` the bin (the frame knows no single year beyond 21)."""
    blocks = release.geography.blocks
    p12 = _whole(_table(release, "P12").dense("block", suppressed=0))
    p14 = _whole(_table(release, "P14").dense("block", suppressed=0))
    n_bins = len(schema.AGEBIN38)
    counts = np.zeros((len(blocks), 2, n_bins), dtype=np.int64)
    for s in range(2):
        counts[:, s, :20] = p14[:, s * 20 : (s + 1) * 20]
        counts[:, s, 20] = p12[:, s * 23 + 5]
        counts[:, s, 21] = p12[:, s * 23 + 6]
        counts[:, s, 22:] = p12[:, s * 23 + 7 : (s + 1) * 23]
    block, sex, agebin = np.nonzero(counts)
    n = counts[block, sex, agebin]
    lower = np.asarray(schema.AGEBIN38.lower_edges)
    upper = np.r_[lower[1:] - 1, schema.AGE_MAX]
    return pl.DataFrame(
        {
            "block": np.repeat(blocks[block], n),
            "sex": np.repeat(sex + 1, n),
            "age": np.repeat(lower[agebin], n),
            "age_min": np.repeat(lower[agebin], n),
            "age_max": np.repeat(upper[agebin], n),
        }
    )


def modal_codes(release: Release) -> IntArray:
    """Each block's modal race-ethnicity, falling back to the block group, then the nation.

    A block falls back when it has one person or a tie for the mode.
    """
    codes, counts = block_race_ethnicity(release)
    bg_codes, bg_counts = block_race_ethnicity(release, "block_group")
    result = _mode(counts, min_persons=2)
    bg_mode = _mode(bg_counts, min_persons=1)
    bg_of_block = np.searchsorted(bg_codes, truncate(codes, "block_group"))
    result = np.where(result < 0, bg_mode[bg_of_block], result)
    return np.where(result < 0, WHITE_NOT_HISPANIC, result)


def _mode(counts: IntArray, min_persons: int) -> IntArray:
    """Index of the unique largest count per row, −1 on a tie or with too few persons."""
    best = counts.argmax(axis=1)
    top = counts.max(axis=1)
    ties = (counts == top[:, None]).sum(axis=1) > 1
    return np.where(ties | (counts.sum(axis=1) < min_persons) | (top == 0), -1, best)


def _distribution_with_fallback(release: Release) -> IntArray:
    """Block race-ethnicity counts; an empty block borrows its block group's, then the nation's."""
    codes, counts = block_race_ethnicity(release)
    bg_codes, bg_counts = block_race_ethnicity(release, "block_group")
    bg = bg_counts[np.searchsorted(bg_codes, truncate(codes, "block_group"))]
    counts = np.where(counts.sum(axis=1, keepdims=True) > 0, counts, bg)
    national = np.zeros(RACE_ETHNICITIES, dtype=np.int64)
    national[WHITE_NOT_HISPANIC] = 1
    return np.where(counts.sum(axis=1, keepdims=True) > 0, counts, national[None, :])


def baseline_records(release: Release, kind: str, rng: np.random.Generator) -> pl.DataFrame:
    """The MDG or PRG file: published {block, sex, agebin} with guessed race and ethnicity."""
    records = block_sex_agebins(release)
    blocks = release.geography.blocks
    index = np.searchsorted(blocks, records["block"].to_numpy())
    if kind == "mdg":
        code = modal_codes(release)[index]
    elif kind == "prg":
        counts = _distribution_with_fallback(release)
        cumulative = np.cumsum(counts, axis=1)
        draw = rng.random(len(index)) * cumulative[index, -1]
        code = (cumulative[index] <= draw[:, None]).sum(axis=1)
    else:
        raise ValueError(kind)
    return records.with_columns(race=pl.Series(code // 2 + 1), hispanic=pl.Series(code % 2))


# ---------------------------------------------------------------------------------------------
# Baselines fixed across releases, and the upper bounds
# ---------------------------------------------------------------------------------------------

FIXED_BASELINES = ("mdg_exact", "prg_exact", "random_draw")
"""What the statistics alone give, the same for every release of one population: the modal and
proportional guessers on the exact tables, and random age–sex records matched to the blocks."""
UPPER_BOUNDS = ("confidential", "swapped")
"""Publishing the confidential records themselves, or the swapped microdata (the HDF-like file
the 2010 attack reconstructed; swap-low's swap): what no table release can exceed."""
FIXED_BASELINE_SEED = 2010
"""Seed of the fixed baselines' draws (PRG, random draw): their own stream, so that they are the
same for every release of a population."""
UPPER_BOUND_SWAP_SEED = 2010
"""Seed of the swap behind the swapped-microdata upper bound (fixed, so that the bound is the
same for every release of a population)."""


def random_draw_records(
    truth: Population, exact: Release, rng: np.random.Generator
) -> pl.DataFrame:
    """As many records per block as it has persons, each with a random sex and an age drawn from
    the national ages, and the block's modal race-ethnicity of the ``exact`` tables."""
    persons = truth.persons
    block = np.sort(persons["block"].cast(pl.Int64).to_numpy())
    ages = persons["age"].to_numpy()
    index = np.searchsorted(truth.geography.blocks, block)
    code = modal_codes(exact)[index]
    return pl.DataFrame(
        {
            "block": block,
            "sex": rng.integers(1, 3, len(block)),
            "age": rng.choice(ages, len(block)),
            "race": code // 2 + 1,
            "hispanic": code % 2,
        }
    )


def fixed_files(truth: Population, rng: np.random.Generator) -> dict[str, pl.DataFrame]:
    """The files of the fixed baselines and of the upper bounds."""
    from sdclab.protection.swapping import SWAP_LOW, swap_population

    exact = exact_release(truth, BASELINE_TABLES)
    swapped = swap_population(truth, SWAP_LOW.parse({}), make_rng(UPPER_BOUND_SWAP_SEED))
    records = lambda p: p.persons.select(  # noqa: E731
        pl.col("block").cast(pl.Int64), "sex", "age", "race", "hispanic"
    )
    return {
        "mdg_exact": baseline_records(exact, "mdg", rng),
        "prg_exact": baseline_records(exact, "prg", rng),
        "random_draw": random_draw_records(truth, exact, rng),
        "confidential": records(truth),
        "swapped": records(swapped.population),
    }


def population_uniques(truth: Population) -> dict[str, float]:
    """Share of persons unique in their block on {sex, age} and on {sex, agebin}."""
    persons = with_agebin(truth.persons.select("block", "sex", "age"))
    n = persons.height
    return {
        f"unique_on_block_sex_{name}": float(
            persons.group_by("block", "sex", name).len().filter(pl.col("len") == 1).height / n
        )
        if n
        else float("nan")
        for name in ("age", "agebin")
    }


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def block_modes(persons: pl.DataFrame) -> pl.DataFrame:
    """Each block's modal race-ethnicity in the truth: (block, mode) from persons' block and
    ``code`` (:func:`race_ethnicity`). A tie goes to the smallest code, so exactly one code of
    each block is modal and a person is nonmodal when their code is not it."""
    return (
        persons.group_by("block", "code")
        .len()
        .sort("len", "code", descending=[True, False])
        .group_by("block", maintain_order=True)
        .first()
        .select("block", mode="code")
    )


@dataclass(frozen=True)
class Subsets:
    """Which attacker records count in each breakdown (boolean masks over the attacker file)."""

    masks: dict[str, npt.NDArray[np.bool_]]


def person_facts(truth: Population) -> pl.DataFrame:
    """Per census person (``id``): modal in their block, unique on {block, sex, agebin}, the
    block's persons, the block (``true_block``) and whether they are data-defined. A block's
    mode, its size and a person's uniqueness count every person, as the tables do."""
    persons = with_agebin(
        truth.persons.select(
            pl.col("person_id").alias("id"),
            pl.col("block").cast(pl.Int64),
            "sex",
            "age",
            "race",
            "hispanic",
        ).with_columns(data_defined=truth.data_defined)
    )
    code = race_ethnicity(persons["race"].to_numpy(), persons["hispanic"].to_numpy())
    persons = persons.with_columns(code=pl.Series(code))
    mode = block_modes(persons)
    size = persons.group_by("block").len("block_persons")
    cell = persons.group_by("block", "sex", "agebin").len("cell_persons")
    return (
        persons.join(mode, on="block")
        .join(size, on="block")
        .join(cell, on=["block", "sex", "agebin"])
        .select(
            "id",
            modal=pl.col("code") == pl.col("mode"),
            unique=pl.col("cell_persons") == 1,
            block_persons="block_persons",
            true_block="block",
            data_defined="data_defined",
        )
    )


def vulnerable_persons(truth: Population, solvar: pl.DataFrame) -> IntArray:
    """The attack paper's most vulnerable persons, fixed for a population: data-defined,
    nonmodal in their block, unique on {block, sex, agebin}, in a block whose reconstruction has
    solution variability 0 (``solvar`` of the exact release's reconstruction). Sorted person
    ids."""
    zero = proven_solvar_zero(solvar).implode()
    chosen = person_facts(truth).filter(
        pl.col("data_defined")
        & ~pl.col("modal")
        & pl.col("unique")
        & pl.col("true_block").is_in(zero)
    )
    return np.sort(chosen["id"].to_numpy()).astype(np.int64)


def breakdowns(
    attacker: pl.DataFrame,
    truth: Population,
    solvar: pl.DataFrame | None,
    vulnerable: IntArray | None = None,
) -> Subsets:
    """all; modal / nonmodal; population uniques on {block, sex, agebin}; block-size classes;
    the fixed ``vulnerable`` persons (:func:`vulnerable_persons`), when given; nonmodal uniques
    in the solvar-0 blocks of the attacked release's own reconstruction (a secondary figure:
    that group changes with the release) — by the true record behind each attacker id. Every
    group but ``all`` (the attacker's records) holds data-defined census persons only, as the
    attack paper's groups do."""
    joined = attacker.select("id").join(person_facts(truth), on="id", how="left")
    census = joined["data_defined"].fill_null(False).to_numpy()
    modal = joined["modal"].fill_null(False).to_numpy()
    unique = joined["unique"].fill_null(False).to_numpy()
    masks = {
        "all": np.ones(attacker.height, dtype=bool),
        "modal": census & modal,
        "nonmodal": census & ~modal,
        "unique": census & unique,
        "nonmodal_unique": census & ~modal & unique,
    }
    block_persons = joined["block_persons"].fill_null(0).to_numpy()
    for low, high in BLOCK_SIZE_CLASSES:
        inside = (block_persons >= low) & ((block_persons <= high) if high else True)
        masks[f"block_size_{size_class_label(low, high)}"] = census & inside
        masks[f"nonmodal_block_size_{size_class_label(low, high)}"] = census & ~modal & inside
    if vulnerable is not None:
        masks["vulnerable"] = census & np.isin(attacker["id"].to_numpy(), vulnerable)
    if solvar is not None:
        zero = proven_solvar_zero(solvar).to_numpy()
        in_zero = np.isin(joined["true_block"].fill_null(-1).to_numpy(), zero)
        masks["nonmodal_unique_solvar0"] = census & ~modal & unique & in_zero
    return Subsets(masks)


def rates(links: pl.DataFrame, attacker: pl.DataFrame, subsets: Subsets) -> dict[str, Any]:
    """Putative, confirmed, their rates over attacker records, and precision, per breakdown."""
    position = attacker.select("id").with_row_index("_a")
    linked = links.join(position, on="id", how="inner")
    putative = np.zeros(attacker.height, dtype=bool)
    confirmed = np.zeros(attacker.height, dtype=bool)
    putative[linked["_a"].to_numpy()] = True
    confirmed[linked["_a"].to_numpy()] = linked["confirmed"].to_numpy()
    out = {}
    for name, mask in subsets.masks.items():
        n, p, c = int(mask.sum()), int(putative[mask].sum()), int(confirmed[mask].sum())
        out[name] = {
            "attacker_records": n,
            "putative": p,
            "confirmed": c,
            "putative_rate": p / n if n else None,
            "confirmed_rate": c / n if n else None,
            "precision": c / p if p else None,
        }
    return out


def confirmation_passes(links: pl.DataFrame) -> dict[str, int]:
    """Putative links, and those confirmed in the first pass (exact age) and in the second
    (agebin, over the links the first left: :func:`confirm`)."""
    confirmed = links["confirmed_pass"]
    return {
        "putative": links.height,
        "first_pass": int((confirmed == 1).sum()),
        "second_pass": int((confirmed == 2).sum()),
    }


def attacker_match_share(attacker: pl.DataFrame, truth: Population) -> float:
    """Share of attacker records that match a data-defined census record on {id, block, sex,
    agebin} (the attack paper's 37.1% for its commercial file)."""
    true = with_agebin(
        identified(truth).select(
            pl.col("person_id").alias("id"),
            pl.col("block").cast(pl.Int64),
            pl.col("sex").cast(pl.Int64),
            "age",
        )
    ).drop("age")
    mine = with_agebin(attacker).drop("age")
    matched = mine.join(true, on=["id", "block", "sex", "agebin"], how="inner").height
    return matched / attacker.height if attacker.height else float("nan")


def not_linkable(reconstructed: pl.DataFrame) -> str | None:
    """Why reconstructed records cannot be reidentified (None: they can)."""
    unknown = unknown_attributes(reconstructed)
    if not unknown:
        return None
    return (
        f"reidentification is not applicable: the release's tables do not determine "
        f"{', '.join(unknown)} (the attack links on block, sex and age and infers race and "
        "Hispanic origin)"
    )


def reidentify(
    reconstructed: pl.DataFrame,
    release: Release,
    truth: Population,
    params: AttackerParameters,
    rng: np.random.Generator,
    solvar: pl.DataFrame | None = None,
    vulnerable: IntArray | None = None,
) -> tuple[dict[str, Any], pl.DataFrame]:
    """Figures for the reconstruction and both baselines, and the reconstruction's links;
    ``vulnerable``: the population's fixed vulnerable persons, scored as their own group.

    Raises :class:`InputError` when the records lack an attribute altogether (:func:`not_linkable`).
    """
    reason = not_linkable(reconstructed)
    if reason is not None:
        raise InputError(reason)
    attacker = attacker_file(truth, params, rng)
    subsets = breakdowns(attacker, truth, solvar, vulnerable)
    seed = int(rng.integers(0, 2**31))
    files = {"reconstruction": reconstructed.with_columns(pl.col("block").cast(pl.Int64))}
    missing = [t for t in BASELINE_TABLES if t not in release.tables]
    if not missing:
        files["mdg"] = baseline_records(release, "mdg", rng)
        files["prg"] = baseline_records(release, "prg", rng)
    files |= fixed_files(truth, make_rng(FIXED_BASELINE_SEED))
    attacker_cast = attacker.with_columns(pl.col("id", "block", "sex", "age").cast(pl.Int64))
    figures: dict[str, Any] = {
        "baselines": "computed"
        if not missing
        else f"skipped: the release lacks {', '.join(missing)}",
        "attacker": params.model_dump(),
        "attacker_records": attacker.height,
        "attacker_match_share": attacker_match_share(attacker_cast, truth),
    }
    linked = None
    passes = {}
    for method, records in files.items():
        columns = [*INFERRED, *(b for b in AGE_BOUNDS if b in records.columns)]
        inferred = records.select(pl.col(columns).cast(pl.Int64))
        links = confirm(link(inferred, attacker_cast, seed), truth)
        figures[method] = rates(links, attacker_cast, subsets)
        passes[method] = confirmation_passes(links)
        if method == "reconstruction":
            linked = links
    assert linked is not None
    figures["confirmation_passes"] = passes
    return figures, linked
