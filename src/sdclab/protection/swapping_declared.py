"""Targeted household swapping over a declared census (docs/census.md, docs/swapping.md).

The US version (:mod:`sdclab.protection.swapping`) reads the US census's constants: a person's
risk from sex, 38-bin age, race and Hispanic origin in the block, donors of the same size and
number of adults from the same tract, county or state. Over a declared census the same idea is
stated in the census's own terms: the risk from ``risk_variables`` (default: its
quasi-identifiers) counted in each unit of ``risk_level`` (default: the bottom level), donors of
the same size and ``matching_attributes`` (default: every household attribute) from another
bottom unit of the same area of ``matching_level`` (default: the level above the bottom one).
Selection and pairing are the US draws (:func:`~sdclab.protection.swap_pairs.pair_targeted`).
Each swapped household takes its partner's units in every geography, its attributes and its
persons' with it; the release publishes the swapped records' tables, as the declared PSA does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.census.model import Census
from sdclab.core.census.records import CensusRecords
from sdclab.core.errors import InputError
from sdclab.core.privacy import Invariant, no_guarantee
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate
from sdclab.protection.base import NoisePublication
from sdclab.protection.households import Swapped
from sdclab.protection.record_swapping import (
    SIZE,
    TRS_SETTINGS,
    RecordSwap,
    exact_depth,
    pair_records,
    record_candidates,
    record_swap_caveats,
    record_swap_diagnostics,
    record_swap_recorded,
    record_swap_settings,
    risk_column,
    risk_variable_problem,
)
from sdclab.protection.swap_pairs import (
    DATA_DEPENDENT_SELECTION,
    Candidates,
    group_ids,
    pair_targeted,
    swap_figures,
)
from sdclab.release import Release


class SwapParameters(Protocol):
    """What the declared census's swapping reads of targeted swapping's parameters
    (:class:`sdclab.protection.swapping.SwapParameters`)."""

    rate: Decimal
    noisy_size_key: bool
    risk_threshold: Decimal
    max_rounds: int
    risk_variables: tuple[str, ...] | None
    risk_level: str | None
    matching_level: str | None
    matching_attributes: tuple[str, ...] | None
    risk_levels: tuple[str, ...] | None
    k_anonymity: int | None
    similar: tuple[str, ...] | None
    carry_along: tuple[str, ...] | None

    @property
    def census(self) -> Census: ...
    def recorded(self) -> dict[str, Any]: ...


DECLARED_SETTINGS = frozenset(
    {"risk_variables", "risk_level", "matching_level", "matching_attributes", *TRS_SETTINGS}
)
"""Targeted swapping's settings named in a declared census's terms (refused for the US census,
whose constants are risk_keys and the same_tract / same_county / same_state scopes)."""

DECLARED_PRESETS: dict[str, dict[str, str]] = {
    "swap-low": {"rate": "0.05"},
    "swap-high": {"rate": "0.5", "noisy_size_key": "true"},
}
"""The US presets in a declared census's terms: swap-low 5% with donors from the level above the
bottom one (the US tract), exact key; swap-high 50% with donors from the top level (the widest
US scope, the state), noised key."""


@dataclass(frozen=True)
class DeclaredSwap:
    """A declared census's swapping settings, each given or its default, checked against it."""

    risk_variables: tuple[str, ...]
    risk_level: str
    matching_level: str
    matching_attributes: tuple[str, ...]
    record_swap: RecordSwap | None = None
    """targeted record swapping's settings (None: none given, the declared swap as before)"""


def declared_preset(name: str, census: Census) -> dict[str, str]:
    """The defaults of preset ``name`` over a declared ``census``."""
    preset = dict(DECLARED_PRESETS.get(name, {}))
    if name == "swap-high":
        preset["matching_level"] = census.geography.levels[0]
    return preset


