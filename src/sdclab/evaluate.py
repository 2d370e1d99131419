"""Evaluation: the one place that sees both the truth and what was published or reconstructed."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from sdclab import schema
from sdclab.population import Population

BLOCK_SIZE_CLASSES = ((1, 9), (10, 49), (50, 99), (100, 249), (250, 499), (500, 999), (1000, None))
"""Block population classes of the 2010 study."""

KEY = ("block", "sex", "race", "hispanic")


def size_class_label(low: int, high: int | None) -> str:
    return f"{low}+" if high is None else f"{low}-{high}"


def _size_class(persons: pl.Expr) -> pl.Expr:
    """The block-size class label of a block population."""
    expr = pl.lit(None, dtype=pl.String)
    for low, high in reversed(BLOCK_SIZE_CLASSES):
        inside = persons >= low if high is None else persons.is_between(low, high)
        expr = pl.when(inside).then(pl.lit(size_class_label(low, high))).otherwise(expr)
    return expr


def _with_agebin(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        agebin=pl.Series(schema.agebin38(frame["age"].to_numpy()), dtype=pl.Int16)
    )


def agreement(reconstructed: pl.DataFrame, truth: Population) -> dict[str, Any]:
    """One-to-one agreement of reconstructed with true records, by block-size class.

    Records are matched without replacement within each block: first on exact age (with sex,
    race and Hispanic origin), then the leftovers on the 38 agebins. The number of matches of a
    key is min(reconstructed, true) — what any one-to-one matching achieves at best.
    """
    cols = ["block", "sex", "age", "race", "hispanic"]
    true = _with_agebin(truth.persons.select(cols))
    recon = _with_agebin(reconstructed.select(cols).cast({c: true.schema[c] for c in cols}))
    exact = _matched(recon, true, [*KEY, "age"])
    left_r = _leftovers(recon, exact, "r")
    left_t = _leftovers(true, exact, "t")
    binned = (
        left_r.join(left_t, on=[*KEY, "agebin"], how="inner")
        .with_columns(matched=pl.min_horizontal("r", "t"))
        .group_by("block")
        .agg(pl.col("matched").sum().alias("agebin_matches"))
    )
    per_block = (
        true.group_by("block")
        .len("persons")
        .join(
            exact.group_by("block").agg(pl.col("matched").sum().alias("exact_matches")),
            on="block",
            how="left",
        )
        .join(binned, on="block", how="left")
        .fill_null(0)
        .with_columns(size_class=_size_class(pl.col("persons")))
    )
    return _agreement_figures(per_block, recon.height)


def _matched(recon: pl.DataFrame, true: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    r = recon.group_by(key).len("r")
    t = true.group_by(key).len("t")
    return r.join(t, on=key, how="inner").with_columns(matched=pl.min_horizontal("r", "t"))


def _leftovers(records: pl.DataFrame, exact: pl.DataFrame, name: str) -> pl.DataFrame:
    """Records left after the exact pass, counted by key and agebin."""
    key = [*KEY, "age"]
    counts = records.group_by([*key, "agebin"]).len(name)
    return (
        counts.join(exact.select([*key, "matched"]), on=key, how="left")
        .with_columns(pl.col(name) - pl.col("matched").fill_null(0))
        .group_by([*KEY, "agebin"])
        .agg(pl.col(name).sum())
    )


def _agreement_figures(per_block: pl.DataFrame, reconstructed: int) -> dict[str, Any]:
    def rates(frame: pl.DataFrame) -> dict[str, float | int]:
        persons = int(frame["persons"].sum())
        exact = int(frame["exact_matches"].sum())
        binned = exact + int(frame["agebin_matches"].sum())
        return {
            "blocks": frame.height,
            "persons": persons,
            "agree_exact_age": exact / persons if persons else float("nan"),
            "agree_agebin": binned / persons if persons else float("nan"),
        }

    by_class = {
        size_class_label(low, high): rates(
            per_block.filter(pl.col("size_class") == size_class_label(low, high))
        )
        for low, high in BLOCK_SIZE_CLASSES
    }
    return {
        "all": rates(per_block),
        "reconstructed_persons": reconstructed,
        "by_block_size": by_class,
    }


def block_agebin_agreement(reconstructed: pl.DataFrame, truth: Population) -> float:
    """Share of true persons matched one-to-one on {block, sex, agebin} alone."""
    cols = ["block", "sex", "age"]
    true = _with_agebin(truth.persons.select(cols))
    recon = _with_agebin(reconstructed.select(cols).cast({c: true.schema[c] for c in cols}))
    key = ["block", "sex", "agebin"]
    matched = recon.group_by(key).len("r").join(true.group_by(key).len("t"), on=key)
    total = int(matched.select(pl.min_horizontal("r", "t")).sum().item())
    return total / true.height if true.height else float(np.nan)
