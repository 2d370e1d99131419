"""Typed results: what is not measured stays not measured, in memory and on disk."""

from __future__ import annotations

import polars as pl
import pytest

from sdclab.attacks.variability import NO_EXACT_TRACT, variability_summary
from sdclab.results import SCHEMA_VERSION, ExperimentResult, NotMeasured, Variability


def test_no_exactly_solved_block_gives_no_solvar_share_rather_than_zero() -> None:
    empty = pl.DataFrame(
        schema={"block": pl.String, "persons": pl.Int64, "solvar": pl.Float64, "status": pl.String}
    )
    summary = variability_summary(empty)
    assert summary["share_blocks_solvar_zero"] == {"not_measured": NO_EXACT_TRACT}
    read = Variability.from_dict(summary)
    assert read.share_blocks_solvar_zero == NotMeasured(NO_EXACT_TRACT)
    assert read.share_persons_solvar_zero == NotMeasured(NO_EXACT_TRACT)
    assert "n/a of 0 blocks" in repr(read)


def test_one_exactly_solved_block_gives_its_share() -> None:
    one = pl.DataFrame(
        {"block": ["b"], "persons": [3], "solvar": [0.0], "status": ["optimal"]},
    )
    assert Variability.from_dict(variability_summary(one)).share_blocks_solvar_zero == 1.0


def test_results_of_another_schema_version_are_refused_in_words() -> None:
    with pytest.raises(
        ValueError, match=f"schema version 0, not {SCHEMA_VERSION}: run the experiment again"
    ):
        ExperimentResult.from_dict({"schema_version": 0, "population": {}, "mechanisms": {}})