def declared_settings(params: SwapParameters) -> DeclaredSwap:
    """The settings over the parameters' declared census; a wrong one is a ValueError naming it
    and what was expected."""
    census = params.census
    levels = census.geography.levels
    if len(levels) < 2:
        raise ValueError(
            f"census {census.name}'s geography has a single level: no area of a level above the "
            "bottom one to find donors in"
        )
    risk_variables = (
        census.quasi_identifiers if params.risk_variables is None else params.risk_variables
    )
    for name in risk_variables:
        problem = risk_variable_problem(census, name)
        if problem is not None:
            raise ValueError(f"risk_variables: {problem}")
    risk_level = params.risk_level or levels[-1]
    if risk_level not in levels:
        raise ValueError(f"risk_level: expected one of {', '.join(levels)}, got {risk_level!r}")
    matching_level = params.matching_level or levels[-2]
    if matching_level not in levels[:-1]:
        raise ValueError(
            f"matching_level: expected one of {', '.join(levels[:-1])} (a level above the bottom "
            f"one), got {matching_level!r}"
        )
    own = [a.name for a in census.attributes.values() if a.records == "households"]
    matching = tuple(own) if params.matching_attributes is None else params.matching_attributes
    foreign = [a for a in matching if a not in own]
    if foreign:
        raise ValueError(
            f"matching_attributes: expected household attributes of census {census.name} "
            f"({', '.join(own) or 'it declares none'}), got {foreign[0]!r}"
        )
    trs = record_swap_settings(params, census, risk_level, tuple(matching))
    return DeclaredSwap(tuple(risk_variables), risk_level, matching_level, tuple(matching), trs)


def declared_recorded(params: SwapParameters) -> dict[str, Any]:
    """The declared settings as a release records them: each given or its default."""
    chosen = declared_settings(params)
    recorded = {
        "risk_variables": list(chosen.risk_variables),
        "risk_level": chosen.risk_level,
        "matching_level": chosen.matching_level,
        "matching_attributes": list(chosen.matching_attributes),
    }
    return record_swap_recorded(recorded, chosen.record_swap, params.similar is not None)


def declared_household_risk(records: CensusRecords, chosen: DeclaredSwap) -> FloatArray:
    """Risk of each household: the largest 1 / (persons in the member's unit of the risk level
    sharing the member's risk variables) over its members (1: a member unique there)."""
    unit = records.geography.block_codes_at(chosen.risk_level)[records.block_index("persons")]
    group = group_ids(unit, *(risk_column(records, v) for v in chosen.risk_variables))
    person_risk = 1.0 / np.bincount(group)[group]
    risk = np.zeros(records.n_households)
    assert records.households is not None
    np.maximum.at(risk, records.households, person_risk)
    return risk


def relocated(
    records: CensusRecords, partner: IntArray, carried: tuple[str, ...] = ()
) -> CensusRecords:
    """The records with each household in the units of household ``partner[h]``, in every
    geography: its attributes and its persons' travel with it, except the ``carried`` household
    attributes, which belong to the place: it takes its partner's."""
    assert records.households is not None
    blocks = {
        name: records.block_index("households", records.geographies[name])[partner][
            records.households
        ]
        for name in records.blocks
    }
    own = {a: v[partner] if a in carried else v for a, v in records.household_attributes.items()}
    return replace(records, blocks=blocks, household_attributes=own)


def declared_swap(
    records: CensusRecords, params: SwapParameters, rng: np.random.Generator
) -> Swapped:
    """Targeted swapping of a declared census's households: the swapped records, the notes a
    release may carry and the diagnostics it may not (evaluation only)."""
    name = params.census.name
    if records.households is None or records.n_households == 0:
        raise InputError(
            f"targeted swapping: census {name} names no household key, so no households to swap"
        )
    chosen = declared_settings(params)
    n = records.n_households
    trs = chosen.record_swap
    if trs is None:
        home = records.block_index("households")
        risk = declared_household_risk(records, chosen)
        candidates = Candidates(
            risk,
            np.bincount(records.households, minlength=n),
            home,
            (records.geography.block_codes_at(chosen.matching_level)[home],),
            tuple(records.household_attributes[a] for a in chosen.matching_attributes),
        )
        initiators, donors = pair_targeted(candidates, (Fraction(1),), params, rng)
        high = risk >= float(params.risk_threshold)
    else:
        found = record_candidates(
            records, trs, chosen.risk_variables, chosen.matching_level, params, rng
        )
        initiators, donors = pair_records(found, params, rng)
        risk, high = found.risk, found.high
    partner = np.arange(n, dtype=np.int64)
    partner[initiators], partner[donors] = donors, initiators
    notes, diagnostics = swap_figures(initiators, donors, risk, params, high)
    if trs is not None:
        diagnostics |= record_swap_diagnostics(initiators, donors, high)
    carried = () if trs is None else trs.carry_along
    return Swapped(relocated(records, partner, carried), notes, diagnostics)  # type: ignore[arg-type]


def swapped_tables_release(
    name: str, parameters: dict[str, Any], card: SpecCard, swapped: Swapped, records: CensusRecords
) -> Release:
    """A swap's release over a declared census: the tables of the swapped records (not the
    records themselves: a declared census's microdata are not part of its releases yet)."""
    return Release(
        mechanism=name,
        parameters=parameters,
        card=card,
        tables={
            n: PublishedTable.from_counts(tc) for n, tc in tabulate(swapped.population).items()
        },
        randomness={},
        input_digest=records.digest,
        geography=records.geography,
        notes=swapped.notes,
    )


