"""Atomic outputs: a reader never sees a half-written file or directory, and nothing but an
earlier output of the same kind is ever replaced.

Everything is written to a temporary sibling first and put into place only when complete: a new
file or directory by one rename, an existing directory by an atomic exchange (Linux
``renameat2(RENAME_EXCHANGE)``; elsewhere two renames, see :func:`_replace`). On any error the
temporary is removed and the previous output is left untouched; what a killed writer left behind
is removed by the next writer of the same path.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import glob
import json
import math
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.exceptions import PanicException, PolarsError

from sdclab.core.errors import DISK_FULL, InputError

OUTPUT_MARKER = ".sdclab-output.json"
"""The file inside every output directory that says which kind of output it is and what it holds."""
OUTPUT_KEY = "sdclab_output"
"""The key of a JSON output file (``audit --out``) that names its kind."""

RENAME_EXCHANGE = 2
"""``renameat2`` flag: swap two paths atomically (Linux ≥ 3.15; most local file systems)."""
_AT_FDCWD = -100


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@dataclass(frozen=True)
class Modes:
    """The most permission bits a file and a directory written from confidential input may
    have: never more than its source grants. The owner keeps reading and writing (and searching
    directories), which grants no one else anything."""

    file: int
    directory: int

    @classmethod
    def of(cls, directory: Path, files: Iterable[Path]) -> Modes:
        """Those of a source ``directory`` holding ``files``: the directory's bits, and for a
        file the bits every one of ``files`` grants to a class (group, others) that may enter
        the directory (one that may not cannot read them)."""
        folder = os.stat(directory).st_mode & 0o777
        file = 0o666
        for path in files:
            file &= os.stat(path).st_mode
        entering = sum(bits for bits in (0o700, 0o070, 0o007) if folder & bits & 0o111)
        return cls(file=(file & entering) | 0o600, directory=folder | 0o700)


def restrict_tree(root: Path, modes: Modes) -> None:
    """Take from ``root`` and everything below it each permission bit ``modes`` do not allow
    (symbolic links are neither changed nor followed)."""
    for folder, _, files in os.walk(root):
        _restrict(Path(folder), modes.directory)
        for name in files:
            _restrict(Path(folder) / name, modes.file)


def _restrict(path: Path, limit: int) -> None:
    info = path.lstat()
    bits = stat.S_IMODE(info.st_mode)
    if not stat.S_ISLNK(info.st_mode) and bits & ~limit:
        os.chmod(path, bits & limit)


def _resolved(path: Path, option: str) -> Path:
    """``path`` made absolute with links followed; a link loop or a bad name is an input error."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError, ValueError) as exc:  # 3.11 raises RuntimeError on a loop
        raise InputError(f"{option} {path}: cannot be resolved ({exc})") from None


def check_apart(target: Path, protect: tuple[Path, ...], option: str = "--out") -> Path:
    """``target`` resolved; it must not be, contain or lie inside one of the ``protect`` paths."""
    resolved = _resolved(target, option)
    for path in protect:
        other = _resolved(path, "input")
        if resolved == other or other.is_relative_to(resolved) or resolved.is_relative_to(other):
            raise InputError(
                f"{option} {target} overlaps {path}, which this run reads or writes; "
                "choose another path"
            )
    return resolved


def check_checkpoint_directory(
    directory: Path, protect: tuple[Path, ...] = (), option: str = "--checkpoint"
) -> None:
    """A checkpoint directory lies apart from the inputs and the output, and is absent, empty,
    or holds only checkpoints (subdirectories each with its ``checkpoint.json``); ``option``
    names it in messages."""
    check_apart(directory, protect, option)
    directory = Path(directory)
    if not os.path.lexists(directory):
        return
    if directory.is_symlink() or not directory.is_dir():
        raise InputError(f"{option} {directory} exists and is not a directory")
    for entry in sorted(directory.iterdir()):
        if not (entry.is_dir() and ((entry / "checkpoint.json").is_file() or _empty(entry))):
            raise InputError(
                f"{option} {directory} holds {entry.name}, which is not a checkpoint; "
                "use an empty directory or an earlier run's checkpoint directory"
            )


