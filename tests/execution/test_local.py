"""The local executor: outcomes, timeouts, crashes, exceptions, cancellation, restart."""

from __future__ import annotations

import time

import pytest

from pallas_verify import execution
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution import Done, Update, Work


def _unit(name: str, **params) -> Work:
    return Work(entry=f"_entries:{name}", kind="test", params=params, limit_s=params.pop("limit_s", 60.0))


def _drain(executor, want: int, limit_s: float = 120.0) -> list:
    got, deadline = [], time.monotonic() + limit_s
    while len(got) < want and time.monotonic() < deadline:
        got += [d for d in executor.poll(0.5) if isinstance(d, Done)]
    return got


def test_the_executor_table_names_every_choice_and_rejects_others():
    assert set(execution.EXECUTORS) == {"local", "ray"}
    with pytest.raises(InvalidArgument, match="executor='dask' is not an executor; choose from local, ray"):
        execution.make("dask")
    with pytest.raises(InvalidArgument, match="ray_address='h:1' is only for executor='ray'"):
        execution.make("local", address="h:1")


@pytest.mark.slow
def test_local_units_report_values_updates_and_failures_and_workers_restart():
    with execution.make("local", workers=2) as executor:
        executor.submit(_unit("echo", value=1))
        executor.submit(_unit("hang", limit_s=2.0))
        assert executor.free() == 0
        done = {d.work.entry: d for d in _drain(executor, 2)}
        assert done["_entries:echo"].value["echo"] == 1
        assert done["_entries:echo"].value["parallel_runs"] == "2"  # no spare core assumed for a static tracer
        assert done["_entries:echo"].node
        assert done["_entries:hang"].failure.cause == "overran"
        assert "within 2 s" in done["_entries:hang"].failure.message
        executor.submit(_unit("abort"))
        executor.submit(_unit("fail"))
        done = {d.work.entry: d for d in _drain(executor, 2)}
        assert done["_entries:abort"].failure.cause == "died"
        assert "killed by signal SIGABRT" in done["_entries:abort"].failure.message
        raised = done["_entries:fail"].failure
        assert raised.cause == "raised" and raised.message == "ValueError: planted failure"
        assert raised.exception[:2] == ("ValueError", "Exception") and "_entries.py" in raised.traceback
        executor.submit(_unit("echo", value=2))  # a fresh worker replaced the crashed one
        assert _drain(executor, 1)[0].value["echo"] == 2
        executor.submit(_unit("chatty", value=3))
        got = []
        while not any(isinstance(d, Done) for d in got):
            got += executor.poll(0.5)
        assert [type(d) for d in got] == [Update, Update, Done]  # in the order they happened
        assert [d.value for d in got] == [{"step": 1}, {"step": 2}, {"done": 3}]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_cancel_stops_running_units_with_every_process_they_started():
    with execution.make("local", workers=1) as executor:
        unit = _unit("spawn_and_hang")
        executor.submit(unit)
        got = []
        while not got:
            got = [d for d in executor.poll(0.5) if isinstance(d, Update)]
        worker = got[0].value["worker"]
        slot = executor._slots[0].process.pid
        assert _alive(worker) and _alive(slot)
        assert executor.cancel() == [unit]
        assert executor.running() == []
        deadline = time.monotonic() + 5
        while (_alive(worker) or _alive(slot)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(slot) and not _alive(worker)  # the case worker went with its unit
        executor.submit(_unit("echo", value=3))
        assert _drain(executor, 1)[0].value["echo"] == 3


DRIVER = """
import sys
sys.path.insert(0, {entries!r})
from pallas_verify import execution
from pallas_verify.execution import Done, Work

print("driver ran", flush=True)
with execution.make("local", workers=1) as executor:
    executor.submit(Work(entry="_entries:echo", kind="test", params={{"value": 7}}))
    done = []
    while not done:
        done = [d for d in executor.poll(5.0) if isinstance(d, Done)]
print("echo", done[0].value["echo"], done[0].failure, flush=True)
"""


def test_a_driver_script_without_a_main_guard_is_not_run_again_in_its_workers(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(entries=str(Path(__file__).parent)))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.stdout.splitlines() == ["driver ran", "echo 7 None"], run.stderr[-2000:]
