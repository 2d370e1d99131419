"""Per-cell ε-DP noise: independent two-tailed geometric (discrete Laplace) noise on every cell.

The plainest pure-DP table release, and the European paper's warning (Bach §§4.1–4.2): with the
budget split over six levels and many tables, each cell's noise is wide, unbounded, and lands on
small areas as absurd relative errors — areas published with no inhabitants, or with men, women
and the total all distorted the same way. Every cell of every table at every level, zeros
included, gets noise of scale Δ₁/ε_cell from the exact sampler (Δ₁: the most cells one record
counts in, e.g. 6 in the race-tally tables; doubled for bounded neighbours).

Budget split: ``epsilon`` is spread evenly over the geography levels; within a level, the
``census2020`` preset gives 67.5% to the person tables and 32.5% to the unit tables (the 2020
U.S. split the paper uses, Eq. 14), each part evenly over its tables; ``even`` gives every table of
the level the same share. A person's guarantee composes the person tables; a housing unit's, the
unit tables.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab import accounting, noise, schema
from sdclab.accounting import NEIGHBOUR_TEXT, Budget, SpecCard
from sdclab.digest import frames_digest
from sdclab.geography import LEVELS
from sdclab.population import Population
from sdclab.protection.base import Mechanism, Parameters, check_budget_range
from sdclab.release import Release
from sdclab.tables.catalog import CATALOG, TableDef
from sdclab.tables.tabulate import TableCounts, tabulate

PERSON_SHARE = Fraction(675, 1000)
"""Share of each level's budget for person tables in the 2020-style split (Eq. 14)."""


class GeometricParameters(Parameters):
    """Total ε, how it is split, the neighbouring relation and the optional clamp at zero."""

    epsilon: Decimal = Field(Decimal(1), gt=0, le=1000, allow_inf_nan=False)
    split: Literal["census2020", "even"] = "census2020"
    neighbours: Literal["bounded", "unbounded"] = "unbounded"
    nonnegative: bool = Field(False, description="post-process negative counts to 0")

    @model_validator(mode="after")
    def _within_sampler_range(self) -> GeometricParameters:
        scales = [
            scale_of(CATALOG[name], eps, self.neighbours)
            for (name, _), eps in allocation(self).items()
        ]
        check_budget_range("epsilon", self.epsilon, scales, noise.SCALE_RANGE, "scale")
        return self


def sensitivity(table: TableDef, neighbours: str) -> int:
    """Δ₁ of a table: the most cells one record counts in (×2 when a record is replaced)."""
    per_record = int(np.asarray(table.query.sum(axis=0)).max())
    return per_record * (2 if neighbours == "bounded" else 1)


def is_person_table(table: TableDef) -> bool:
    return table.schema is not schema.UNIT


def allocation(p: GeometricParameters) -> dict[tuple[str, str], Fraction]:
    """ε of every (table, level) published."""
    total = Fraction(p.epsilon)
    levels = [lv for lv in LEVELS if any(lv in t.levels for t in CATALOG.values())]
    out: dict[tuple[str, str], Fraction] = {}
    for level in levels:
        tables = [t for t in CATALOG.values() if level in t.levels]
        budget = total / len(levels)
        if p.split == "even":
            shares = {t.name: budget / len(tables) for t in tables}
        else:
            people = [t for t in tables if is_person_table(t)]
            units = [t for t in tables if not is_person_table(t)]
            person_part = budget * (PERSON_SHARE if units else 1)
            shares = {t.name: person_part / len(people) for t in people}
            shares |= {t.name: (budget - person_part) / len(units) for t in units}
        out |= {(name, level): eps for name, eps in shares.items()}
    return out


def scale_of(table: TableDef, eps: Fraction, neighbours: str) -> Fraction:
    """The discrete Laplace scale Δ₁/ε of a table's cells."""
    return Fraction(sensitivity(table, neighbours)) / eps


def protect(population: Population, p: GeometricParameters, rng: np.random.Generator) -> Release:
    """Every cell of every table at every level (zeros included) plus discrete Laplace noise."""
    shares = allocation(p)
    exact = tabulate(population)
    published: dict[str, TableCounts] = {}
    for name, tc in exact.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            dense = matrix.toarray()
            scale = scale_of(tc.table, shares[name, level], p.neighbours)
            noisy = dense + noise.discrete_laplace(scale, dense.shape, rng)
            if p.nonnegative:
                noisy = np.maximum(noisy, 0)
            levels[level] = (codes, sp.csr_matrix(noisy))
        published[name] = TableCounts(tc.table, levels, tc.geoids)
    return Release(
        mechanism="geometric",
        parameters=p.recorded(),
        card=card(p),
        tables={name: tc.to_long() for name, tc in published.items()},
        randomness={},
        input_digest=frames_digest(population.persons, population.units),
        geography=population.geography,
        notes={"all_cells_noised": True, "nonnegative": p.nonnegative},
    )


def card(p: GeometricParameters) -> SpecCard:
    """Pure ε-DP by sequential composition over the tables and levels."""
    shares = allocation(p)
    person = sum((e for (n, _), e in shares.items() if is_person_table(CATALOG[n])), Fraction(0))
    unit = sum((e for (n, _), e in shares.items() if not is_person_table(CATALOG[n])), Fraction(0))
    rows = []
    for (name, level), eps in shares.items():
        table = CATALOG[name]
        scale = scale_of(table, eps, p.neighbours)
        rows.append(
            {
                "level": level,
                "table": name,
                "epsilon": float(eps),
                "sensitivity": sensitivity(table, p.neighbours),
                "scale": float(scale),
                "95% MOE": accounting.laplace_margin_of_error(scale),
            }
        )
    return SpecCard(
        mechanism="geometric",
        domain="person and housing-unit records of the tabulated population",
        multiverse="a single universe: no statistic is published exactly",
        invariants=(),
        protection_unit="person record (housing-unit record for the unit tables)",
        neighbours=NEIGHBOUR_TEXT[p.neighbours],
        output_premetric="pure-DP (D_Mult)",
        budget=Budget(epsilon=float(person)),
        covers="every person table at every level, each cell with discrete Laplace noise "
        "(composition over tables and levels)",
        caveats=(
            f"Housing-unit records: epsilon = {float(unit):g} over the unit tables.",
            "Noisy counts may be negative"
            + (" (clamped to 0 here: post-processing)" if p.nonnegative else "")
            + "; tables are not consistent with one another.",
            "Unbounded noise: small areas get large relative errors (see the tail analysis).",
        ),
        allocation=tuple(rows),
    )


MECHANISM = Mechanism(
    name="geometric",
    summary="per-cell two-tailed geometric noise (pure epsilon-DP)",
    parameters=GeometricParameters,
    guarantee=card,
    protect=protect,
)
