"""A published table as a release holds it: counts and suppressed cells, by level, as matrices.

Every level of a table is a sparse ``geounits × cells`` count matrix (rows: every geounit of the
level, in the order of ``Geography.codes(level)``; columns: the table's cells) and a sparse boolean
mask of its suppressed cells, whose counts are 0 in the count matrix. Consumers state at the call
what a suppressed cell is for them: :meth:`PublishedTable.matrix` (0),
:meth:`PublishedTable.dense` (an explicit fill, NaN unless told) or :meth:`PublishedTable.frame`
(a labelled long frame, null). The long form of the files (``tables/<TABLE>.parquet``) is written
and read by :mod:`sdclab.release` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.tabulate import TableCounts

LONG_SCHEMA = {"level": pl.String, "geoid": pl.String, "cell": pl.Int32, "count": pl.Int64}
"""Columns of a table in long form, as a release stores it (count Int64, or Float64 for
real-valued counts; null = suppressed)."""

_MatrixLike: TypeAlias = "sp.spmatrix | sp.sparray | npt.ArrayLike"


def _frozen(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """``matrix`` in canonical form (sorted, no explicit zeros) with read-only arrays."""
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    for array in (matrix.data, matrix.indices, matrix.indptr):
        array.flags.writeable = False
    return matrix


class PublishedTable:
    """One published table at every level it is published: counts and suppressed cells.

    ``counts[level]`` is a ``geounits × cells`` matrix (integer or float: every level is kept as
    int64, or all as float64 when any level is float) whose rows are the geounits ``geoids[level]``;
    ``suppressed[level]`` (optional) marks the cells withheld there. A suppressed cell's count is
    0 in :meth:`matrix`. The matrices returned are read-only.
    """

    __slots__ = ("_counts", "_geoids", "_suppressed", "table")

    table: TableDef

    def __init__(
        self,
        table: TableDef,
        geoids: Mapping[str, pl.Series],
        counts: Mapping[str, _MatrixLike],
        suppressed: Mapping[str, _MatrixLike] | None = None,
    ) -> None:
        if set(counts) != set(table.levels):
            raise ValueError(
                f"table {table.name}: counts at {sorted(counts)}, expected its levels "
                f"{list(table.levels)}"
            )
        suppressed = dict(suppressed or {})
        unknown = set(suppressed) - set(table.levels)
        if unknown:
            raise ValueError(f"table {table.name}: suppressed cells at unknown levels {unknown}")
        matrices = {level: sp.csr_matrix(counts[level]) for level in table.levels}
        is_float = any(m.dtype.kind == "f" for m in matrices.values())
        bad = [lv for lv, m in matrices.items() if m.dtype.kind not in "iuf"]
        if bad:
            raise ValueError(f"table {table.name} at {bad[0]}: counts must be integers or floats")
        dtype = np.float64 if is_float else np.int64
        self.table = table
        self._geoids: dict[str, pl.Series] = {}
        self._counts: dict[str, sp.csr_matrix] = {}
        self._suppressed: dict[str, sp.csr_matrix] = {}
        for level in table.levels:
            names = pl.Series("geoid", geoids[level], dtype=pl.String)
            shape = (len(names), table.n_cells)
            matrix = matrices[level].astype(dtype)  # a copy: the caller's matrix stays its own
            if matrix.shape != shape:
                raise ValueError(
                    f"table {table.name} at {level}: counts of shape {matrix.shape}, expected "
                    f"{shape} ({len(names)} geounits × {table.n_cells} cells)"
                )
            if is_float and not np.isfinite(matrix.data).all():
                raise ValueError(f"table {table.name} at {level}: a count is NaN or infinite")
            mask = sp.csr_matrix(suppressed.get(level, sp.csr_matrix(shape, dtype=bool)))
            if mask.shape != shape:
                raise ValueError(
                    f"table {table.name} at {level}: suppressed cells of shape {mask.shape}, "
                    f"expected {shape}"
                )
            mask = mask.astype(bool)
            mask.eliminate_zeros()
            if mask.nnz:  # a suppressed cell publishes no count: 0 in the matrix
                matrix = matrix - matrix.multiply(mask).astype(dtype)
                matrix = sp.csr_matrix(matrix, dtype=dtype)
            self._geoids[level] = names
            self._counts[level] = _frozen(matrix)
            self._suppressed[level] = _frozen(mask)

    @classmethod
    def from_counts(
        cls, counts: TableCounts, suppressed: Mapping[str, _MatrixLike] | None = None
    ) -> PublishedTable:
        """A tabulation's (or a mechanism's) :class:`TableCounts` as published: integer counts
        (int64, as every mechanism publishes them), optionally with suppressed cells."""
        return cls(
            counts.table,
            {level: counts.geoids[level] for level in counts.counts},
            {level: m.astype(np.int64) for level, (_, m) in counts.counts.items()},
            suppressed,
        )

    def with_counts(
        self,
        counts: Mapping[str, _MatrixLike],
        suppressed: Mapping[str, _MatrixLike] | None = None,
    ) -> PublishedTable:
        """The same table over the same geounits with other counts (and suppressed cells: none
        unless given)."""
        return PublishedTable(self.table, self._geoids, counts, suppressed)

    # -----------------------------------------------------------------------------------------
    # What it holds
    # -----------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def levels(self) -> tuple[str, ...]:
        """The levels it is published at, nation first."""
        return tuple(self._counts)

    @property
    def cell_labels(self) -> list[str]:
        return self.table.cell_labels

    @property
    def dtype(self) -> np.dtype[Any]:
        """int64 or float64 (every level alike)."""
        return next(iter(self._counts.values())).dtype

    def geoids(self, level: str) -> pl.Series:
        """The geoid strings of the rows at ``level`` (every geounit of the level)."""
        return self._geoids[self._level(level)]

    def matrix(self, level: str) -> sp.csr_matrix:
        """Counts at ``level``: a read-only sparse ``geounits × cells`` matrix, no explicit
        zeros; a suppressed cell holds 0 (see :meth:`suppressed`)."""
        return self._counts[self._level(level)]

    def suppressed(self, level: str) -> sp.csr_matrix:
        """The suppressed cells at ``level``: a read-only sparse boolean ``geounits × cells``
        matrix (no stored entries when nothing is suppressed)."""
        return self._suppressed[self._level(level)]

    @property
    def n_suppressed(self) -> int:
        """Suppressed cells over all levels."""
        return sum(m.nnz for m in self._suppressed.values())

    def dense(self, level: str, *, suppressed: float | int = np.nan) -> npt.NDArray[Any]:
        """Counts at ``level`` as a dense ``geounits × cells`` array, suppressed cells set to
        ``suppressed``. Its dtype is the counts' and the fill's together (float64 for the NaN
        default), whether or not a cell is suppressed."""
        fill = np.asarray(suppressed)
        out = self.matrix(level).toarray().astype(np.result_type(self.dtype, fill.dtype))
        mask = self.suppressed(level)
        if mask.nnz:
            out[mask.nonzero()] = fill
        return out

    def frame(self, level: str | None = None, *, labels: bool = True) -> pl.DataFrame:
        """Long form: one row per non-zero or suppressed cell (level, geoid, cell, label, count;
        count null when suppressed), levels nation first, then geounits and cells in order — the
        rows of the release's file. Only ``level`` if given; without the ``label`` column (the
        cell's label) when ``labels`` is false."""
        levels = self.levels if level is None else (self._level(level),)
        schema = {**LONG_SCHEMA, "count": pl.Float64 if self.dtype.kind == "f" else pl.Int64}
        frames = [self._level_frame(lv, schema) for lv in levels]
        frame = pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema=schema)
        if not labels:
            return frame
        names = pl.Series("label", self.cell_labels, dtype=pl.String)
        return frame.with_columns(label=names.gather(frame["cell"])).select(
            "level", "geoid", "cell", "label", "count"
        )

    def _level_frame(self, level: str, schema: dict[str, Any]) -> pl.DataFrame:
        counts, mask = self._counts[level], self._suppressed[level]
        n_cells = self.table.n_cells
        rows = np.repeat(np.arange(counts.shape[0], dtype=np.int64), np.diff(counts.indptr))
        flat = rows * n_cells + counts.indices
        values = counts.data
        hidden = np.zeros(len(flat), dtype=bool)
        if mask.nnz:
            mask_rows = np.repeat(np.arange(mask.shape[0], dtype=np.int64), np.diff(mask.indptr))
            flat = np.concatenate([flat, mask_rows * n_cells + mask.indices])
            values = np.concatenate([values, np.zeros(mask.nnz, dtype=values.dtype)])
            hidden = np.concatenate([hidden, np.ones(mask.nnz, dtype=bool)])
            order = np.argsort(flat, kind="stable")
            flat, values, hidden = flat[order], values[order], hidden[order]
        count = pl.Series("count", values, dtype=schema["count"])
        if mask.nnz:
            count = count.scatter(np.flatnonzero(hidden), None)
        return (
            pl.DataFrame({"cell": pl.Series(flat % n_cells, dtype=pl.Int32), "count": count})
            .with_columns(
                level=pl.lit(level, dtype=pl.String),
                geoid=self._geoids[level].gather(flat // n_cells),
            )
            .select(list(LONG_SCHEMA))
        )

    def _level(self, level: str) -> str:
        if level not in self._counts:
            raise KeyError(
                f"table {self.name} is not published at {level!r}; it is at "
                f"{', '.join(self.levels)}"
            )
        return level

    # -----------------------------------------------------------------------------------------
    # Comparison and display
    # -----------------------------------------------------------------------------------------

    def equals(self, other: object) -> bool:
        """Same table, geounits, count type, counts and suppressed cells at every level."""
        if not isinstance(other, PublishedTable):
            return False
        if self.name != other.name or self.levels != other.levels or self.dtype != other.dtype:
            return False
        return all(
            self._geoids[lv].equals(other._geoids[lv])
            and _same(self._counts[lv], other._counts[lv])
            and _same(self._suppressed[lv], other._suppressed[lv])
            for lv in self.levels
        )

    def __eq__(self, other: object) -> bool:
        return self.equals(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        nonzero = sum(m.nnz for m in self._counts.values())
        hidden = f", {self.n_suppressed:,} suppressed" if self.n_suppressed else ""
        return (
            f"<PublishedTable {self.name}: {len(self.levels)} level"
            f"{'s' if len(self.levels) != 1 else ''} ({self.levels[0]}..{self.levels[-1]}), "
            f"{self.table.n_cells} cells, {self.dtype}, {nonzero:,} non-zero{hidden}>"
        )


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    """Equal canonical sparse matrices (same shape, pattern and values)."""
    return (
        a.shape == b.shape
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and np.array_equal(a.data, b.data)
    )
