"""A frame of US person records as a release's microdata or a reconstruction gives them (block,
sex, age, race, Hispanic origin, any of them null where the release does not determine it): what
the agreement and the reidentification read of it."""

from __future__ import annotations

import polars as pl

from sdclab.censuses.us2010 import schema


def with_agebin(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with an ``agebin`` column (the 38 bins of P12 + P14) derived from ``age``
    (null where age is)."""
    bins = pl.Series(schema.agebin38(frame["age"].fill_null(0).to_numpy()), dtype=pl.Int16)
    return frame.with_columns(agebin=pl.when(pl.col("age").is_not_null()).then(bins))


PERSON_ATTRIBUTES = ("block", "sex", "age", "race", "hispanic")
"""What :func:`agreement` matches released or reconstructed person records on."""


def has_person_attributes(frame: pl.DataFrame) -> bool:
    """Whether released person records carry what :func:`agreement` matches on."""
    return set(PERSON_ATTRIBUTES) <= set(frame.columns)


def unknown_attributes(records: pl.DataFrame) -> list[str]:
    """Person attributes null in every record: those the attacked release does not determine
    (sex and age for a PL 94-171 release). None of a frame without records."""
    if not records.height:
        return []
    return [a for a in schema.PERSON.names if records[a].null_count() == records.height]
