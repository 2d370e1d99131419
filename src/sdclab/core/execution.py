"""Executors for work that is independent per geounit (tracts, blocks, parents).

``run_tasks`` applies a picklable function to small payloads and returns the results in payload
order, whatever the executor, so results never depend on where or how many workers ran them:

* ``local`` (default): a process pool of ``workers`` spawned processes (safe beside the thread
  pools of polars and HiGHS); with one worker it runs in-process. The workers start without
  running the caller's main module, so a plain script or a notebook needs no
  ``if __name__ == "__main__"`` guard (see :class:`WorkerContext`);
* ``dask://HOST:PORT``: an existing Dask scheduler;
* ``dask-local[:N]``: a Dask LocalCluster of N worker processes started for the run.

A task that raises is run once more; if it fails again the run stops with :class:`TaskFailed`
naming the task (its geounit) once the other tasks have finished. A progress bar is shown on a
terminal and nothing in a pipe.
"""

from __future__ import annotations

import json
import multiprocessing.context
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sdclab.core.errors import InputError
from sdclab.core.fileio import atomic_file, write_json

T = TypeVar("T")
R = TypeVar("R")

ATTEMPTS = 2
"""A failing task is run at most this many times."""


def default_workers() -> int:
    """All the cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def max_workers() -> int:
    """Most worker processes a run may start on this machine: its cores, and at least 2 (a
    parallel run is possible anywhere). The tasks are CPU-bound, so further processes only add
    memory, each a Python interpreter with sdclab loaded (``dask-local:999999999`` grew to 5.6 GB
    in 45 s)."""
    return max(2, default_workers())


def _check_workers(count: int | None, what: str) -> None:
    """Refuse more worker processes than :func:`max_workers`."""
    if count is not None and count > max_workers():
        raise InputError(
            f"{what}: {count:,} worker processes, more than the {max_workers()} this machine "
            "can run at once (its cores); give at most that many"
        )


@dataclass(frozen=True)
class Executor:
    """Where per-geounit tasks run: a local process pool or a Dask cluster."""

    kind: Literal["local", "dask"] = "local"
    workers: int | None = None
    """Local: processes (default all cores); dask-local: worker processes of the LocalCluster."""
    address: str | None = None
    """Dask: the scheduler's address (None: start a LocalCluster)."""

    @classmethod
    def parse(cls, text: str | None, workers: int | None = None) -> Executor:
        """``local``, ``dask://HOST:PORT`` or ``dask-local[:N]`` (None means local); the
        processes it starts on this machine are at most :func:`max_workers`."""
        if text is None or text.strip() in ("", "local"):
            _check_workers(workers, "workers")
            return cls("local", workers)
        text = text.strip()
        if text.startswith("dask://"):
            target = text.removeprefix("dask://")
            host, _, port = target.rpartition(":")
            if not host or not (port.isascii() and port.isdigit()):
                raise InputError(f"executor {text!r}: expected dask://HOST:PORT")
            return cls("dask", workers, f"tcp://{target}")
        if text == "dask-local" or text.startswith("dask-local:"):
            count = text.removeprefix("dask-local").removeprefix(":")
            plain = count.isascii() and count.isdigit() and len(count) <= 9  # int() is safe
            if count and not (plain and int(count) >= 1):
                raise InputError(f"executor {text!r}: expected dask-local or dask-local:N, N ≥ 1")
            processes = int(count) if count else workers
            _check_workers(processes, f"executor {text!r}")
            return cls("dask", processes, None)
        raise InputError(f"executor {text!r}: expected local, dask://HOST:PORT or dask-local[:N]")


def as_executor(value: Executor | int | None) -> Executor:
    """An executor from what callers pass: an Executor, a number of local workers, or None."""
    if isinstance(value, Executor):
        return value
    return Executor("local", None if value is None else max(1, value))


class TaskFailed(RuntimeError):
    """A task failed on every attempt; the message names it."""

    def __init__(self, label: str, name: str, error: BaseException) -> None:
        super().__init__(
            f"{label}: task {name} failed {ATTEMPTS} times: {type(error).__name__}: {error}"
        )
        self.name = name
        self.error = error