def _empty(directory: Path) -> bool:
    return not any(directory.iterdir())


def _marker(target: Path) -> dict[str, Any] | None:
    """The marker of the output directory ``target`` (None: none readable, or without a kind)."""
    try:
        data = json.loads((Path(target) / OUTPUT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("kind"), str) else None


def check_replaceable(
    target: Path, kind: str, protect: tuple[Path, ...] = (), option: str = "--out"
) -> None:
    """Refuse to replace anything but a complete earlier output of the same ``kind``.

    ``target`` may be absent, an empty directory, or a directory whose marker names ``kind`` and
    which holds exactly the files the marker lists (an experiment's directory: only its own
    entries); it must not be, contain or lie inside one of the ``protect`` paths (the inputs).
    """
    check_apart(target, protect, option)
    target = Path(target)
    if target.is_symlink():
        raise InputError(f"{option} {target} is a symbolic link; give the directory itself")
    if not target.exists():
        return
    if not target.is_dir():
        raise InputError(f"{option} {target} exists and is not a directory; choose another path")
    entries = {p.name for p in target.iterdir()}
    if not entries:
        return
    marker = _marker(target)
    if marker is None:
        raise InputError(
            f"{option} {target} exists and is not an sdclab output (no {OUTPUT_MARKER}; outputs "
            "of sdclab before output markers have none either); choose another directory or "
            "remove it"
        )
    if marker["kind"] != kind:
        raise InputError(
            f"{option} {target} holds a {marker['kind']} output, not a {kind}; choose another "
            "directory"
        )
    listed = marker.get("files")
    if not isinstance(listed, list):  # an experiment: its own top-level entries only
        allowed = set(marker.get("entries") or []) | {OUTPUT_MARKER}
        foreign = sorted(e for e in entries if e not in allowed and not _leftover_name(e))
    else:
        present = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
        missing = sorted(set(listed) - present)
        if missing:
            raise InputError(
                f"{option} {target} holds an incomplete {kind} output ({missing[0]} is missing); "
                "remove it or choose another directory"
            )
        foreign = sorted(present - set(listed) - {OUTPUT_MARKER})
    if foreign:
        raise InputError(
            f"{option} {target} holds {foreign[0]}, which sdclab did not write there; "
            "choose another directory or remove it"
        )


def write_marker(
    directory: Path, kind: str, entries: list[str] | None = None, modes: Modes | None = None
) -> None:
    """Mark ``directory`` as an output of ``kind``: with the files it holds now, or (an output
    that grows, like an experiment's) the top-level ``entries`` it may hold."""
    directory = Path(directory)
    data: dict[str, Any] = {"kind": kind}
    if entries is None:
        data["files"] = sorted(
            p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()
        )
    else:
        data["entries"] = sorted(entries)
    write_json(data, directory / OUTPUT_MARKER, modes)


@contextlib.contextmanager
def output_directory(
    target: Path, kind: str, protect: tuple[Path, ...] = (), option: str = "--out"
) -> Iterator[Path]:
    """A temporary directory that replaces ``target`` (checked by :func:`check_replaceable`)
    atomically when the block succeeds, marked as an output of ``kind``."""
    check_replaceable(target, kind, protect, option)
    with atomic_directory(Path(target)) as tmp:
        yield tmp
        write_marker(tmp, kind)
        check_replaceable(target, kind, protect, option)  # unchanged while the work ran


def _leftover_name(name: str) -> bool:
    return name.startswith(".") and (".tmp-" in name or ".old-" in name)


def _lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive lock on ``path`` (released when it is closed or
    the process dies); None where the file system takes no such lock (some network file
    systems). Raises BlockingIOError if another live process holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def _writer_alive(leftover: Path) -> bool:
    """Whether the process named in a temporary's name (``.NAME.tmp-PID-…``) still runs here."""
    pid = leftover.name.rpartition(".tmp-")[2].rpartition(".old-")[2].partition("-")[0]
    if not (pid.isascii() and pid.isdigit()):
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # a process we may not signal is alive; an odd number: leave it
    return True


def clean_leftovers(target: Path) -> None:
    """Remove what killed writers of ``target`` left beside it: temporaries of processes that
    no longer run and whose lock is free (a live writer names itself in its temporary and locks
    it, so neither a concurrent writer on this machine nor one elsewhere removes it). An old
    output parked by the two-rename fallback is put back if ``target`` is missing."""
    target = Path(target)
    if not target.parent.is_dir():
        return
    for prefix in (f".{target.name}.old-", f".{target.name}.tmp-"):
        for leftover in sorted(target.parent.glob(f"{glob.escape(prefix)}*")):
            if _writer_alive(leftover):
                continue
            try:
                fd = _lock(leftover)
            except BlockingIOError:
                continue
            try:
                if ".old-" in leftover.name and not os.path.lexists(target):
                    os.rename(leftover, target)
                else:
                    remove_path(leftover)
            except FileNotFoundError:
                pass  # another clean-up was quicker
            finally:
                _unlock(fd)


def _temporary_prefix(target: Path) -> str:
    """The name prefix of a writer's temporary beside ``target``: it names the writer."""
    return f".{target.name}.tmp-{os.getpid()}-"


def _libc_renameat2() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    path, directory = ctypes.c_char_p, ctypes.c_int
    function.argtypes = [directory, path, directory, path, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _libc_renameat2() if sys.platform.startswith("linux") else None


def exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` in one atomic step; False where the platform or the file
    system has no such operation (the caller then falls back to two renames)."""
    if _RENAMEAT2 is None:
        return False
    result = _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    if result == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(error, os.strerror(error), str(b))


def _replace(tmp: Path, target: Path) -> None:
    """Put the complete ``tmp`` in the place of ``target``.

    With an atomic exchange, readers and a kill at any moment see the old output or the new; the
    old one, swapped into ``tmp``, is removed afterwards (or by the next writer, if killed). The
    fallback (no exchange) renames the old output aside first: between the two renames
    ``target`` is briefly absent, and a kill there leaves the old output parked beside it, which
    the next writer puts back."""
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    if exchange(tmp, target):
        remove_path(tmp)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
    fd = _lock(target)  # the lock follows the old output aside: no clean-up takes it meanwhile
    try:
        os.rename(target, old)
        try:
            os.rename(tmp, target)
        except BaseException:
            os.rename(old, target)
            raise
    finally:
        _unlock(fd)
    remove_path(old)


def remove_path(path: Path) -> None:
    """Remove ``path`` if it is there: a directory with its content, else the file or link."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _naming_a_full_disk(target: Path) -> Iterator[None]:
    """A write inside the block that found no room names ``target``, the output the user asked
    for, rather than a temporary or nothing (``disk full writing OUT``, exit 2)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise OSError(exc.errno, DISK_FULL[exc.errno], str(target)) from None


@contextlib.contextmanager
def atomic_directory(target: Path, modes: Modes | None = None) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces ``target`` when the block succeeds.

    On any failure inside the block the temporary is removed and ``target`` is left as it was;
    the replacement itself is atomic (:func:`_replace`). The temporary names its writer and is
    locked while it is written, so a concurrent writer's clean-up of leftovers leaves it alone.
    With ``modes`` (written from confidential input), the temporary is made within them and
    everything in it is brought within them before it takes ``target``'s place. A full disk is
    an OSError naming ``target``.
    """
    target = Path(target)
    with _naming_a_full_disk(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_leftovers(target)
        tmp = Path(tempfile.mkdtemp(prefix=_temporary_prefix(target), dir=target.parent))
        fd = _lock(tmp)
        try:
            os.chmod(tmp, 0o777 & ~_umask() & (modes.directory if modes else 0o777))
            yield tmp
            if modes is not None:
                restrict_tree(tmp, modes)
            _replace(tmp, target)
        except BaseException:
            remove_path(tmp)
            raise
        finally:
            _unlock(fd)


@contextlib.contextmanager
def atomic_file(target: Path, modes: Modes | None = None) -> Iterator[Path]:
    """Yield a temporary path in the same directory that is renamed onto ``target`` on success
    (with ``modes``, made within them before anything is written to it; a full disk is an
    OSError naming ``target``)."""
    target = Path(target)
    with _naming_a_full_disk(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_leftovers(target)
        fd, name = tempfile.mkstemp(prefix=_temporary_prefix(target), dir=target.parent)
        tmp = Path(name)
        try:
            with contextlib.suppress(OSError):  # a file system without locks: the name protects it
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.chmod(tmp, 0o666 & ~_umask() & (modes.file if modes else 0o666))
            yield tmp
            os.replace(tmp, target)
        finally:
            os.close(fd)
            tmp.unlink(missing_ok=True)


def check_output_file(target: Path, kind: str, protect: tuple[Path, ...] = ()) -> None:
    """Refuse to replace anything but an earlier JSON output file of the same ``kind``."""
    check_apart(target, protect)
    target = Path(target)
    if not os.path.lexists(target):
        return
    if target.is_symlink() or not target.is_file():
        raise InputError(f"--out {target} exists and is not a regular file; choose another path")
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        data = None
    found = data.get(OUTPUT_KEY) if isinstance(data, dict) else None
    if found != kind:
        what = f"a {found} output" if isinstance(found, str) else "not an sdclab output"
        raise InputError(
            f"--out {target} exists and is {what}, not a {kind} output; choose another path"
        )


def write_output_file(data: dict[str, Any], target: Path, kind: str) -> None:
    """Write ``data`` as a JSON output file of ``kind`` (checked by :func:`check_output_file`)."""
    check_output_file(target, kind)
    write_json({OUTPUT_KEY: kind, **data}, target)


SETTINGS_FILE_LIMIT = 16 * 2**20
"""Largest file a setting may name (an experiment, a strategy, an iteration or p-table file)."""


def read_settings_file(path: Path, what: str, limit: int = SETTINGS_FILE_LIMIT) -> bytes:
    """The bytes of a file a setting names: a regular file of at most ``limit`` bytes, so that a
    device, a FIFO or a huge file is refused at once rather than read for ever."""
    path = Path(path)
    try:  # opened without blocking (a FIFO would wait for a writer), then checked
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InputError(f"{path}: the {what} is not a regular file")
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: cannot read the {what} (no such file)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise InputError(f"{path}: the {what} is larger than {limit // 2**20} MiB")
    return data


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML document from a file a setting names (see :func:`read_settings_file`)."""
    data = read_settings_file(path, what)
    invalid = f"{path}: the {what} is not valid TOML"
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the {what} is not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{invalid} ({exc})") from None
    except ValueError:  # tomllib converts integers with int(), which refuses > 4300 digits
        raise InputError(f"{invalid} (a number has too many digits)") from None
    except RecursionError:
        raise InputError(f"{invalid} (nested too deeply)") from None


def json_safe(data: Any) -> Any:
    """NaN and infinities become null: JSON has no such numbers."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(v) for v in data]
    return data


def write_json(data: Any, target: Path, modes: Modes | None = None) -> None:
    """Write ``data`` as indented, strictly valid JSON (NaN → null), atomically (within
    ``modes``: :func:`atomic_file`)."""
    text = json.dumps(json_safe(data), indent=2, allow_nan=False)
    with atomic_file(target, modes) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")


def write_parquet(frame: pl.DataFrame, target: Path, modes: Modes | None = None) -> None:
    """Write a polars frame as Parquet (zstd), atomically (within ``modes``). polars reports a
    failed write (a full disk) as a ComputeError naming the OS error; it is raised as that
    OSError."""
    with atomic_file(target, modes) as tmp:
        try:
            frame.write_parquet(tmp, compression="zstd")
        except PolarsError as exc:
            number = re.search(r"\(os error (\d+)\)", str(exc))
            if number is None:
                raise
            code = int(number.group(1))
            raise OSError(code, os.strerror(code), str(tmp)) from None


PLAIN_ARROW_TYPES: tuple[Callable[[pa.DataType], bool], ...] = (
    pa.types.is_null,
    pa.types.is_boolean,
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_decimal32,
    pa.types.is_decimal64,
    pa.types.is_decimal128,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_string_view,
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_binary_view,
    pa.types.is_fixed_size_binary,
    pa.types.is_date,
    pa.types.is_time,
    pa.types.is_duration,
)
"""Arrow types without children that ``pl.from_arrow`` converts (timestamps are checked apart)."""
ARROW_LIST_TYPES: tuple[Callable[[pa.DataType], bool], ...] = (
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
)


def polars_can_take(dtype: pa.DataType) -> bool:
    """Whether ``pl.from_arrow`` converts a column of this Arrow type.

    Others make it raise or panic (a Rust panic also prints its text on stderr): decimal256, list
    views, intervals, unions, a timestamp with a time zone polars does not know, and any nested
    type holding one of them.
    """
    if isinstance(dtype, pa.BaseExtensionType):
        return polars_can_take(dtype.storage_type)
    if pa.types.is_dictionary(dtype):
        return polars_can_take(dtype.value_type)
    if pa.types.is_timestamp(dtype):
        return dtype.tz is None or polars_knows_time_zone(dtype.tz)
    if pa.types.is_map(dtype):
        return polars_can_take(dtype.key_type) and polars_can_take(dtype.item_type)
    if any(is_list(dtype) for is_list in ARROW_LIST_TYPES):
        return polars_can_take(dtype.value_type)
    if pa.types.is_struct(dtype):
        return all(polars_can_take(dtype.field(i).type) for i in range(dtype.num_fields))
    return any(test(dtype) for test in PLAIN_ARROW_TYPES)


@functools.cache
def polars_knows_time_zone(zone: str) -> bool:
    try:
        pl.Series([], dtype=pl.Datetime("us", zone))
    except PolarsError:
        return False
    return True


def read_json_object(file: Path) -> dict[str, Any]:
    """A JSON file the user hands over that must hold one object; anything else (bytes that are
    not UTF-8, bad JSON, huge numbers, deep nesting, another JSON value) is an
    :class:`InputError` naming the file."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{file}: not valid JSON ({exc})") from None
    except ValueError:  # json converts integers with int(), which refuses > 4300 digits
        raise InputError(f"{file}: not valid JSON (a number has too many digits)") from None
    except RecursionError:
        raise InputError(f"{file}: not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise InputError(f"{file}: expected a JSON object")
    return data


def read_input_parquet(file: Path, owner: str = "the release") -> pl.DataFrame:
    """A Parquet file of a directory the user hands over (``owner``: which, for the message),
    read by :func:`read_parquet_checked`; anything wrong is an :class:`InputError`."""
    if not file.is_file():
        raise InputError(f"{file}: missing from {owner}")
    try:
        return read_parquet_checked(file)
    except (Exception, PanicException) as exc:  # pyarrow and polars raise many types here
        raise InputError(f"{file}: not a readable Parquet file ({type(exc).__name__})") from None


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
    for field in table.schema:
        if not polars_can_take(field.type):  # polars would raise or panic (printing its text)
            raise TypeError(f"column {field.name} has type {field.type}, which sdclab cannot read")
    frame = pl.from_arrow(table)
    if not isinstance(frame, pl.DataFrame):  # a table always converts to a frame
        raise TypeError(f"{file}: not a table")
    return frame
