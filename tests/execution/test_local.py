"""The local executor: outcomes, timeouts, crashes, exceptions, cancellation, restart."""

from __future__ import annotations

import time

import pytest

from pallas_verify import execution
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution import Work


def _unit(name: str, **params) -> Work:
    return Work(entry=f"_entries:{name}", kind="test", params=params, limit_s=params.pop("limit_s", 60.0))


def _drain(executor, want: int, limit_s: float = 120.0) -> list:
    got, deadline = [], time.monotonic() + limit_s
    while len(got) < want and time.monotonic() < deadline:
        got += executor.poll(0.5)
    return got


def test_the_executor_table_names_every_choice_and_rejects_others():
    assert set(execution.EXECUTORS) == {"local", "ray"}
    with pytest.raises(InvalidArgument, match="executor='dask' is not an executor; choose from local, ray"):
        execution.make("dask")
    with pytest.raises(InvalidArgument, match="ray_address='h:1' is only for executor='ray'"):
        execution.make("local", address="h:1")


@pytest.mark.slow
def test_local_units_report_results_timeouts_crashes_and_exceptions_and_workers_restart():
    with execution.make("local", workers=2) as executor:
        executor.submit(_unit("echo", value=1))
        executor.submit(_unit("hang", limit_s=2.0))
        assert executor.free() == 0
        done = {d.work.entry: d for d in _drain(executor, 2)}
        assert done["_entries:echo"].result["echo"] == 1
        assert done["_entries:echo"].result["parallel_runs"] == "2"  # no spare core assumed for a static tracer
        assert done["_entries:echo"].node
        assert done["_entries:hang"].result["kind"] == "timeout"
        assert "within 2 s" in done["_entries:hang"].result["error"]
        executor.submit(_unit("abort"))
        executor.submit(_unit("fail"))
        done = {d.work.entry: d for d in _drain(executor, 2)}
        assert done["_entries:abort"].result["kind"] == "crash"
        assert "exit code" in done["_entries:abort"].result["error"]
        assert done["_entries:fail"].result["kind"] == "exception"
        assert "ValueError: planted failure" in done["_entries:fail"].result["error"]
        executor.submit(_unit("echo", value=2))  # a fresh worker replaced the crashed one
        assert _drain(executor, 1)[0].result["echo"] == 2


@pytest.mark.slow
def test_cancel_stops_running_units_and_returns_them():
    with execution.make("local", workers=1) as executor:
        unit = _unit("hang")
        executor.submit(unit)
        time.sleep(1.0)
        assert executor.cancel() == [unit]
        assert executor.running() == []
        executor.submit(_unit("echo", value=3))
        assert _drain(executor, 1)[0].result["echo"] == 3