def _progress(label: str, total: int) -> Progress | None:
    if not sys.stderr.isatty() or total == 0:
        return None
    progress = Progress(  # elapsed time ticks even while one long task (a root solve) runs
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=True,
    )
    progress.add_task(label, total=total)
    return progress


@dataclass(frozen=True)
class Checkpoint:
    """Where finished results of one run_tasks call are kept, and what run they belong to.

    Each finished result is written at once (``task-<i>.npz``, numpy arrays and scalars only:
    nothing is unpickled on reading); a re-run with the same checkpoint loads them and runs only
    the rest. ``key`` identifies the run (a digest of everything its results depend on, which
    must reveal none of it: it is written in ``checkpoint.json``): a checkpoint written for
    another run is refused.
    """

    directory: Path
    key: str
    result_type: type


def run_tasks(
    fn: Callable[[T], R],
    payloads: Sequence[T],
    workers: Executor | int | None = None,
    label: str = "working",
    sizes: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    checkpoint: Checkpoint | None = None,
) -> list[R]:
    """``[fn(p) for p in payloads]`` on the executor (``workers``: an :class:`Executor`, a number
    of local processes, or None for all local cores), results in payload order.

    With ``sizes`` (expected cost of each payload) the largest are started first, so that one big
    task does not finish alone at the end. ``names`` (e.g. geocodes) name failed tasks. With a
    ``checkpoint`` finished results survive a failure or an interruption.
    """
    executor = as_executor(workers)
    if not payloads:
        return []
    names = list(names) if names is not None else [f"#{i}" for i in range(len(payloads))]
    results: dict[int, R] = {}
    if checkpoint is not None:
        results = _resume(checkpoint, names)
    order = [i for i in range(len(payloads)) if i not in results]
    if sizes is not None:
        order.sort(key=lambda i: -sizes[i])
    failures: list[tuple[int, BaseException]] = []
    progress = _progress(label, len(order))
    if progress is not None:
        progress.start()
    try:
        run = _run_dask if executor.kind == "dask" else _run_local
        for index, outcome in run(fn, payloads, order, executor) if order else ():
            if isinstance(outcome, _Failure):
                failures.append((index, outcome.error))
            else:
                results[index] = outcome
                if checkpoint is not None:
                    save_result(outcome, checkpoint.directory / f"task-{index:07d}.npz")
            if progress is not None:
                progress.advance(progress.task_ids[0])
    finally:
        if progress is not None:
            progress.stop()
    if failures:
        index, error = min(failures, key=lambda f: f[0])
        raise TaskFailed(label, names[index], error) from error
    return [results[i] for i in range(len(payloads))]


def _resume(checkpoint: Checkpoint, names: list[str]) -> dict[int, Any]:
    """The results a checkpoint already holds (after checking it belongs to this run); a file
    there that is not of this run, or damaged, is an :class:`InputError` naming it."""
    directory = checkpoint.directory
    if directory.exists() and not directory.is_dir():
        raise InputError(f"checkpoint {directory} exists and is not a directory; choose another")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"checkpoint {directory} cannot be made ({exc.strerror or exc})") from None
    manifest = directory / "checkpoint.json"
    identity = {"key": checkpoint.key, "names": names}
    tasks = sorted(directory.glob("task-*"))
    if manifest.exists():
        if _read_manifest(manifest, set(identity)) != identity:
            raise InputError(
                f"checkpoint {directory} belongs to another run ({manifest.name} records other "
                "inputs, seed or tasks); use an empty directory"
            )
    elif tasks:
        raise _not_of_this_run(tasks[0], f"a task result without {manifest.name}")
    else:
        write_json(identity, manifest)
    indices = [_task_index(file, len(names)) for file in tasks]  # every name before any file
    return {i: load_result(checkpoint.result_type, f) for i, f in zip(indices, tasks, strict=True)}


