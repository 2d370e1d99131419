"""What an experiment's results and report read of a declared census: which census it is, the
tables and levels its report shows by default, and the figures of its persons that the US
report counts on the US tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from sdclab.core.census.model import Census
from sdclab.core.census.records import CensusRecords
from sdclab.core.figures import NotMeasured
from sdclab.pipeline.results.experiment import CensusView, PopulationSummary


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
