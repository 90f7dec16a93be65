"""The worker process: a case runs and comes back, an error is an outcome, a hang is a
timeout, an abort is a crash, and the next case after either gets a fresh process."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pallas_verify.case import Case
from pallas_verify.execution import isolation
from pallas_verify.execution.isolation import Worker
from pallas_verify.execution.sandbox import compiler_slot

SPECS = Path(__file__).with_name("_worker_specs.py")
X = np.arange(8, dtype=np.float32)


def _case() -> Case:
    return Case(spec=None, config={}, inputs=(X,), backend="interpret")


def _run(worker: Worker, name: str, **limits):
    return worker.run(f"{SPECS}::{name}", _case(), **limits)


@pytest.fixture(scope="module")
def worker():
    worker = Worker(timeout_s=120.0)
    yield worker
    worker.close()


def _pid(outcome) -> int:
    assert outcome.ok, outcome
    return int(outcome.outputs[0][0])


def test_a_case_runs_in_another_process_and_the_worker_serves_the_next_one(worker):
    first = _pid(_run(worker, "pid"))
    assert first != os.getpid()
    assert _pid(_run(worker, "pid")) == first  # the same process, not a fresh one per case


def test_an_error_in_the_kernel_is_an_outcome_and_the_worker_lives_on(worker):
    before = _pid(_run(worker, "pid"))
    outcome = _run(worker, "raises")
    assert not outcome.crashed and not outcome.timed_out
    assert outcome.error is not None and "planted failure in the kernel" in outcome.error.message
    assert _pid(_run(worker, "pid")) == before


def test_a_spec_that_does_not_load_is_an_error_naming_it(worker):
    outcome = _run(worker, "no_such_spec")
    assert outcome.error is not None and "no_such_spec" in outcome.error.summary()
    assert _run(worker, "pid").ok


def test_an_abort_is_a_crash_with_its_signal_and_the_next_case_gets_a_fresh_process(worker):
    before = _pid(_run(worker, "pid"))
    outcome = _run(worker, "aborts")
    assert outcome.crashed is not None and outcome.crashed.startswith("worker process killed by signal SIGABRT")
    assert outcome.outputs is None and not outcome.ok
    after = _pid(_run(worker, "pid"))
    assert after != before


def test_a_hang_is_stopped_at_the_time_limit_and_the_next_case_gets_a_fresh_process(worker):
    before = _pid(_run(worker, "pid"))
    outcome = _run(worker, "sleeps", timeout_s=1.5)
    assert outcome.timed_out and not outcome.ok
    assert outcome.diagnostics == "it reached the time limit of 1.5 s"
    assert 1.5 <= outcome.seconds < 30
    assert _pid(_run(worker, "pid")) != before


def test_an_answer_never_collected_is_not_taken_for_the_next_request(worker):
    # A caller interrupted between submit and collect leaves an answer on the pipe.
    forgotten = worker.submit_case(f"{SPECS}::pid", _case())
    outcome = worker.collect(worker.submit_case(f"{SPECS}::raises", _case()))
    assert outcome.error is not None and "planted failure in the kernel" in outcome.error.message
    late = worker.collect(forgotten)
    assert late.crashed == "the worker was restarted before it answered this request" and not late.ok
    assert _run(worker, "pid").ok


@pytest.mark.parametrize(("cores", "busy", "env", "slot"), [
    (2, 0, {}, "tracer"),  # one run: a core to spare
    (2, 1, {}, "interpreters"),  # other work keeps one busy
    (2, 0, {"PYTEST_XDIST_WORKER_COUNT": "2"}, "interpreters"),  # every core has its own run
    (8, 0, {"PYTEST_XDIST_WORKER_COUNT": "4"}, "tracer"),
    (8, 1, {"PYTEST_XDIST_WORKER_COUNT": "4"}, "interpreters"),
    (8, 0, {"PV_PARALLEL_RUNS": "5"}, "interpreters"),  # an executor's units
    (1, 0, {}, "interpreters"),
])
def test_the_static_check_gets_a_worker_of_its_own_only_where_a_core_is_spare(monkeypatch, cores, busy, env, slot):
    for name in ("PYTEST_XDIST_WORKER_COUNT", "PV_PARALLEL_RUNS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(isolation, "_cores", lambda: cores)
    monkeypatch.setattr(isolation, "_busy_cores", lambda: busy)
    assert isolation.static_tracer_slot() == slot


def test_the_load_is_read_once_per_process():
    assert isolation._busy_cores() == isolation._busy_cores() >= 0


@pytest.mark.slow
def test_close_stops_the_process_and_a_closed_worker_starts_again_on_demand():
    worker = Worker(timeout_s=120.0)
    try:
        first = _pid(_run(worker, "pid"))
        worker.close()
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        assert _pid(_run(worker, "pid")) != first
    finally:
        worker.close()


def test_a_compiler_familys_compile_only_targets_share_a_worker():
    from pallas_verify.backends.compiled import compile_backends

    # a real chip: its own; Mosaic GPU's worker is replaced once it compiled (test_compiler_workers.py)
    slots = {b.name: compiler_slot(b) for b in compile_backends() if not b.executes}
    for family in ("mosaic_tpu", "triton", "mosaic_gpu"):
        assert {slot for name, slot in slots.items() if name.startswith(f"{family}:")} == {family}