def _not_of_this_run(file: Path, problem: str) -> InputError:
    """The error for a file of a checkpoint directory that this run cannot use."""
    return InputError(
        f"{file}: {problem}; it is damaged or not a checkpoint of this run: remove it or use an "
        "empty directory"
    )


def _read_manifest(file: Path, keys: set[str]) -> dict[str, Any]:
    """checkpoint.json: a JSON object with exactly the ``keys`` of a run's identity."""
    if not file.is_file():
        raise _not_of_this_run(file, "not a file")
    try:
        recorded = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 and bad JSON are ValueErrors
        raise _not_of_this_run(file, f"not valid JSON ({type(exc).__name__})") from None
    if not isinstance(recorded, dict) or set(recorded) != keys:
        expected = ", ".join(sorted(keys))
        raise _not_of_this_run(file, f"not a checkpoint manifest (a JSON object: {expected})")
    return recorded


def _task_index(file: Path, count: int) -> int:
    """The task number in a result's file name ``task-NNNNNNN.npz``, one of the run's tasks."""
    number = file.name.removeprefix("task-").removesuffix(".npz")
    canonical = number.isascii() and number.isdigit() and len(number) >= 7
    if not canonical or file.name != f"task-{int(number):07d}.npz" or not file.is_file():
        raise _not_of_this_run(
            file, "not a task result (expected a file task-NNNNNNN.npz, N a digit)"
        )
    if int(number) >= count:
        raise _not_of_this_run(file, f"task {int(number)} beyond the run's {count} tasks")
    return int(number)


def save_result(result: Any, path: Path) -> None:
    """A dataclass of arrays, scalars, strings, None and dicts of arrays as one .npz, atomically."""
    arrays: dict[str, np.ndarray] = {}
    for f in fields(result):
        value = getattr(result, f.name)
        if value is None:
            arrays[f"none::{f.name}"] = np.zeros(0)
        elif isinstance(value, dict):
            arrays[f"dict::{f.name}"] = np.zeros(0)
            arrays.update({f"item::{f.name}::{k}": np.asarray(v) for k, v in value.items()})
        else:
            arrays[f"value::{f.name}"] = np.asarray(value)
    with atomic_file(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]


