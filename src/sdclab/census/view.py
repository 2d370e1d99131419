"""What an experiment's results and report read of a declared census: which census it is, the
tables and levels its report shows by default, and the figures of its persons that the US
report counts on the US tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from sdclab.census.model import Census
from sdclab.census.records import CensusRecords
from sdclab.results import (
    FRONTIER_ACCURACY,
    CensusView,
    FrontierAxes,
    NotMeasured,
    PopulationSummary,
)

if TYPE_CHECKING:
    from sdclab.experiment import Experiment


def census_view(census: Census) -> CensusView:
    """The census as the results and the report name it, with the report's default tables: its
    total table and the first person table crossing an attribute that is published at the
    reconstruction's level (else the first crossing one)."""
    unit = census.reconstruction.level
    crossing = [t for t in census.tables.values() if t.records == "persons" and t.crossed]
    at_unit = [t for t in crossing if unit in t.levels]
    compared = next(iter(at_unit or crossing), None)
    total = census.total_table
    return CensusView(
        name=census.name,
        title=census.title,
        digest=census.digest,
        levels=census.geography.levels,
        unit=unit,
        program=census.within,
        total=None if total is None else total.name,
        compared=None if compared is None else compared.name,
        quasi_identifiers=tuple(census.quasi_identifiers),
    )


def persons_unique(records: CensusRecords) -> dict[str, float]:
    """Share of persons unique in their geounit of the reconstruction's level on the census's
    quasi-identifiers (evaluation only), named ``unique_on_<level>_<attributes>``."""
    from sdclab.attacks.census_linkage import GEOUNIT, truth_frame

    census = records.census
    keys = [GEOUNIT, *census.quasi_identifiers]
    sizes = truth_frame(records).group_by(keys).len()
    unique = int(sizes.filter(pl.col("len") == 1).height)
    name = "_".join((census.reconstruction.level, *census.quasi_identifiers))
    return {f"unique_on_{name}": unique / records.n_persons}


US_ONLY_ACCURACY = ("compared.", "indicators.")
"""The frontier's accuracy figures measured on the US tables alone (P1 and P12, the tract
indicators)."""


def frontier_axes(
    census: Census,
    accuracy: str | None,
    level: str | None,
    table: str | None,
    risk: str,
    ceiling: float,
) -> FrontierAxes:
    """The report's frontier over a declared census: by default the MAE of the non-empty cells
    of its compared table at the level of the reconstruction's programs, against the confirmed
    rate of ``risk`` (``attacker.persons``): a declared census has no baseline, so no headline
    risk beyond it. A figure or group of the US tables alone is a ValueError."""
    view = census_view(census)
    accuracy = accuracy or "accuracy.mae_nonempty"
    if accuracy.startswith(US_ONLY_ACCURACY):
        raise ValueError(
            f"{accuracy} is measured on the US 2010 census's tables (P1, P12, the tract "
            f"indicators); for census {census.name} plot an accuracy.* figure of one of its "
            "tables, or totals.*"
        )
    attacker, persons = risk.split(".")
    if persons == "vulnerable":
        raise ValueError(
            "persons: the vulnerable group needs solution variability, measured on the US 2010 "
            f"census only, not census {census.name}: give all or nonmodal"
        )
    per_table = FRONTIER_ACCURACY.get(accuracy, False)
    return FrontierAxes(
        accuracy=accuracy,
        level=level or view.program,
        table=table if table is not None or not per_table else view.compared,
        risk=f"reidentification.{attacker}.reconstruction.{persons}.confirmed_rate",
        risk_ceiling=ceiling,
    )


def us_only_settings(
    experiment: Experiment, census: Census, given: Mapping[str, set[str]]
) -> str | None:
    """The first setting of ``experiment`` over the declared ``census`` that runs on the US 2010
    census only, in one line naming it (None: none). ``given``: the keys each table of the file
    gave (a default that would turn on a US-only step, such as ``attacks.variability``, is not
    refused: that step is n/a with the reason)."""
    from sdclab import protection

    for number, entry in enumerate(experiment.mechanisms, 1):
        refused = protection.get(entry.name).refuses(census)
        if refused is not None:
            return f"mechanisms[{number}]: {refused}"
    attacks = experiment.attacks
    if attacks.variability and "variability" in given["attacks"]:
        return (
            f"attacks.variability: {NO_VARIABILITY}, not census {census.name}: leave it out "
            "(the report then says n/a) or set it to false"
        )
    if attacks.block_only:
        return (
            "attacks.block_only: the reconstruction from the block tables alone is the US 2010 "
            f"attack's, not census {census.name}'s"
        )
    if experiment.match is not None:
        return (
            "match: matching on the common axis reads cards over the US 2010 census's tables so "
            f"far, not census {census.name}'s: give each mechanism its own budget"
        )
    return None


NO_VARIABILITY = "solution variability is measured on the US 2010 census only"


NO_VULNERABLE = (
    "the vulnerable group needs solution variability, measured on the US 2010 census only"
)


def declared_summary(records: CensusRecords, source: Mapping[str, Any]) -> PopulationSummary:
    """What an experiment's results say of a declared census's persons: their number, their
    households, the geounits of each level and the share unique on the attacker's keys (no
    block-size classes: those are the US blocks')."""
    return PopulationSummary(
        source=source,
        persons=records.n_persons,
        units=records.n_households,
        geography=records.geography.summary,
        uniques=persons_unique(records),
        vulnerable=NotMeasured(NO_VULNERABLE),
    )
