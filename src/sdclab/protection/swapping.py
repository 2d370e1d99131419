"""Household swapping: the provable Permutation Swapping Algorithm and targeted swapping.

Both are pre-tabular: households (with all their persons) move between existing housing units, the
protected microdata is tabulated, and the release carries both. Group-quarters facilities and their
residents are never swapped.

* **PSA** (Bailie, Gong & Meng 2025): each household is selected independently with probability p;
  within each matching group the selected households' locations are permuted uniformly at random.
  ε-DP within the swap's invariants with ε(p, b) = max{ln o, ln(b + 1) − ln o}, o = p/(1 − p),
  b the largest matching group.
* **Targeted swapping** (the 1990–2010 practice, sdcMicro's recordSwap): households whose members
  are rare in their block are swapped first, the rest of the swap rate is filled at random, and
  each selected household exchanges places with a donor of the same size and number of adults from
  the same tract, county or state. Data-dependent selection: no formal guarantee. Over a declared
  census the same draws read its own attributes and levels (:mod:`.swapping_declared`).

A household's tenure travels with it; the unit keeps its block, type and occupancy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
from pydantic import Field, ValidationInfo, model_validator

from sdclab.censuses import is_us2010
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population import Population
from sdclab.core import accounting, cell_model, noise
from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import BoolArray, IntArray
from sdclab.core.census.records import CensusRecords
from sdclab.core.errors import InputError
from sdclab.core.privacy import Guarantee, Invariant, Loss, no_guarantee
from sdclab.protection import audit_plans, psa_variants
from sdclab.protection.base import Mechanism, NoisePublication, Parameters, Unit
from sdclab.protection.checks import exact_tables
from sdclab.protection.households import Households, Swapped, swap_units
from sdclab.protection.swap_pairs import (
    DATA_DEPENDENT_SELECTION,
    Candidates,
    group_ids,
    pair_targeted,
    swap_figures,
)
from sdclab.protection.swapping_declared import (
    DECLARED_SETTINGS,
    declared_preset,
    declared_recorded,
    declared_settings,
    declared_swap,
    declared_swap_card,
    declared_swap_noise,
    protect_declared_swap,
    relocated,
    swapped_tables_release,
)
from sdclab.release import Release, tabulated_release

# ---------------------------------------------------------------------------------------------
# The Permutation Swapping Algorithm
# ---------------------------------------------------------------------------------------------


class PsaParameters(Parameters):
    """Swap rate, matching variables and the level whose areas are swapped."""

    rate: Annotated[Decimal, Unit("probability 0–1")] = Field(
        Decimal("0.05"), gt=0, lt=1, allow_inf_nan=False
    )
    """p: each household is selected independently with this probability (0 < p < 1, read as an
    exact decimal); the selected households of a matching group take each other's locations"""
    matching_level: str = "state"
    """state, county or tract: matching groups (and every swap) lie within one area of this level,
    which keeps every statistic of it and above exact (a declared census: a level of its main
    geography above the bottom one, by default the top one)"""
    match_adults: bool = False
    """true: match on the number of adults too (groups are area x household size x adults); false:
    area x household size"""
    largest_group: Annotated[int | None, Unit("households")] = Field(None, ge=1)
    """b, the largest matching group, only for a card without data (sdclab spec); when protecting it
    is measured on the data and giving it is an error"""

    cross_match: Annotated[Decimal, Unit("probability 0–1")] = Field(
        Decimal(0), ge=0, le=1, allow_inf_nan=False
    )
    """probabilistic unit matching: a selected household is, with this probability, permuted with
    the other such households of its matching area whatever their size (0, the default: off)"""
    perturb_rate: Annotated[Decimal, Unit("probability 0–1")] = Field(
        Decimal(0), ge=0, le=1, allow_inf_nan=False
    )
    """pre-swap perturbation: before the swap each value of the perturb attributes of the
    households is, with this probability, replaced by a uniform draw from its codes (0: off)"""
    perturb: tuple[Literal["tenure", "sex", "race", "hispanic"], ...] = ("tenure",)
    """the attributes perturbed before the swap when perturb_rate > 0 (any of tenure, sex, race,
    hispanic)"""

    US_SETTINGS: ClassVar[frozenset[str]] = frozenset({"match_adults", "perturb_rate", "perturb"})

    @model_validator(mode="after")
    def _perturb_needs_a_rate(self) -> PsaParameters:
        if "perturb" in self.model_fields_set and self.perturb_rate == 0:
            raise ValueError("perturb: give perturb_rate > 0 too (the perturbation is off at 0)")
        if not self.perturb or len(set(self.perturb)) < len(self.perturb):
            raise ValueError("perturb: name each attribute once, at least one")
        return self

    @model_validator(mode="after")
    def _a_level_of_the_census(self) -> PsaParameters:
        levels = self.matching_levels()
        if not levels:
            raise ValueError(
                f"census {self.census.name}'s geography has a single level: no area of a level "
                "above the bottom one to hold the matching groups"
            )
        if self.matching_at not in levels:
            raise ValueError(
                f"matching_level: expected one of {', '.join(levels)}, got {self.matching_level!r}"
            )
        return self

    def matching_levels(self) -> tuple[str, ...]:
        """The levels whose areas may hold the matching groups (never the bottom one)."""
        if self._census is None:
            return US_MATCHING_LEVELS
        return self.census.geography.levels[:-1]

    @property
    def matching_at(self) -> str:
        """The matching level: as given, or a declared census's top level by default."""
        if self._census is None or "matching_level" in self.model_fields_set:
            return self.matching_level
        return self.census.geography.levels[0]

    def recorded(self) -> dict[str, Any]:
        """As given, without the variants' settings when they are off (a release of the PSA
        itself records what it always recorded)."""
        data = super().recorded() | {"matching_level": self.matching_at}
        if self.cross_match == 0:
            data.pop("cross_match", None)
        if self.perturb_rate == 0:
            data.pop("perturb_rate", None)
            data.pop("perturb", None)
        return data

    @property
    def matching(self) -> str:
        parts = [self.matching_at, "household size"]
        return " x ".join([*parts, "number of adults"] if self.match_adults else parts)


