"""Executors for work that is independent per geounit (tracts, blocks, parents).

``run_tasks`` applies a picklable function to small payloads and returns the results in payload
order, whatever the executor, so results never depend on the number of workers. Locally it uses a
process pool (spawned processes: safe beside the thread pools of polars and HiGHS); with one worker
it runs in-process. A progress bar is shown on a terminal and nothing in a pipe.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """All the cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _progress(label: str, total: int) -> Progress | None:
    if not sys.stderr.isatty() or total == 0:
        return None
    progress = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
    )
    progress.add_task(label, total=total)
    return progress


def run_tasks(
    fn: Callable[[T], R],
    payloads: Sequence[T],
    workers: int | None = None,
    label: str = "working",
    sizes: Sequence[float] | None = None,
) -> list[R]:
    """``[fn(p) for p in payloads]``, in parallel on ``workers`` processes (default: all cores).

    With ``sizes`` (expected cost of each payload) the largest are started first, so that one
    big task does not finish alone at the end; results still come back in payload order.
    """
    workers = default_workers() if workers is None else max(1, workers)
    if not payloads:
        return []
    if sizes is not None and workers > 1:
        order = sorted(range(len(payloads)), key=lambda i: -sizes[i])
        done = run_tasks(fn, [payloads[i] for i in order], workers, label)
        back: list[R] = [done[0]] * len(done)
        for position, i in enumerate(order):
            back[i] = done[position]
        return back
    progress = _progress(label, len(payloads))
    results: list[R] = []
    if progress is not None:
        progress.start()
    try:
        if workers == 1 or len(payloads) <= 1:
            for payload in payloads:
                results.append(fn(payload))
                _advance(progress)
        else:
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                for result in pool.map(fn, payloads, chunksize=1):
                    results.append(result)
                    _advance(progress)
    finally:
        if progress is not None:
            progress.stop()
    return results


def _advance(progress: Progress | None) -> None:
    if progress is not None:
        progress.advance(progress.task_ids[0])
