"""Executors: the same results in the same order everywhere; retries; failures named."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from sdclab.core.errors import InputError
from sdclab.core.execution import (
    Checkpoint,
    Executor,
    TaskFailed,
    default_workers,
    max_workers,
    run_tasks,
    worker_pool,
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Dask workers cannot import tests


def square(x: int) -> int:
    return x * x


def flaky(payload: tuple[int, str]) -> int:
    """Fails on its first attempt (a marker file remembers it), succeeds on the second."""
    value, marker = payload
    path = Path(marker)
    if not path.exists():
        path.write_text("failed once")
        raise RuntimeError(f"first attempt of {value}")
    return value + 100


def broken(x: int) -> int:
    if x == 3:
        raise ValueError("always fails on 3")
    return x


def blas_threads(_: int) -> int:
    """The number of threads of this process's BLAS (the largest, if several are loaded: NumPy's
    and SciPy's, which the L2 step's factorisations use)."""
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)


def test_local_workers_share_the_cores_among_their_blas_threads():
    """Two workers on this machine get cores / 2 BLAS threads each, not a thread per core each
    (which oversubscribed 2 cores and slowed TopDown's small factorisations ≈ 10×)."""
    share = max(1, default_workers() // 2)
    assert run_tasks(blas_threads, [0, 1, 2, 3], 2) == [share] * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, Executor("local", None)),
        ("local", Executor("local", None)),
        ("dask://scheduler:8786", Executor("dask", None, "tcp://scheduler:8786")),
        ("dask-local", Executor("dask", None, None)),
        ("dask-local:2", Executor("dask", 2, None)),
    ],
)
def test_executor_parsing(text, expected):
    assert Executor.parse(text) == expected


@pytest.mark.parametrize("text", ["dask://nohost", "dask-local:0", "dask-local:x", "spark://x:1"])
def test_bad_executors_are_input_errors(text):
    with pytest.raises(InputError, match="executor"):
        Executor.parse(text)


def test_worker_processes_are_bounded_by_the_machine():
    most = max_workers()
    assert most == max(2, default_workers())
    assert Executor.parse(f"dask-local:{most}").workers == most
    for text, workers in ((f"dask-local:{most + 1}", None), ("dask-local:999999999", None)):
        with pytest.raises(InputError, match=f"worker processes, more than the {most} this"):
            Executor.parse(text, workers)  # grew to 5.6 GB in 45 s doing nothing
    for text in (None, "local", "dask-local"):
        with pytest.raises(InputError, match=f"^(workers|executor .*): {most + 1} worker"):
            Executor.parse(text, most + 1)
    assert Executor.parse("dask://scheduler:8786", 64).address  # a remote cluster's own workers


def test_the_local_cluster_listens_on_the_loopback_alone():
    """The scheduler, the workers and the dashboard (which has no authentication)."""
    import psutil

    from sdclab.core.execution import dask_client

    def listening(process: psutil.Process) -> set[str]:
        return {
            c.laddr.ip
            for c in process.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }

    me = psutil.Process()
    with dask_client(Executor.parse("dask-local:1")) as client:
        addresses = listening(me).union(*(listening(p) for p in me.children(recursive=True)))
        assert client.dashboard_link.startswith("http://127.0.0.1:")
    assert addresses and addresses <= {"127.0.0.1", "::1"}, addresses


@pytest.mark.parametrize("workers", [1, 2, Executor.parse("dask-local:2")])
def test_results_in_payload_order_whatever_the_executor(workers):
    payloads = list(range(12))
    sizes = [float((7 * i) % 5) for i in payloads]
    assert run_tasks(square, payloads, workers, sizes=sizes) == [x * x for x in payloads]


@pytest.mark.parametrize("workers", [1, 2, Executor.parse("dask-local:2")])
def test_a_failing_task_is_retried_once(workers, tmp_path):
    payloads = [(i, str(tmp_path / f"{i}-{id(workers)}.marker")) for i in range(4)]
    assert run_tasks(flaky, payloads, workers) == [100, 101, 102, 103]