US_MATCHING_LEVELS = ("state", "county", "tract")


PSA = Mechanism(
    "psa", "Permutation Swapping Algorithm (provable swapping)", PsaParameters, any_census=True
)
PSA.define("cell_model")(cell_model.exact)
PSA.define("check")(exact_tables)


def psa_groups(households: Households, params: PsaParameters) -> IntArray:
    """Matching group of each household: matching geography × size (× adults), as 0..G−1."""
    columns = [households.area(params.matching_at), households.size]
    if params.match_adults:
        columns.append(households.adults)
    return group_ids(*columns)


def psa_partners(group: IntArray, selected: BoolArray, order: IntArray) -> IntArray:
    """Whose location each household takes: itself unless selected.

    Within every group the selected households, listed in their original order, take the
    locations of the selected households listed by ``order`` (a key per household). With the keys
    a uniformly random permutation, every permutation of each group's selected households is
    equally likely — the PSA's uniform permutation. Pure: all randomness is in the arguments.
    """
    chosen = np.flatnonzero(selected)
    in_original_order = chosen[np.lexsort((chosen, group[chosen]))]
    in_random_order = chosen[np.lexsort((order[chosen], group[chosen]))]
    partner = np.arange(len(group))
    partner[in_original_order] = in_random_order
    return partner


