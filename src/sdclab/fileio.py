"""Atomic outputs: a reader never sees a half-written file or directory.

Everything is written to a temporary sibling first and renamed into place only when complete; on
any error the temporary is removed and the previous output (if any) is left untouched.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from sdclab.errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_replaceable(target: Path, marker: str, protect: tuple[Path, ...] = ()) -> None:
    """Refuse to overwrite anything but an earlier output of the same kind.

    ``target`` may be absent, an empty directory, or a directory holding ``marker`` (the file that
    identifies this kind of output, e.g. ``release.json``); it must not be, contain or lie inside
    one of the ``protect`` paths (the command's inputs).
    """
    target = Path(target).resolve()
    for path in protect:
        path = Path(path).resolve()
        if target == path or path.is_relative_to(target) or target.is_relative_to(path):
            raise InputError(f"--out {target} would overwrite the input {path}; choose another")
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not (target / marker).exists():
        raise InputError(
            f"--out {target} exists and is not an earlier sdclab output (no {marker}); "
            "choose another directory or remove it"
        )


@contextlib.contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``target`` when the block succeeds.

    On any failure — inside the block or while swapping directories — the temporary is removed
    and the previous ``target`` is restored, so readers see the old output or the new, complete.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    moved_old = False
    try:
        yield tmp
        if target.exists():
            os.replace(target, old)
            moved_old = True
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if moved_old and not target.exists():
            os.replace(old, target)
        raise
    if moved_old:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """Yield a temporary path in the same directory that is renamed onto ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def json_safe(data: Any) -> Any:
    """NaN and infinities become null: JSON has no such numbers."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(v) for v in data]
    return data


def write_json(data: Any, target: Path) -> None:
    """Write ``data`` as indented, strictly valid JSON (NaN → null), atomically."""
    text = json.dumps(json_safe(data), indent=2, allow_nan=False)
    with atomic_file(target) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")


def write_parquet(frame: pl.DataFrame, target: Path) -> None:
    """Write a polars frame as Parquet (zstd), atomically."""
    with atomic_file(target) as tmp:
        frame.write_parquet(tmp, compression="zstd")


def read_parquet_checked(file: Path) -> pl.DataFrame:
    """Read a Parquet file that may be damaged or hostile: decoded and checked by pyarrow.

    polars' own reader trusts the page headers of a file: one flipped byte can make it allocate
    exabytes and abort the whole process (polars 2.1), or panic. pyarrow checks page headers and
    raises, and ``validate(full=True)`` rejects text that is not UTF-8 (which ``pl.from_arrow``
    would take unchecked). Use it for files a user hands over, not for our own intermediate files.

    Raises whatever pyarrow or polars raise for a bad file (OSError, ValueError, polars errors…):
    callers turn that into an :class:`InputError` naming the file.
    """
    table = pq.read_table(file)
    table.validate(full=True)
    frame = pl.from_arrow(table)
    if not isinstance(frame, pl.DataFrame):  # a table always converts to a frame
        raise TypeError(f"{file}: not a table")
    return frame
