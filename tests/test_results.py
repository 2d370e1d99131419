"""Typed results: what is not measured stays not measured, in memory and on disk."""

from __future__ import annotations

import polars as pl
import pytest

from sdclab.attacks.variability import NO_EXACT_TRACT, proven_solvar_zero, variability_summary
from sdclab.core.optimize.highs import NODE_LIMIT_STATUS, OPTIMAL_STATUS
from sdclab.pipeline.results import SCHEMA_VERSION, ExperimentResult, NotMeasured, Variability


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
        {"block": ["b"], "persons": [3], "solvar": [0.0], "status": [OPTIMAL_STATUS]},
    )
    assert Variability.from_dict(variability_summary(one)).share_blocks_solvar_zero == 1.0


def test_a_block_whose_program_stopped_early_is_not_counted_solvar_zero() -> None:
    """solvar 0 proves a block's reconstruction unique only from a program solved to
    optimality: the summary counts blocks by the one rule the vulnerable group uses."""
    solvar = pl.DataFrame(
        {
            "block": ["010010001001001", "010010001001002", "010010001001003"],
            "persons": [3, 5, 2],
            "solvar": [0.0, 0.0, 0.5],
            "status": [OPTIMAL_STATUS, NODE_LIMIT_STATUS, OPTIMAL_STATUS],
        }
    )
    summary = variability_summary(solvar)
    assert summary["blocks_solvar_zero"] == proven_solvar_zero(solvar).len() == 1
    assert summary["share_blocks_solvar_zero"] == pytest.approx(1 / 3)
    assert summary["persons_in_solvar_zero_blocks"] == 3
    assert summary["share_persons_solvar_zero"] == pytest.approx(0.3)


def test_results_of_another_schema_version_are_refused_in_words() -> None:
    with pytest.raises(
        ValueError, match=f"schema version 0, not {SCHEMA_VERSION}: run the experiment again"
    ):
        ExperimentResult.from_dict({"schema_version": 0, "population": {}, "mechanisms": {}})
