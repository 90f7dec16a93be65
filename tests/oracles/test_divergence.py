"""The divergence oracle: executing backends that each pass but differ bitwise, for specs
that declare themselves bitwise stable."""

from __future__ import annotations

import dataclasses

import numpy as np

import pallas_verify as pv
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.oracles.divergence import divergence_findings
from tests.oracles._crafted import CASE, PATHS, X, copy_spec


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
    unstable = copy_spec(bitwise_stable=False)
    assert divergence_findings([_on("interpret", unstable), _on("tpu_interpret", unstable)],
                               [Outcome(outputs=(X,)), Outcome(outputs=(other,))], PATHS) == []