@pytest.mark.parametrize("workers", [1, 2, Executor.parse("dask-local:2")])
def test_a_task_failing_twice_is_reported_with_its_name(workers):
    names = [f"tract {i:06d}" for i in range(6)]
    with pytest.raises(TaskFailed, match="tract 000003 failed 2 times: ValueError"):
        run_tasks(broken, list(range(6)), workers, label="reconstructing", names=names)


@dataclass(frozen=True)
class Result:
    name: str
    value: int
    share: float
    cells: np.ndarray
    extra: dict | None


def counted(payload: tuple[int, str, bool]) -> Result:
    """Leaves a marker per call (to count the calls) and fails for payload 3 while asked to."""
    value, folder, fail = payload
    (Path(folder) / f"call-{value}-{len(list(Path(folder).glob(f'call-{value}-*')))}").touch()
    if fail and value == 3:
        raise ValueError("three fails")
    extra = {"a": np.arange(value)} if value % 2 else None
    return Result(f"t{value}", value, value / 4, np.full(value, value), extra)


@pytest.mark.parametrize("workers", [1, 2])
def test_checkpoint_keeps_finished_work_and_a_rerun_resumes(tmp_path, workers):
    calls = tmp_path / "calls"
    calls.mkdir()
    checkpoint = Checkpoint(tmp_path / "ck", "run-1", Result)
    names = [f"tract {i}" for i in range(6)]
    with pytest.raises(TaskFailed, match="tract 3"):
        run_tasks(
            counted,
            [(i, str(calls), True) for i in range(6)],
            workers,
            names=names,
            checkpoint=checkpoint,
        )
    assert len(list((tmp_path / "ck").glob("task-*.npz"))) == 5
    before = len(list(calls.iterdir()))
    results = run_tasks(
        counted,
        [(i, str(calls), False) for i in range(6)],
        workers,
        names=names,
        checkpoint=checkpoint,
    )
    assert len(list(calls.iterdir())) == before + 1  # only the failed task ran again
    assert [r.value for r in results] == list(range(6))
    assert results[5].name == "t5" and results[5].share == 1.25
    assert np.array_equal(results[5].extra["a"], np.arange(5)) and results[4].extra is None
    assert np.array_equal(results[2].cells, [2, 2])
    with pytest.raises(InputError, match="belongs to another run"):
        run_tasks(
            counted,
            [(i, str(calls), False) for i in range(6)],
            workers,
            names=names,
            checkpoint=Checkpoint(tmp_path / "ck", "run-2", Result),
        )


UNGUARDED_SCRIPT = """
import math
from sdclab.core.execution import run_tasks

print("main ran")
print(run_tasks(math.factorial, [3, 4, 5, 6], workers=2))
"""


def test_a_process_pool_works_from_a_script_without_a_main_guard(tmp_path):
    # a spawned worker that re-ran this script would start a pool of its own inside its own
    # start-up, which multiprocessing refuses: the pool breaks (BrokenProcessPool)
    import subprocess

    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["main ran", "[6, 24, 120, 720]"]


def process_id(_: int) -> int:
    import time

    time.sleep(0.05)  # long enough that both workers take a task
    return os.getpid()


def test_a_worker_pool_serves_every_call_inside_it():
    """Inside ``worker_pool`` the calls share one pool (at most its 2 worker processes serve
    both); outside it each call starts its own, and the block leaves no pool open."""
    from sdclab.core import execution

    with worker_pool(2):
        first = set(run_tasks(process_id, list(range(8)), 2))
        second = set(run_tasks(process_id, list(range(8)), 2))
    third = set(run_tasks(process_id, list(range(8)), 2))
    assert len(first | second) <= 2 and os.getpid() not in first
    assert not third & (first | second)
    assert execution._SHARED.by_workers == {}


def test_a_worker_pool_closes_when_its_block_fails():
    from sdclab.core import execution

    with pytest.raises(KeyError), worker_pool(2):
        run_tasks(process_id, list(range(4)), 2)
        raise KeyError("the caller fails")
    assert execution._SHARED.by_workers == {}