def protect_declared_swap(
    records: CensusRecords, params: SwapParameters, rng: np.random.Generator, name: str
) -> Release:
    """Targeted swapping of a declared census, and the tables of the swapped records."""
    swapped = declared_swap(records, params, rng)
    card = declared_swap_card(params, name)
    return swapped_tables_release(name, params.recorded(), card, swapped, records)


def declared_swap_card(params: SwapParameters, name: str) -> SpecCard:
    """No formal guarantee (the selection reads the confidential data); the card lists what the
    swap keeps exact and states the target share, in the census's words."""
    census = params.census
    chosen = declared_settings(params)
    bottom = census.geography.bottom
    kept = ([] if params.noisy_size_key else ["size"]) + list(chosen.matching_attributes)
    trs = chosen.record_swap
    within = f"each {chosen.matching_level} and above"
    if trs is not None:
        kept = [a for a in trs.similar[:1] if a != SIZE or not params.noisy_size_key]
        kept += [a for a in trs.carry_along if a not in kept]
        depth = exact_depth(trs, census.geography.levels, chosen.matching_level)
        within = (
            "the whole census" if depth < 0 else f"each {census.geography.levels[depth]} and above"
        )
    invariants = [
        Invariant("every statistic (households move within it)", within),
        Invariant("the number of households", f"every {bottom}"),
        *([Invariant(f"households by {' and by '.join(kept)}", f"every {bottom}")] if kept else []),
    ]
    others = [g for g in census.geographies if g != census.geography.name]
    return SpecCard(
        mechanism=name,
        domain=f"census {census.name}'s records as given (households with their persons)",
        multiverse="datasets sharing the swap's invariants",
        guarantee=no_guarantee(
            DATA_DEPENDENT_SELECTION,
            unit="household",
            invariants=tuple(invariants),
        ),
        covers="the swapped records and every table derived from them",
        caveats=(
            _share_swapped(params, trs is not None),
            *(
                _risk_and_donors(chosen, params)
                if trs is None
                else record_swap_caveats(trs, chosen, params)
            ),
            "A household moves whole: its persons and its household attributes travel with it"
            + (
                f"; it takes its partner's units in every geography, and the invariants are "
                f"the {census.geography.name} geography's ({', '.join(others)}: not kept)"
                if others
                else ""
            )
            + ".",
        ),
    )


def _share_swapped(params: SwapParameters, record_swap: bool) -> str:
    """The card's words on the share of households swapped: the target, or for record swapping
    every risky household and at least the target (no formal DP guarantee either way)."""
    rate = float(params.rate)
    if not record_swap:
        return (
            f"target swap rate {rate:g} (share of households that move; both "
            "partners count); the achieved rate, below the target when too few donors match, "
            "depends on the data and is not published"
        )
    return (
        "share of households swapped: every household at risk (with its donor), whatever the "
        f"rate, and at least the target swap rate {rate:g} (both partners count) when fewer are "
        "at risk, so the share actually swapped may exceed the rate; that share depends on the "
        "data, is reported in the diagnostics and is not published; no formal (differential "
        "privacy) guarantee"
    )


def _risk_and_donors(chosen: DeclaredSwap, params: SwapParameters) -> tuple[str, str]:
    """The card's words on the risk and the donors of the declared swap."""
    key = "household size" + (" (noised ±1)" if params.noisy_size_key else "")
    return (
        f"a person's risk is 1 / (persons in their {chosen.risk_level} sharing their "
        f"{', '.join(chosen.risk_variables) or 'unit alone'}); households with a member of "
        f"risk at least {float(params.risk_threshold):g} are swapped first",
        f"each selected household exchanges places with a donor in another "
        f"{params.census.geography.bottom} of the same {chosen.matching_level}; matching key {key}"
        + "".join(f" and {a}" for a in chosen.matching_attributes),
    )


def declared_swap_noise(params: SwapParameters) -> NoisePublication:
    """What a declared census's swap release says about its randomness."""
    chosen = declared_settings(params)
    return NoisePublication(
        distribution="targeted households (highest risk first) exchange places with donors of "
        "the same size key and matching attributes; which households moved is not published",
        published=("parameters: rate, matching level and attributes, size key, risk variables",),
        parameters={"rate": float(params.rate), "matching_level": chosen.matching_level},
    )