def load_result(result_type: type, path: Path) -> Any:
    """The dataclass :func:`save_result` wrote (no pickle: object arrays are refused); a file
    that is not one (damaged, other fields, a scalar of another type) is an :class:`InputError`."""
    arrays = _read_npz(path)
    names = [f.name for f in fields(result_type)]
    scalars = _scalar_kinds(result_type)
    values: dict[str, Any] = {}
    items: dict[str, dict[str, Any]] = {}
    for key, array in arrays.items():  # one entry per field (or dict item), not per record
        kind, _, rest = key.partition("::")
        name, _, item = rest.partition("::") if kind == "item" else (rest, "", "")
        if kind not in ("none", "dict", "item", "value") or name not in names:
            raise _not_of_this_run(path, f"holds {key!r}, not a field of {result_type.__name__}")
        if kind == "item":
            items.setdefault(name, {})[item] = array
            continue
        if name in values:
            raise _not_of_this_run(path, f"holds field {name} twice")
        expected = scalars.get(name)
        if expected and (kind != "value" or array.ndim or array.dtype.kind not in expected[1]):
            raise _not_of_this_run(path, f"field {name} is not one {expected[0]}")
        if kind == "none":
            values[name] = None
        elif kind == "dict":
            values[name] = {}
        else:
            values[name] = array.item() if array.ndim == 0 else array
    for name, entries in items.items():
        if not isinstance(values.get(name), dict):
            raise _not_of_this_run(path, f"holds items of {name}, which is not a dict field")
        values[name].update(entries)
    missing = [n for n in names if n not in values]
    if missing:
        raise _not_of_this_run(path, f"lacks field(s) {', '.join(missing)}")
    return result_type(**values)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, read without pickle."""
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # zipfile, numpy and the OS raise many types here
        raise _not_of_this_run(path, f"not a readable .npz file ({type(exc).__name__})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):  # a bare .npy array
        raise _not_of_this_run(path, "not an .npz archive")
    with data:
        try:
            return {key: data[key] for key in data.files}
        except Exception as exc:  # object arrays (ValueError), damaged members
            reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            raise _not_of_this_run(path, f"an array cannot be read ({reason})") from None


_SCALAR_KINDS = {bool: "b", int: "iu", float: "iuf", str: "U"}
"""numpy dtype kinds that a field annotated with one of these types may be saved as."""


def _scalar_kinds(result_type: type) -> dict[str, tuple[str, str]]:
    """(type name, dtype kinds) of the fields annotated as bool, int, float or str (none if the
    annotations cannot be resolved)."""
    import typing

    try:
        hints = typing.get_type_hints(result_type)
        return {
            name: (hint.__name__, _SCALAR_KINDS[hint])
            for name, hint in hints.items()
            if hint in _SCALAR_KINDS
        }
    except Exception:  # an annotation that does not resolve (or hash): no type check
        return {}


@dataclass(frozen=True)
class _Failure:
    error: BaseException


def _attempt(fn: Callable[[T], R], payload: T) -> R | _Failure:
    """``fn(payload)``, run again once if it raises; the last error if both attempts fail."""
    error: BaseException | None = None
    for _ in range(ATTEMPTS):
        try:
            return fn(payload)
        except Exception as exc:  # a task's failure is reported, not fatal to the others
            error = exc
    assert error is not None
    return _Failure(error)


def _run_local(
    fn: Callable[[T], R], payloads: Sequence[T], order: list[int], executor: Executor
) -> Iterator[tuple[int, R | _Failure]]:
    workers = executor.workers or default_workers()
    if workers == 1 or len(payloads) == 1:
        for i in order:
            yield i, _attempt(fn, payloads[i])
        return
    shared = _shared_pool(workers)
    with nullcontext(shared) if shared is not None else _new_pool(workers) as pool:
        pending: dict[Future[Any], tuple[int, int]] = {}
        for i in order:
            pending[pool.submit(fn, payloads[i])] = (i, 1)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i, attempt = pending.pop(future)
                error = future.exception()
                if error is None:
                    yield i, future.result()
                elif attempt < ATTEMPTS:
                    pending[pool.submit(fn, payloads[i])] = (i, attempt + 1)
                else:
                    yield i, _Failure(error)


class _Pools(threading.local):
    """The pools :func:`worker_pool` keeps open in this thread, by number of workers (None until
    first used). Per thread, so that one thread's block never shuts down a pool another uses."""

    def __init__(self) -> None:
        self.by_workers: dict[int, ProcessPoolExecutor | None] = {}


_SHARED = _Pools()


def _shared_pool(workers: int) -> ProcessPoolExecutor | None:
    """The open pool of ``workers`` processes of an enclosing :func:`worker_pool`, started on
    first use (and started again if a worker died and broke it); None outside one."""
    pools = _SHARED.by_workers
    if workers not in pools:
        return None
    pool = pools[workers]
    if pool is None or getattr(pool, "_broken", False):
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        pool = pools[workers] = _new_pool(workers)
    return pool


def _new_pool(workers: int) -> ProcessPoolExecutor:
    threads = max(1, default_workers() // workers)
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=WorkerContext(),
        initializer=_start_worker,
        initargs=(threads,),
    )


@contextmanager
def worker_pool(workers: Executor | int | None) -> Iterator[None]:
    """One local process pool for every :func:`run_tasks` of this thread inside the block,
    started when a call first needs it, instead of a new pool (and a new start-up of every
    worker, which imports sdclab) per call. Dask executors and a single worker need no pool; a
    block inside another of the same size uses the outer one's pool."""
    executor = as_executor(workers)
    count = executor.workers or default_workers()
    pools = _SHARED.by_workers
    if executor.kind == "dask" or count == 1 or count in pools:
        yield
        return
    pools[count] = None
    try:
        yield
    finally:
        pool = pools.pop(count)
        if pool is not None:
            pool.shutdown(cancel_futures=True)


class WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that starts from sdclab alone, never from the caller's main module.

    A spawned child normally runs the parent's main script again (as ``__mp_main__``) before its
    task, so a script without an ``if __name__ == "__main__"`` guard would start the whole run
    again in every worker, which refuses to start processes of its own and breaks the pool.
    The tasks sdclab sends are functions of sdclab, so a child needs nothing of the main
    module: while the child's start-up data is prepared, the main module is withheld.
    """

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 (the name multiprocessing calls)
        with _main_module_withheld():
            return multiprocessing.context.SpawnProcess._Popen(process_obj)


class WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn start method with :class:`WorkerProcess` as its process."""

    Process = WorkerProcess


_MAIN_LOCK = threading.Lock()


@contextmanager
def _main_module_withheld() -> Iterator[None]:
    """``sys.modules["__main__"]`` replaced by an empty module for the duration: a spawned
    child's start-up data then names no main module to run."""
    with _MAIN_LOCK:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


def _start_worker(threads: int) -> None:
    """Set up a worker process: its share of the cores (:func:`_limit_blas`), and Ctrl-C ends it.

    Ctrl-C reaches every process of the command. A worker that raised KeyboardInterrupt would
    report it as its task's failure and take the next task (a pool shutting down still runs every
    task already queued); one that ends at once breaks the pool instead, which ends the other
    workers and drops the queued tasks, so the command stops within a moment. A HiGHS solve
    under way stops first (:func:`sdclab.core.optimize.highs.run`).
    """
    _limit_blas(threads)
    signal.signal(signal.SIGINT, _end_worker)


def _end_worker(signum: int, _: Any) -> None:
    os._exit(128 + signum)  # the parent reports the interruption; nothing of the worker's to save


_BLAS_LIMIT: Any = None


def _limit_blas(threads: int) -> None:
    """Give a worker process's BLAS (OpenBLAS, MKL, OpenMP) only its share of the cores.

    Each BLAS otherwise starts a thread per core in every worker: on 2 cores, 2 workers run 4
    spinning threads, and the small dense factorisations of the L2 step ran ≈ 10× slower.
    threadpoolctl limits only the libraries already loaded, so SciPy's (a BLAS of its own) is
    loaded first; a worker no longer imports the caller's main module, which used to load it.
    (Dask's nanny sets the same limit in its workers' environment.)"""
    global _BLAS_LIMIT
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)  # for a BLAS loaded later
    import scipy.linalg  # noqa: F401 (loads SciPy's own BLAS, which the limit must reach)
    from threadpoolctl import threadpool_limits

    _BLAS_LIMIT = threadpool_limits(limits=threads)


@contextmanager
def dask_client(executor: Executor) -> Iterator[Any]:
    """A Dask client on the executor's scheduler, or on a LocalCluster started (and stopped)
    for the run."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - depends on the installation
        raise InputError(
            "the dask executors need `distributed` (pip install 'sdclab[dask]')"
        ) from None
    if executor.address is not None:
        try:
            client = Client(executor.address, timeout=10)
        except OSError as exc:
            raise InputError(f"cannot reach the Dask scheduler {executor.address}: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    workers = executor.workers or default_workers()
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",  # any free port, on the loopback alone (":0"
            # listened on every interface, without authentication)
            silence_logs=40,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _run_dask(
    fn: Callable[[T], R], payloads: Sequence[T], order: list[int], executor: Executor
) -> Iterator[tuple[int, R | _Failure]]:
    from distributed import as_completed

    with dask_client(executor) as client:
        futures = {
            client.submit(fn, payloads[i], pure=False, retries=ATTEMPTS - 1, priority=-rank): i
            for rank, i in enumerate(order)
        }
        for future in as_completed(futures):
            i = futures[future]
            if future.status == "error":
                yield i, _Failure(future.exception())
            else:
                yield i, future.result()
