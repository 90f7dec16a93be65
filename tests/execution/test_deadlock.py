"""Deadlocks reported in seconds: the interpreter watchdog and the adaptive per-case limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import find

from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.case import Case
from pallas_verify.engine import verify
from pallas_verify.execution.caselimit import CaseLimit
from pallas_verify.execution.isolation import Worker
from pallas_verify.loader import load_spec, spec_ref
from reference_kernels.mutants import dma, hazards

HANGS = Path(__file__).with_name("_hang_specs.py")


def _inputs(spec):
    return tuple(np.asarray(x) for x in find(spec.inputs({}), lambda _: True))


def _run(spec, **mode):
    case = Case(spec=spec, config={}, inputs=_inputs(spec), backend="tpu_interpret", mode=mode)
    return TpuInterpret().run(case)


def test_first_case_gets_the_allowance_then_a_multiple_of_the_slowest_with_a_floor():
    limit = CaseLimit(ceiling=120.0, first_case_s=15.0, floor_s=5.0, factor=5.0)
    assert limit.idle_after() == 15.0
    limit.record(0.2, finished=True)
    assert limit.idle_after() == 5.0  # the floor
    limit.record(3.0, finished=True)
    limit.record(50.0, finished=False)  # a case that did not finish sets no pace
    assert limit.idle_after() == 15.0
    assert "3.00 s" in limit.describe()
    assert CaseLimit(ceiling=2.0).idle_after() == 2.0  # never past the user's limit


def test_a_case_whose_worker_starts_for_it_gets_at_least_the_first_case_allowance():
    limit = CaseLimit(ceiling=120.0, first_case_s=15.0, floor_s=5.0, factor=5.0)
    limit.record(0.2, finished=True)
    assert (limit.idle_after(), limit.idle_after(fresh=True)) == (5.0, 15.0)
    assert "first-case allowance of 15 s (its worker process started for it)" in limit.describe(fresh=True)
    limit.record(4.0, finished=True)
    assert limit.idle_after(fresh=True) == 20.0 and "4.00 s" in limit.describe(fresh=True)  # the pace, when longer
    assert CaseLimit(ceiling=2.0).idle_after(fresh=True) == 2.0


@pytest.mark.parametrize("mode", [{}, {"num_cores_or_threads": 2}, {"dma_execution_mode": "on_wait"}],
                         ids=["1core", "2cores", "on_wait"])
def test_deadlocked_double_buffer_fails_with_the_waiting_semaphore_named(mode):
    outcome = _run(hazards.double_buffer_deadlock_spec, **mode)
    assert outcome.error is not None
    assert outcome.error.type == "DeadlockError"
    for text in ("DEADLOCK DETECTED", "core 0 waits on DMA semaphore", "hazards.py", "_double_buffer_kernel"):
        assert text in outcome.error.message
    clean = _run(hazards.double_buffer_spec, **mode)  # the interpreter state is clean again
    assert clean.ok
    np.testing.assert_array_equal(clean.outputs[0], 2 * _inputs(hazards.double_buffer_spec)[0])


def test_a_regular_semaphore_nobody_signals_is_a_deadlock_and_a_signalled_one_is_not():
    outcome = _run(dma.deadlock_semaphore_spec)
    assert outcome.error is not None
    assert "waits on semaphore" in outcome.error.message
    assert _run(dma.semaphore_handshake_spec).ok


@pytest.mark.slow
def test_verify_reports_a_deadlocking_kernel_as_deadlock(tmp_path):
    report = verify(hazards.double_buffer_deadlock_spec, ["tpu_interpret"], max_examples=3, profile="ci",
                    out_dir=tmp_path, shrink_budget_s=0, static=False)
    [finding] = report.findings
    assert finding.kind == "deadlock"
    assert "DMA semaphore" in finding.message
    assert [r.status for r in report.results] == ["fail"]


def _in_worker(name: str, *, idle_after_s: float):
    """Run the hang spec ``name`` once in a fresh worker (ceiling 300 s)."""
    spec = load_spec(f"{HANGS}::{name}")
    case = Case(spec=spec, config={}, inputs=_inputs(spec), backend="interpret", mode={})
    worker = Worker()
    try:
        return worker.run(spec_ref(spec), case, timeout_s=300.0, idle_after_s=idle_after_s), spec
    finally:
        worker.close()


@pytest.mark.slow
def test_an_idle_worker_is_stopped_at_its_idle_limit_long_before_the_ceiling():
    outcome, _ = _in_worker("sleeps", idle_after_s=2.0)
    assert outcome.timed_out
    assert "used no CPU" in outcome.diagnostics


@pytest.mark.slow
def test_a_busy_worker_runs_past_its_idle_limit():
    outcome, spec = _in_worker("spins", idle_after_s=1.0)
    assert outcome.ok, outcome
    assert outcome.seconds > 1.0
    np.testing.assert_array_equal(outcome.outputs[0], _inputs(spec)[0])


@pytest.mark.slow
def test_a_timeout_finding_says_which_limit_stopped_it():
    from pallas_verify.backends import registry
    from pallas_verify.runner import Runner

    spec = load_spec(f"{HANGS}::sleeps")
    with Runner(spec, timeout_s=300.0) as runner:
        runner.sandbox.limit = CaseLimit(ceiling=300.0, first_case_s=2.0)
        [finding] = runner.check({}, _inputs(spec), registry.get("interpret"), {})
    assert finding.kind == "timeout"
    assert "used no CPU" in finding.message
    assert "idle limit 2.0 s: the first-case allowance of 2 s; ceiling timeout_s=300 s" in finding.message