@PSA.define("guarantee")
def psa_card(params: PsaParameters, largest_group: int | None = None) -> SpecCard:
    """The PSA's card, with b measured on the data or given as a parameter."""
    b = largest_group if largest_group is not None else params.largest_group
    if b is None:
        raise InputError(
            "psa: without data, give the largest matching group: --set largest_group=B"
        )
    epsilon = accounting.psa_epsilon(float(params.rate), b)
    sizes = "households by size" + (" and adults" if params.match_adults else "")
    us = params._census is None
    bottom = "block" if us else params.census.geography.levels[-1]
    whole = "nation" if us else "the whole census"
    strong = f"{sizes} in every {bottom}, every statistic of each {params.matching_at} and above"
    theorem, swap, per_attribute = _psa_caveats(params, b, strong, largest_group is not None)
    caveats = (*theorem, *swap, *per_attribute)
    guarantee = _psa_guarantee(params, b, epsilon, bottom, whole, strong)
    if psa_variants.variants_on(params):
        guarantee = no_guarantee(
            psa_variants.variant_reason(params),
            unit="household",
            invariants=psa_variants.variant_invariants(params, bottom, whole) + _unmoved(params),
            open=True,
        )
        caveats = (*psa_variants.variant_caveats(params, b, epsilon), *swap)
    return SpecCard(
        mechanism="psa",
        domain="every census edited file with the same variables (households with their persons, "
        "after editing and imputation)",
        multiverse="datasets sharing the swap's invariants",
        guarantee=guarantee,
        covers="the swapped microdata and every table derived from it (post-processing)",
        caveats=caveats,
        per_attribute=psa_variants.per_attribute_rows(params, epsilon),
    )


def _psa_guarantee(
    params: PsaParameters, b: int, epsilon: float, bottom: str, whole: str, strong: str
) -> Guarantee:
    """The PSA's guarantee: ε per household within its invariants (``bottom``: the lowest
    geography level, ``whole``: the whole territory, ``strong``: the invariants in a phrase)."""
    return Guarantee(
        measure="pure",
        unit="household",
        relation="replace",
        loss=Loss("pure", epsilon=epsilon),
        person_replace=Loss("pure", epsilon=2 * epsilon),
        derivation=(
            "the invariants fix every attribute's marginal, so no two datasets of the "
            "universe differ in one record: a person's change comes with the compensating "
            "change of another household, the nearest pair differs in two household records "
            "(2ε, as the audit's pair)",
            f"b = {b:,} is fixed by the invariants (matching groups are households by "
            f"{params.matching} in each {params.matching_at}), so ε holds for every "
            "dataset of the universe; b is read from the data when protecting",
        ),
        qualifier=f"within the PSA's invariants ({strong})",
        invariants=(
            Invariant("household locations (the swapping variable's marginal)", whole),
            Invariant("all other household attributes (the holding variables' marginal)", whole),
            Invariant(
                "households by size" + (" and adults" if params.match_adults else ""),
                f"every {bottom}",
            ),
            Invariant("every statistic", f"each {params.matching_at} and above"),
            *_unmoved(params),
        ),
    )


def _unmoved(params: PsaParameters) -> tuple[Invariant, ...]:
    """What no swap moves, whatever the variant: the US census's units and group quarters."""
    if params._census is not None:
        return ()
    return (
        Invariant("housing units and their occupancy", "every block"),
        Invariant("group quarters and their residents (not swapped)", "every block"),
    )


