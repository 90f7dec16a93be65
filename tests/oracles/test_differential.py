"""The oracles on crafted outcomes: each outcome becomes the findings of its kind, and a
correct outcome none; metamorphic and divergence findings compare bits, not values."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.oracles.differential import (
    bitwise_equal,
    divergence_findings,
    metamorphic_finding,
    outcome_findings,
)
from pallas_verify.reference import Truth

X = np.arange(8, dtype=np.float32)
PATHS = ["out"]


def _copy_spec(**fields) -> pv.KernelSpec:
    """Built in a function: a module-level KernelSpec would be collected as a test."""
    return pv.KernelSpec(name="copy", kernel=lambda x: x, reference=lambda x: x, configs=st.just({}),
                         inputs=lambda config: st.just((X,)), **fields)


CASE = Case(spec=_copy_spec(), config={"n": 8}, inputs=(X,), backend="tpu_interpret", mode={"dma_execution_mode": "eager"})


def findings(outcome: Outcome, *, expected=(X,), case: Case = CASE, executes: bool = True):
    return outcome_findings(case, outcome, expected, PATHS, executes=executes)


def kinds(found) -> list[str]:
    return [f.kind for f in found]


def test_a_correct_outcome_has_no_finding():
    assert findings(Outcome(outputs=(X.copy(),))) == []


def test_a_crash_is_one_crash_finding_whatever_else_the_outcome_holds():
    [f] = findings(Outcome(crashed="worker process killed by signal SIGABRT", outputs=(X + 1,), races=True))
    assert (f.kind, f.kernel, f.backend) == ("crash", "copy", "tpu_interpret")
    assert f.message == "worker process killed by signal SIGABRT"
    assert f.config == {"n": 8} and f.mode == {"dma_execution_mode": "eager"}


def test_a_timeout_says_how_long_and_why_it_was_stopped():
    [f] = findings(Outcome(timed_out=True, seconds=12.34, diagnostics="it reached the time limit of 12 s"))
    assert f.kind == "timeout"
    assert "stopped after 12.3 s; it reached the time limit of 12 s" in f.message


@pytest.mark.parametrize(("message", "kind"), [
    ("DEADLOCK DETECTED: semaphore 3 waits for 1, nobody signals", "deadlock"),
    ("Out-of-bounds read of x_ref at [8:16]", "out_of_bounds"),
    ("Revisited block 0 of output 0", "revisit"),
    ("division by zero", "exception"),
])
def test_an_error_is_the_kind_its_interpreter_text_shows(message, kind):
    error = ErrorInfo(type="ValueError", message=message, traceback="Traceback ...")
    [f] = findings(Outcome(error=error))
    assert f.kind == kind
    assert f.message == f"ValueError: {message}"
    assert f.evidence["error_type"] == "ValueError"


def test_an_error_of_a_compile_only_backend_is_a_compile_error():
    error = ErrorInfo(type="MosaicError", message="Out of bounds VMEM")  # text alone would say out_of_bounds
    assert kinds(findings(Outcome(error=error), expected=None, executes=False)) == ["compile_error"]
    assert kinds(findings(Outcome(error=error, compiled_only=True), expected=None)) == ["compile_error"]


def test_races_and_semaphore_leaks_are_findings_with_their_log():
    log = "RACE DETECTED at x_ref\nSemaphore 2 has non-zero count 1 at kernel exit"
    found = findings(Outcome(outputs=(X.copy(),), races=True, diagnostics=log))
    assert kinds(found) == ["race", "semaphore_leak"]
    assert found[0].evidence["log"] == log
    assert found[1].evidence["log"] == ["Semaphore 2 has non-zero count 1 at kernel exit"]


def test_wrong_outputs_are_a_mismatch_naming_the_output():
    [f] = findings(Outcome(outputs=(X + 1,)))
    assert f.kind == "mismatch"
    assert f.message.startswith("outputs differ from the reference:\nout")
    assert f.evidence["outputs"] and f.evidence["outputs"][0].startswith("out")


def test_a_missing_output_is_a_mismatch_of_the_count():
    [f] = findings(Outcome(outputs=(X, X)))
    assert f.kind == "mismatch"
    assert "kernel returned 2 outputs, reference 1" in f.message


def test_outputs_are_not_judged_without_expected_outputs():
    assert findings(Outcome(outputs=(X + 1,)), expected=None) == []


def test_an_explicit_tolerance_decides_what_is_a_mismatch():
    near = (X + np.float32(1e-3),)
    assert kinds(findings(Outcome(outputs=near))) == ["mismatch"]
    loose = dataclasses.replace(CASE, spec=_copy_spec(tolerance=pv.Tolerance(rtol=0.0, atol=1e-2)))
    assert findings(Outcome(outputs=near), case=loose) == []


def test_the_ground_truth_judges_when_given():
    truth = Truth(outputs=[X.astype(np.float64) + 0.5])  # the reference itself is 0.5 off
    outcome = Outcome(outputs=(X + np.float32(0.5),))  # the kernel is exact
    assert kinds(findings(outcome)) == ["mismatch"]
    assert outcome_findings(CASE, outcome, (X,), PATHS, truth) == []


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.float64])
def test_bitwise_equal_compares_bits(dtype):
    a = np.arange(6).astype(dtype)
    b = a.copy()
    b[3] = b[3] + 1
    assert bitwise_equal(a, a.copy()).all()
    assert list(bitwise_equal(a, b)) == [True, True, True, False, True, True]


def test_bitwise_equal_sees_the_sign_of_zero_and_nan_payloads_and_rejects_other_shapes():
    zero = np.array([0.0, np.nan], np.float32)
    other = np.array([-0.0, np.nan], np.float32)
    assert list(bitwise_equal(zero, other)) == [False, True]
    payload = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert not bitwise_equal(np.array([np.nan], np.float32), payload).any()
    assert not bitwise_equal(X, X.astype(np.float64)).any()  # same values, other dtype
    assert not bitwise_equal(X, X.reshape(2, 4)).any()


VARIANT = dataclasses.replace(CASE, mode={"dma_execution_mode": "on_wait"})


def test_a_variant_that_reproduces_the_bits_is_no_finding():
    base = Outcome(outputs=(X.copy(),))
    assert metamorphic_finding(CASE, "dma_ordering", "dma_execution_mode", base, VARIANT, base, PATHS) is None


def test_a_variant_with_other_bits_is_a_finding_naming_the_knob_and_the_first_difference():
    changed = X.copy()
    changed[5] = np.nextafter(changed[5], np.float32(100))  # one ULP: within any tolerance, not bitwise
    f = metamorphic_finding(CASE, "dma_ordering", "dma_execution_mode", Outcome(outputs=(X,)), VARIANT,
                            Outcome(outputs=(changed,)), PATHS)
    assert f is not None and f.kind == "dma_ordering"
    assert "dma_execution_mode changes from 'eager' to 'on_wait'" in f.message
    assert f.evidence["outputs"] == ["out: 1/8 elements differ, first at (5,)"]
    assert f.evidence["variant_mode"] == {"dma_execution_mode": "on_wait"}


def test_a_variant_that_fails_where_the_base_ran_is_a_finding():
    error = ErrorInfo(type="ValueError", message="semaphore wait never signalled")
    f = metamorphic_finding(CASE, "dma_ordering", "dma_execution_mode", Outcome(outputs=(X,)), VARIANT,
                            Outcome(error=error), PATHS)
    assert f is not None
    assert "the kernel fails: ValueError: semaphore wait never signalled" in f.message


def test_a_variant_is_not_judged_when_the_base_failed_too():
    error = Outcome(error=ErrorInfo(type="ValueError", message="boom"))
    assert metamorphic_finding(CASE, "dma_ordering", "dma_execution_mode", error, VARIANT, error, PATHS) is None


def _on(backend: str, spec: pv.KernelSpec | None = None) -> Case:
    return dataclasses.replace(CASE, spec=spec or CASE.spec, backend=backend, mode={})


def test_backends_that_differ_bitwise_diverge_against_the_later_one():
    other = X.copy()
    other[0] = np.nextafter(other[0], np.float32(1))
    [f] = divergence_findings([_on("interpret"), _on("tpu_interpret")],
                              [Outcome(outputs=(X,)), Outcome(outputs=(other,))], PATHS)
    assert (f.kind, f.backend) == ("backend_divergence", "tpu_interpret")
    assert f.evidence["other_backend"] == "interpret"
    assert "differ bitwise between them:\nout: 1/8 elements differ, first at (0,)" in f.message


def test_no_divergence_for_equal_bits_a_single_run_a_failed_run_or_an_unstable_spec():
    other = X + 1
    runs = [_on("interpret"), _on("tpu_interpret")]
    assert divergence_findings(runs, [Outcome(outputs=(X,)), Outcome(outputs=(X.copy(),))], PATHS) == []
    assert divergence_findings(runs[:1], [Outcome(outputs=(X,))], PATHS) == []
    failed = Outcome(outputs=(other,), error=ErrorInfo(type="E", message="m"))
    assert divergence_findings(runs, [Outcome(outputs=(X,)), failed], PATHS) == []
    unstable = _copy_spec(bitwise_stable=False)
    assert divergence_findings([_on("interpret", unstable), _on("tpu_interpret", unstable)],
                               [Outcome(outputs=(X,)), Outcome(outputs=(other,))], PATHS) == []
