"""Accuracy of a release's tables against the exact tabulation of the truth: by table and
level, each level's mean, the tables compared like for like, geounit totals and the tract
indicators (evaluation only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdclab.core.figures import Value, fields_json
from sdclab.pipeline.results.figure import from_json

NO_CHILDREN = "no parent cell whose children are all shown"
NO_CELLS = "the table has no cell at this level"
NO_SHOWN_CELLS = "every cell of the table is suppressed at this level"
NO_POSITIVE_CELLS = "no cell has a positive true count"
NO_POSITIVE_SHOWN_CELLS = "no shown cell has a positive true count"
NO_CELLS_OF_SIZE = "no cell has a true count of this size"


def no_nonempty_figure(shown_cells: int) -> str:
    """Why a figure over the non-empty shown cells is missing: none shown, or none non-empty."""
    return NO_POSITIVE_SHOWN_CELLS if shown_cells else NO_SHOWN_CELLS


NO_DISTRIBUTION = (
    "no geounit has a positive true and published total, or the table has one cell (no "
    "distribution to compare)"
)


@dataclass(frozen=True)
class TableAccuracy:
    """Error of one published table at one level against the exact tabulation of the truth,
    over every cell: a withheld (suppressed) cell gives a user nothing, so its error is its true
    count and it stays in the denominator (withholding a true 0 costs nothing). The mean
    absolute errors over the shown cells alone are beside them (``*_shown``)."""

    table: str
    level: str
    cells: int
    shown_cells: int
    nonempty_cells: int
    """Cells whose true count is positive, shown or withheld."""
    nonempty_shown_cells: int
    """Shown cells whose true count is positive."""
    mae: Value
    rmse: Value
    bias: Value
    """Mean signed error (published − true; a withheld cell's is minus its true count)."""
    mae_nonempty: Value
    rmse_nonempty: Value
    bias_nonempty: Value
    mae_shown: Value
    """Mean absolute error over the shown cells alone (withheld cells left out)."""
    mae_nonempty_shown: Value
    """The same over the shown cells whose true count is positive."""
    mae_by_true_count: Mapping[str, Value]
    """Mean absolute error over the cells of each class of true count ("0", "1-9", "10-99",
    "100+")."""
    max_abs_error: Value
    negative_share: Value
    """Share of the shown cells published negative."""
    suppressed_share: float
    share_rel_error_above: Mapping[str, Value]
    """Over cells with a positive true count: share whose relative error exceeds each
    threshold ("10pct", "50pct", "100pct"; a withheld cell's is 100%)."""
    false_positive_cells: int
    """Cells whose true count is 0 but published otherwise."""
    distance_geounits: int
    """Geounits with a positive true or published total: those of the distances."""
    tv_mean: Value
    """Mean over those geounits of the total variation distance between the true and the
    published distribution over the table's cells."""
    hellinger_mean: Value
    """The same for the Hellinger distance."""

    @classmethod
    def from_dict(cls, table: str, level: str, data: Mapping[str, Any]) -> TableAccuracy:
        prefix = "share_rel_error_above_"
        by_count = "mae_true_count_"
        nonempty = no_nonempty_figure(int(data["shown_cells"]))
        return cls(
            table=table,
            level=level,
            cells=int(data["cells"]),
            shown_cells=int(data["shown_cells"]),
            nonempty_cells=int(data["nonempty_cells"]),
            nonempty_shown_cells=int(data["nonempty_shown_cells"]),
            mae=from_json(data["mae"], NO_CELLS),
            rmse=from_json(data["rmse"], NO_CELLS),
            bias=from_json(data["bias"], NO_CELLS),
            mae_nonempty=from_json(data["mae_nonempty"], NO_POSITIVE_CELLS),
            rmse_nonempty=from_json(data["rmse_nonempty"], NO_POSITIVE_CELLS),
            bias_nonempty=from_json(data["bias_nonempty"], NO_POSITIVE_CELLS),
            mae_shown=from_json(data["mae_shown"], NO_SHOWN_CELLS),
            mae_nonempty_shown=from_json(data["mae_nonempty_shown"], nonempty),
            mae_by_true_count={
                k.removeprefix(by_count): from_json(v, NO_CELLS_OF_SIZE)
                for k, v in data.items()
                if k.startswith(by_count)
            },
            max_abs_error=from_json(data["max_abs_error"], NO_CELLS),
            negative_share=from_json(data["negative_share"], NO_SHOWN_CELLS),
            suppressed_share=float(data["suppressed_share"]),
            share_rel_error_above={
                k.removeprefix(prefix): from_json(v, NO_POSITIVE_CELLS)
                for k, v in data.items()
                if k.startswith(prefix)
            },
            false_positive_cells=int(data["false_positive_cells"]),
            distance_geounits=int(data["distance_geounits"]),
            tv_mean=from_json(data["tv_mean"], NO_DISTRIBUTION),
            hellinger_mean=from_json(data["hellinger_mean"], NO_DISTRIBUTION),
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as ``metrics.json`` holds them (one key per relative-error threshold)."""
        out = fields_json(self, exclude=("table", "level"))
        shares = out.pop("share_rel_error_above")
        by_count = out.pop("mae_by_true_count")
        false_positives = out.pop("false_positive_cells")
        out |= {f"mae_true_count_{k}": v for k, v in by_count.items()}
        distances = {k: out.pop(k) for k in ("distance_geounits", "tv_mean", "hellinger_mean")}
        out |= {f"share_rel_error_above_{k}": v for k, v in shares.items()}
        return out | {"false_positive_cells": false_positives} | distances


@dataclass(frozen=True)
class LevelAccuracy:
    """Mean absolute error at one level, averaged over the tables published there."""

    level: str
    mean_mae: float
    tables: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean_mae": self.mean_mae, "tables": self.tables}


COMPARED_TABLES = ("P1", "P12")
"""The tables every release's accuracy is compared on, like for like and each apart: total
population (P1: a geounit's total is one cell) and sex by age (P12). A mean over whatever each
release publishes would compare different tables, and a mean pooled over the two would hide
the error of the totals among P12's cells."""
COMPARED_LEVELS = ("tract", "block")
"""The levels the report compares the releases at."""
COMPARED_METRICS = (
    "mae",
    "mae_nonempty",
    "rmse_nonempty",
    "bias_nonempty",
    "mae_shown",
    "mae_nonempty_shown",
    "suppressed_share",
)
"""The figures of each compared table the tidy results carry at every compared level (not
measured, with the reason, where a release does not publish the table there)."""


def table_accuracies(
    figures: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, dict[str, TableAccuracy]], dict[str, dict[str, Value]]]:
    """Accuracy by table and level, and additivity by table and parent level, read back from
    their JSON form (``accuracy`` of ``metrics.json``; a run has them from
    :func:`sdclab.pipeline.evaluation.accuracy` and
    :func:`sdclab.pipeline.evaluation.additivity`)."""
    accuracy = {
        name: {
            level: TableAccuracy.from_dict(name, level, values)
            for level, values in levels.items()
            if level != "additivity"
        }
        for name, levels in figures.items()
    }
    additivity = {
        name: {k: from_json(v, NO_CHILDREN) for k, v in levels.get("additivity", {}).items()}
        for name, levels in figures.items()
    }
    return accuracy, additivity


def level_accuracies(figures: Mapping[str, Mapping[str, Any]]) -> dict[str, LevelAccuracy]:
    """Each level's mean accuracy read back from ``accuracy_by_level`` of ``metrics.json``."""
    return {
        level: LevelAccuracy(level, float(v["mean_mae"]), int(v["tables"]))
        for level, v in figures.items()
    }


NO_TOTALS = "the release publishes no P1 (total population) table"
NO_GEOUNITS = "no geounit of this class has its total shown"
NO_POSITIVE_TOTAL = "no geounit of this class has a positive true total"
RELATIVE_TOTAL_METRICS = ("mape", "malpe", "share_off_5pct", "share_off_10pct")


def totals_from(data: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Value]]]:
    """The geounit-total metrics read back from JSON (None: no geounit of the class, or none
    positive)."""
    return {
        level: {
            size: {
                k: from_json(v, NO_POSITIVE_TOTAL if k in RELATIVE_TOTAL_METRICS else NO_GEOUNITS)
                for k, v in metrics.items()
            }
            for size, metrics in classes.items()
        }
        for level, classes in data.items()
    }


NO_INDICATORS = "the release publishes no P12 (sex by age) at tract level"
NO_INDICATOR = (
    "no tract has a published indicator (a positive published denominator, no cell suppressed)"
)


def indicators_from(data: Mapping[str, Any]) -> dict[str, dict[str, Value]]:
    """The tract indicators read back from JSON (None: no tract with a published indicator)."""
    return {
        name: {k: from_json(v, NO_INDICATOR) for k, v in metrics.items()}
        for name, metrics in data.items()
    }