def _psa_caveats(
    params: PsaParameters, b: int, strong: str, measured: bool
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The PSA card's caveats, in three parts: where ε comes from and how narrow its universe is
    (the theorem's), what is swapped and what the protection unit covers (the swap's, which the
    variants keep), and what the budgets per attribute mean (``measured``: b was read from the
    data)."""
    us = params._census is None
    theorem = (
        f"epsilon(p = {params.rate:g}, b = {b:,}) from Theorem II.1 of Bailie, Gong & Meng "
        "(2025); b is the largest matching group"
        + (", measured on the data" if measured else ", as given"),
        f"The universe is far narrower than another mechanism's ({strong}; TopDown holds "
        "only the national and state totals exact): beside another mechanism's epsilon this "
        "one is said to hold within the PSA's invariants, the same number being a promise "
        "among far fewer datasets.",
    )
    swap = (
        f"each household is selected with probability {params.rate:g}; the swapping variable "
        + (
            "is the housing unit (the household's location): the selected households of a "
            "matching group take each other's units"
            if us
            else "is the household's location (its unit at every level of every geography): "
            "the selected households of a matching group take each other's locations"
        )
        + f" in a uniformly random order, within the {params.matching_at}",
        *(
            ("Group-quarters residents are not swapped and are not covered by this guarantee.",)
            if us
            else ()
        ),
        "The protection unit is the post-imputation household: a household record of the "
        "edited file, which can change without affecting other, imputed records. A real "
        "household whose changed responses alter several edited records (through editing and "
        "imputation) is covered only at the group-privacy inflation k·epsilon for k records.",
    )
    per_attribute = (
        "Per-attribute budgets (below) do not compose into the total: the guarantee does not "
        "come from composing mechanisms per attribute, so changing one attribute of a household "
        "record costs the same epsilon as changing all of them (Bailie, Gong & Meng, §4.2).",
    )
    return theorem, swap, per_attribute


@PSA.define("protect")
def protect_psa(population: Population, params: PsaParameters, rng: np.random.Generator) -> Release:
    """Run the PSA on a population and tabulate the release."""
    if params.largest_group is not None:
        raise InputError(
            "psa: largest_group is measured on the data when protecting; give it only for a "
            "card without data (sdclab spec)"
        )
    if isinstance(population, CensusRecords):
        return _declared_psa(population, params, rng)
    swapped = psa_swap(population, params, rng)
    b = int(swapped.notes["largest_matching_group"])
    if b == 0:
        raise InputError("psa: the population has no households (occupied housing units) to swap")
    return tabulated_release(
        "psa",
        params.recorded(),
        psa_card(params, b),
        swapped.population,
        population,
        rng,
        swapped.notes,
    )


def psa_swap(population: Population, params: PsaParameters, rng: np.random.Generator) -> Swapped:
    """The PSA: the swapped population, its publishable notes and its confidential diagnostics."""
    households = Households(population)
    if params.perturb_rate > 0:  # pre-swap perturbation: the swap sees the perturbed records
        population = psa_variants.perturbed(population, households, params, rng)
    area = households.area(params.matching_at) if params.cross_match > 0 else None
    partner, notes, diagnostics = psa_draw(psa_groups(households, params), params, rng, area)
    rows = households.unit_rows
    return Swapped(swap_units(population, rows, rows[partner]), notes, diagnostics)


def psa_draw(
    group: IntArray, params: PsaParameters, rng: np.random.Generator, area: IntArray | None = None
) -> tuple[IntArray, dict[str, Any], dict[str, Any]]:
    """The PSA's draw over households in matching groups ``group``: whose location each takes
    (:func:`psa_partners`), the publishable notes and the confidential diagnostics; with
    ``cross_match`` a selected household may be permuted within its matching ``area`` instead
    (:func:`~sdclab.protection.psa_variants.cross_matched`)."""
    n = len(group)
    selected = noise.bernoulli(Fraction(params.rate), n, rng)
    permuted = group
    if params.cross_match > 0:
        assert area is not None, "probabilistic matching needs the matching areas"
        permuted = psa_variants.cross_matched(
            group, area, selected, Fraction(params.cross_match), rng
        )
    partner = psa_partners(permuted, selected, rng.permutation(n))
    moved = int((partner != np.arange(n)).sum())
    notes = {
        "households": n,
        "largest_matching_group": int(np.bincount(group).max(initial=0)),
        "matching_groups": int(group.max(initial=-1) + 1),
    }
    diagnostics: dict[str, Any] = {
        "selected": int(selected.sum()),
        "selection_rate": float(selected.mean()) if n else 0.0,
        "moved": moved,
        "achieved_swap_rate": moved / max(n, 1),
    }
    if params.cross_match > 0:  # selected households permuted in their area's pool
        diagnostics["cross_matched"] = int((permuted != group).sum())
    return partner, notes, diagnostics


def _declared_psa(
    records: CensusRecords, params: PsaParameters, rng: np.random.Generator
) -> Release:
    """The PSA on a declared census's households; its release publishes the tables of the
    swapped records (not the records themselves: a declared census's microdata are not part of
    its releases yet)."""
    if records.households is None or records.n_households == 0:
        raise InputError(
            f"psa: census {records.census.name} names no household key, so no households to swap"
        )
    swapped = declared_psa_swap(records, params, rng)
    b = int(swapped.notes["largest_matching_group"])
    return swapped_tables_release("psa", params.recorded(), psa_card(params, b), swapped, records)


def declared_psa_swap(
    records: CensusRecords, params: PsaParameters, rng: np.random.Generator
) -> Swapped:
    """The PSA over a declared census's households (matching on the area of the matching level
    and the household's size): each selected household takes its partner's units in every
    geography, its attributes and its persons' with it."""
    assert records.households is not None
    n = records.n_households
    size = np.bincount(records.households, minlength=n)
    geography = records.geography
    home = records.block_index("households")
    area = geography.block_codes_at(params.matching_at)[home]
    partner, notes, diagnostics = psa_draw(group_ids(area, size), params, rng, area)
    return Swapped(relocated(records, partner), notes, diagnostics)  # type: ignore[arg-type]


@PSA.define("noise")
def psa_published_noise(params: PsaParameters) -> NoisePublication:
    variants: dict[str, Any] = {}
    if params.cross_match:
        variants["cross_match"] = float(params.cross_match)
    if params.perturb_rate:  # (the attributes perturbed only count when some are)
        variants["perturb_rate"] = float(params.perturb_rate)
        if params.perturb:
            variants["perturb"] = list(params.perturb)
    return NoisePublication(
        distribution="households exchange attributes within their matching groups, each "
        "selected with the published rate; which households moved is not published"
        + ("; the variants as their parameters say (docs/swapping.md)" if variants else ""),
        published=("parameters: rate, matching level and keys",),
        parameters={"rate": float(params.rate)} | variants,
    )


AUDIT_GROUP_SIZE = 2
"""The audit's matching groups: the two households of each copied tract."""


@PSA.define("audit_plan")
def psa_audit_plan(settings: Mapping[str, Any], trials: int, seed: int) -> audit_plans.Trials:
    """A tract of two one-person households of the same size (one matching group, b = 2); D′
    exchanges the two persons' attributes — the nearest datasets sharing the swap's invariants
    (two household records differ), so the claim is 2ε(p, 2)."""
    if settings.get("matching_level", "tract") != "tract":
        raise InputError(
            "audit psa: matching_level must be tract (each copy is its own matching group; "
            "wider groups would swap households between copies and make the trials dependent)"
        )
    chosen = {"rate": "0.5"} | dict(settings) | {"matching_level": "tract"}
    params = PSA.parse(chosen)

    def releases_of(pair: Sequence[tuple[list[Any], list[Any]]]) -> list[Release]:
        """The PSA run on ``trials`` copies of each dataset (persons, units) of the pair."""
        return [
            PSA.run(
                audit_plans.replicate(pl.DataFrame(p), pl.DataFrame(u), trials), chosen, seed + i
            )
            for i, (p, u) in enumerate(pair)
        ]

    def outputs(releases: list[Release]) -> list[Any]:
        """(D's, D′'s) block outputs, one row per copy."""
        return audit_plans.copy_matrix([audit_plans.block_outputs(r) for r in releases], trials)

    if psa_variants.variants_on(params):
        pair, claim = psa_variants.audit_pair(params)
        return audit_plans.Trials(claim, *outputs(releases_of(pair)))
    a = {"age": 25, "race": 1, "sex": 1}
    b = {"age": 70, "race": 2, "sex": 2}
    datasets = [
        (
            [audit_plans.person(0, 0, 0, **a), audit_plans.person(1, 1, 1, **b)],
            [audit_plans.unit(0, 0, tenure=1), audit_plans.unit(1, 1, tenure=3)],
        ),
        (
            [audit_plans.person(0, 0, 0, **b), audit_plans.person(1, 1, 1, **a)],
            [audit_plans.unit(0, 0, tenure=3), audit_plans.unit(1, 1, tenure=1)],
        ),
    ]  # a household record is its persons and its tenure: D′ exchanges both
    releases = releases_of(datasets)
    d, d_prime = outputs(releases)
    epsilon = accounting.psa_epsilon(float(params.rate), AUDIT_GROUP_SIZE)
    loss = releases[0].card.guarantee.loss
    if loss is None or loss.epsilon != epsilon:  # the card must state what the PSA computes
        stated = None if loss is None else loss.epsilon
        raise AssertionError(f"the PSA's card states epsilon {stated}, its allocation {epsilon}")
    claim = audit_plans.Claim(
        "pure",
        2 * epsilon,
        "every block-level table of both blocks",
        "bounded, two household records differ",
    )
    return audit_plans.Trials(claim, d, d_prime)


# ---------------------------------------------------------------------------------------------
# Targeted swapping
# ---------------------------------------------------------------------------------------------

SCOPES = ("tract", "county", "state")
"""Where a donor may come from, narrowest first."""


class SwapParameters(Parameters):
    """Targeted household swapping as statistical offices run it."""

    rate: Annotated[Decimal, Unit("share 0–1")] = Field(
        Decimal("0.05"), gt=0, lt=1, allow_inf_nan=False
    )
    """target share of households that move (both partners count): round(rate x households / 2)
    pairs, 0 < rate < 1"""
    same_tract: Annotated[Decimal, Unit("probability 0–1")] = Field(Decimal(1), ge=0, le=1)
    """probability that a selected household's donor comes from its own tract (same_tract +
    same_county + same_state = 1)"""
    same_county: Annotated[Decimal, Unit("probability 0–1")] = Field(Decimal(0), ge=0, le=1)
    """probability that the donor comes from anywhere in the household's county (same_tract +
    same_county + same_state = 1)"""
    same_state: Annotated[Decimal, Unit("probability 0–1")] = Field(Decimal(0), ge=0, le=1)
    """probability that the donor comes from anywhere in the household's state (same_tract +
    same_county + same_state = 1)"""
    noisy_size_key: bool = False
    """true: each household's size key is kept w.p. 1/2 and moved ±1 w.p. 1/4 each, so partners'
    sizes can differ by up to 2; false: partners have the same size"""
    risk_threshold: Annotated[Decimal, Unit("risk 0–1")] = Field(Decimal(1), gt=0, le=1)
    """households with a member of risk ≥ this are swapped first (risk: 1 / persons in the block
    sharing the member's risk keys; 1 = unique in the block)"""
    risk_keys: tuple[Literal["sex", "agebin", "race", "hispanic"], ...] = (
        "sex",
        "agebin",
        "race",
        "hispanic",
    )
    """the person attributes (any of sex, agebin, race, hispanic) whose combination in the block
    defines a person's risk"""
    max_rounds: Annotated[int, Unit("rounds")] = Field(50, ge=1, le=10_000)
    """most pairing rounds before giving up (the achieved rate is then below the target, and only
    the diagnostics say so)"""
    risk_variables: tuple[str, ...] | None = None
    """a declared census: the attributes whose combination in a unit of risk_level defines a
    person's risk (default: its quasi-identifiers; the US census's are risk_keys)"""
    risk_level: str | None = None
    """a declared census: the level whose units count the persons sharing a risk combination
    (default: the bottom level, as the US block)"""
    matching_level: str | None = None
    """a declared census: donors come from another bottom unit of the same area of this level, a
    level above the bottom one (default: the one just above it, as the US tract)"""
    matching_attributes: tuple[str, ...] | None = None
    """a declared census: the household attributes a donor shares besides the size key (default:
    every household attribute of the census; the US census's is the number of adults)"""
    risk_levels: tuple[str, ...] | None = None
    """a declared census, targeted record swapping: the levels at each of which risk is counted (the
    hierarchy); a household at risk at some level swaps with a donor in another unit of the
    highest such level (default: risk_level alone, donors as matching_level says)"""
    k_anonymity: Annotated[int | None, Unit("persons")] = Field(None, ge=1)
    """a declared census: a household is at risk at a level when a member's risk combination is
    seen fewer than k times in their unit of it (default: risk ≥ risk_threshold)"""
    similar: tuple[str, ...] | None = None
    """a declared census: the ordered similarity profile a donor shares (size or household
    attributes), dropping its last variable while no donor is found (default: size and
    matching_attributes, all of them)"""
    carry_along: tuple[str, ...] | None = None
    """a declared census: household attributes of the place, exchanged between partners with
    their units (default: none)"""

    US_SETTINGS: ClassVar[frozenset[str]] = frozenset(
        {"same_tract", "same_county", "same_state", "risk_keys"}
    )

    @model_validator(mode="after")
    def _scopes_sum_to_one(self) -> SwapParameters:
        if self.same_tract + self.same_county + self.same_state != 1:
            raise ValueError(
                "same_tract + same_county + same_state must equal 1 (when changing one, give all "
                "three)"
            )
        return self

    @model_validator(mode="after")
    def _settings_of_the_census(self) -> SwapParameters:
        if self._census is not None:
            declared_settings(self)  # each declared setting checked against the census
            return self
        given = sorted(DECLARED_SETTINGS & self.model_fields_set)
        if given:
            raise ValueError(
                f"{', '.join(given)}: a setting for a declared census, not for the US 2010 census "
                "(its risk is risk_keys in the block, its donors' areas same_tract, same_county "
                "and same_state; leave it out)"
            )
        return self

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if self._census is not None:
            declared = data | declared_recorded(self)  # settings not given and not defaulted: out
            return {
                k: v for k, v in declared.items() if k not in DECLARED_SETTINGS or v is not None
            }
        return {k: v for k, v in data.items() if k not in DECLARED_SETTINGS}

    @property
    def scope_weights(self) -> tuple[Fraction, Fraction, Fraction]:
        return (Fraction(self.same_tract), Fraction(self.same_county), Fraction(self.same_state))


SWAP_PRESETS = {
    "swap-low": {"rate": "0.05", "same_tract": "1", "same_county": "0", "same_state": "0"},
    "swap-high": {
        "rate": "0.5",
        "same_tract": "0.3",
        "same_county": "0.4",
        "same_state": "0.3",
        "noisy_size_key": "true",
    },
}
"""The low (5%, same tract, exact key) and high (50%, 30/40/30, noised key) experiments of the
2010 reconstruction study ("A Simulated Reconstruction and Reidentification Attack on the 2010
U.S. Census"; docs/swapping.md)."""


def household_risk(households: Households, keys: tuple[str, ...]) -> npt.NDArray[np.float64]:
    """Risk of each household: the largest 1 / (persons in the block sharing a member's key)."""
    population = households.population
    persons = population.persons
    values = {
        "sex": persons["sex"].to_numpy() - 1,
        "agebin": schema.agebin38(persons["age"].to_numpy()),
        "race": persons["race"].to_numpy() - 1,
        "hispanic": persons["hispanic"].to_numpy(),
    }
    sizes = {"sex": 2, "agebin": 38, "race": 63, "hispanic": 2}
    key = population.person_block_index.astype(np.int64)
    for name in keys:
        key = key * sizes[name] + values[name]
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    person_risk = 1.0 / counts[inverse.reshape(-1)]
    per_unit = np.zeros(population.n_units)
    np.maximum.at(per_unit, population.person_unit_row, person_risk)
    return per_unit[households.unit_rows]


def targeted_pairs(
    households: Households, params: SwapParameters, rng: np.random.Generator
) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
    """(initiators, donors, risk): which households exchange places (:func:`pair_targeted`:
    risk ≥ threshold first; a donor of the same size and number of adults from the drawn scope,
    tract, county or state, in another block)."""
    risk = household_risk(households, params.risk_keys)
    candidates = Candidates(
        risk,
        households.size,
        households.block_code,
        tuple(households.area(level) for level in SCOPES),
        (households.adults,),
    )
    initiators, donors = pair_targeted(candidates, params.scope_weights, params, rng)
    return initiators, donors, risk


def swap_card(params: SwapParameters, name: str = "swap") -> SpecCard:
    """Targeted swapping has no formal guarantee; the card lists what it keeps exact.

    It states the target rate, not the achieved one: that falls short of the target when too few
    donors match, which depends on the confidential data."""
    if params._census is not None:
        return declared_swap_card(params, name)
    widest = max(
        (level for level, w in zip(SCOPES, params.scope_weights, strict=True) if w > 0),
        key=SCOPES.index,
    )
    invariants = [
        Invariant("every statistic (households move within it)", f"each {widest} and above"),
        Invariant(
            "households by number of adults"
            if params.noisy_size_key
            else "households by size and by number of adults",
            "every block",
        ),
        Invariant("housing units and occupancy", "every block"),
        Invariant("group quarters and residents", "every block"),
    ]
    return SpecCard(
        mechanism=name,
        domain="the census edited file as given",
        multiverse="datasets sharing the swap's invariants",
        guarantee=no_guarantee(
            DATA_DEPENDENT_SELECTION,
            unit="household",
            invariants=tuple(invariants),
        ),
        covers="the swapped microdata and every table derived from it",
        caveats=(
            f"target swap rate {float(params.rate):g} (share of households that move; both "
            "partners count); the achieved rate, below the target when too few donors match, "
            "depends on the data and is not published",
            f"donors from the same tract / county / state with probabilities "
            f"{float(params.same_tract):g} / {float(params.same_county):g} / "
            f"{float(params.same_state):g}; matching key household size"
            + (" (noised ±1)" if params.noisy_size_key else "")
            + " and number of adults",
            "Group-quarters residents are not swapped.",
        ),
    )


def protect_swap(
    population: Population, params: SwapParameters, rng: np.random.Generator, name: str = "swap"
) -> Release:
    """Run targeted swapping on a population and tabulate the release."""
    if isinstance(population, CensusRecords):
        return protect_declared_swap(population, params, rng, name)
    swapped = swap_population(population, params, rng)
    return tabulated_release(
        name,
        params.recorded(),
        swap_card(params, name),
        swapped.population,
        population,
        rng,
        swapped.notes,
    )


def swap_population(
    population: Population, params: SwapParameters, rng: np.random.Generator
) -> Swapped:
    """Targeted swapping: the swapped population (record keys travel along), its publishable notes
    and its confidential diagnostics (what moved, and how the risky households fared); the
    records of a declared census likewise (:func:`declared_swap`)."""
    if isinstance(population, CensusRecords):
        return declared_swap(population, params, rng)
    households = Households(population)
    initiators, donors, risk = targeted_pairs(households, params, rng)
    rows = households.unit_rows
    source = np.concatenate([rows[initiators], rows[donors]])
    destination = np.concatenate([rows[donors], rows[initiators]])
    swapped = swap_units(population, source, destination)
    notes, diagnostics = swap_figures(initiators, donors, risk, params)
    return Swapped(swapped, notes, diagnostics)


def _swap_entry(name: str, summary: str, preset: dict[str, str]) -> Mechanism[SwapParameters]:
    """A registry entry for targeted swapping with preset defaults (still overridable)."""

    class Preset(SwapParameters):
        @model_validator(mode="before")
        @classmethod
        def _defaults(cls, data: dict, info: ValidationInfo) -> dict:
            census = (info.context or {}).get("census")
            chosen = (
                preset if census is None or is_us2010(census) else declared_preset(name, census)
            )
            return {**chosen, **data} if isinstance(data, dict) else data

    Preset.__name__ = Preset.__qualname__ = f"SwapParameters[{name}]"

    def protect(
        population: Population, params: SwapParameters, rng: np.random.Generator
    ) -> Release:
        return protect_swap(population, params, rng, name)

    return Mechanism(
        name=name,
        summary=summary,
        parameters=Preset,
        guarantee=lambda p: swap_card(p, name),
        protect=protect,
        noise=swap_published_noise,
        check=exact_tables,
        cell_model=cell_model.exact,
        any_census=True,
    )


def swap_published_noise(params: SwapParameters) -> NoisePublication:
    if params._census is not None:
        return declared_swap_noise(params)
    return NoisePublication(
        distribution="targeted households (highest risk first) exchange places with donors of "
        "the same size key; which households moved is not published",
        published=("parameters: rate, donor scopes, size key and risk keys",),
        parameters={
            "rate": float(params.rate),
            "scopes": {
                "tract": float(params.same_tract),
                "county": float(params.same_county),
                "state": float(params.same_state),
            },
        },
    )


SWAP = _swap_entry("swap", "targeted household swapping (no formal guarantee)", {})
SWAP_LOW = _swap_entry(
    "swap-low", "targeted swapping, 5%, same tract, exact key", SWAP_PRESETS["swap-low"]
)
SWAP_HIGH = _swap_entry(
    "swap-high", "targeted swapping, 50%, 30/40/30 scopes, noised key", SWAP_PRESETS["swap-high"]
)
