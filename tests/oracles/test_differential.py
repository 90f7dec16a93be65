"""The differential oracle on crafted outcomes: each outcome becomes the findings of its
kind, and a correct outcome none."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import pallas_verify as pv
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.oracles.differential import outcome_findings
from pallas_verify.reference import Truth
from tests.oracles._crafted import CASE, PATHS, X, copy_spec


def findings(outcome: Outcome, *, expected=(X,), case: Case = CASE):
    return outcome_findings(case, outcome, expected, PATHS)


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
    [picture] = f.evidence["elements"]  # every element wrong, each by more than its bound
    assert picture["path"] == f.evidence["outputs"][0].split(":")[0]
    assert all(v > 1 for row in picture["errors"] for v in row)


def test_a_missing_output_is_a_mismatch_of_the_count():
    [f] = findings(Outcome(outputs=(X, X)))
    assert f.kind == "mismatch"
    assert "kernel returned 2 outputs, reference 1" in f.message
    assert "elements" not in f.evidence  # no element is comparable


def test_outputs_are_not_judged_without_expected_outputs():
    assert findings(Outcome(outputs=(X + 1,)), expected=None) == []


def test_an_explicit_tolerance_decides_what_is_a_mismatch():
    near = (X + np.float32(1e-3),)
    assert kinds(findings(Outcome(outputs=near))) == ["mismatch"]
    loose = dataclasses.replace(CASE, spec=copy_spec(tolerance=pv.Tolerance(rtol=0.0, atol=1e-2)))
    assert findings(Outcome(outputs=near), case=loose) == []


def test_the_ground_truth_judges_when_given():
    truth = Truth(outputs=[X.astype(np.float64) + 0.5])  # the reference itself is 0.5 off
    outcome = Outcome(outputs=(X + np.float32(0.5),))  # the kernel is exact
    assert kinds(findings(outcome)) == ["mismatch"]
    assert outcome_findings(CASE, outcome, (X,), PATHS, truth) == []
