"""Executors: the same results in the same order everywhere; retries; failures named."""

from __future__ import annotations

import sys
from pathlib import Path

import cloudpickle
import pytest

from sdclab.errors import InputError
from sdclab.execution import Executor, TaskFailed, run_tasks

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
