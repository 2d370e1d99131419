"""The ONS cell key function, reproduced (cell_key_perturbation 3.1.0 ``create_perturbed_table``).

One perturbed frequency table of a record frame, exactly as the ONS package computes it, so that
the cell key mechanism's lookups can be checked against the package's own cases (docs/cellkey.md,
*The ONS package, reproduced*)."""

from __future__ import annotations

import numpy as np
import polars as pl

from sdclab.core.errors import InputError
from sdclab.protection.ptable import OnsPTable, pcv

ONS_KEY_SPACE = 4096
"""ONS administrative data: rk = ons_id mod 4096 (``keys=ids`` uses the ids the same way)."""


def ons_perturbed_table(
    data: pl.DataFrame,
    ptable: OnsPTable,
    geog: list[str],
    tab_vars: list[str],
    record_key: str | None,
    use_existing_ons_id: bool = True,
    threshold: int = 10,
) -> pl.DataFrame:
    """One perturbed frequency table exactly as the ONS package 3.1.0 computes it.

    Rows: the Cartesian product of the observed levels of every variable, ascending; columns
    geog…, tab_vars…, pre_sdc_count, ckey, pcv, pvalue, count (null below ``threshold``).
    ``pre_sdc_count, ckey, pcv, pvalue`` are confidential and must be dropped before release.
    """
    keys = ons_record_keys(data, record_key, use_existing_ons_id)
    by = geog + tab_vars
    if not by:
        raise InputError("ons table: geog and tab_vars are both empty")
    missing = [c for c in by if c not in data.columns]
    if missing:
        raise InputError(f"ons table: no column(s) {', '.join(missing)} in the data")
    nulls = [c for c in by if data.get_column(c).null_count()]
    if nulls:
        raise InputError(f"ons table: missing values in {', '.join(nulls)} (complete categories)")
    frame = data.select(by).with_columns(pl.Series("__key", keys).fill_null(0))
    grouped = frame.group_by(by).agg(
        pl.len().cast(pl.Int64).alias("pre_sdc_count"), pl.col("__key").sum().alias("__sum")
    )
    grid = frame.select(pl.col(by[0]).unique().sort())
    for column in by[1:]:
        grid = grid.join(frame.select(pl.col(column).unique().sort()), how="cross")
    out = grid.join(grouped, on=by, how="left").sort(by)
    n = out.get_column("pre_sdc_count").fill_null(0).to_numpy().astype(np.int64)
    ckey = out.get_column("__sum").fill_null(0).to_numpy().astype(np.int64) % ptable.key_space
    pvalue = ptable.noise(n, ckey)
    count = n + pvalue
    return (
        out.drop("__sum")
        .with_columns(
            pl.Series("pre_sdc_count", n),
            pl.Series("ckey", ckey),
            pl.Series("pcv", pcv(n)),
            pl.Series("pvalue", pvalue),
            pl.Series("count", count, dtype=pl.Int64),
        )
        .with_columns(pl.when(pl.col("count") >= threshold).then(pl.col("count")).alias("count"))
    )


def ons_record_keys(
    data: pl.DataFrame, record_key: str | None, use_existing_ons_id: bool
) -> pl.Series:
    """Record keys as ONS takes them: ons_id mod 4096 when present (and allowed), else the
    ``record_key`` column; fewer than half the records keyed is an error."""
    if use_existing_ons_id and "ons_id" in data.columns:
        ids = data.get_column("ons_id").cast(pl.Float64, strict=False)
        keys = (ids % ONS_KEY_SPACE).cast(pl.Int64)
    elif record_key is None or record_key not in data.columns:
        raise InputError(f"ons table: no record key column {record_key!r} and no ons_id")
    else:
        keys = data.get_column(record_key).cast(pl.Int64, strict=False)
    if keys.null_count() * 2 > len(keys):
        raise InputError(
            f"ons table: {keys.null_count()} of {len(keys)} records have no record key "
            "(at least half must have one)"
        )
    return keys
