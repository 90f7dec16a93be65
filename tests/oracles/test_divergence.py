"""The divergence oracle: executing backends that each pass but differ bitwise, for specs
that declare themselves bitwise stable; the reference decides which of them is wrong."""

from __future__ import annotations

import dataclasses

import numpy as np

import pallas_verify as pv
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.findings import Finding, row_of
from pallas_verify.oracles.divergence import (
    DivergenceEvidence,
    Divergences,
    Tie,
    divergence_findings,
)
from pallas_verify.reference import Truth
from pallas_verify.reports.report import kernel_rows
from tests.oracles._crafted import CASE, PATHS, X, copy_spec


def _on(backend: str, spec: pv.KernelSpec | None = None, mode: dict | None = None) -> Case:
    return dataclasses.replace(CASE, spec=spec or CASE.spec, backend=backend, mode=mode or {})


def _nudged(x: np.ndarray, at: int, steps: int = 1) -> np.ndarray:
    out = x.copy()
    for _ in range(steps):
        out[at] = np.nextafter(out[at], np.float32(np.inf))
    return out


def test_the_backend_farther_from_the_reference_is_blamed_and_both_errors_are_stated():
    corrupted = _nudged(X, 3, steps=4)
    [f] = divergence_findings([_on("interpret"), _on("tpu_interpret", mode={"dma_execution_mode": "eager"})],
                              [Outcome(outputs=(corrupted,)), Outcome(outputs=(X,))], PATHS, expected=[X])
    assert (f.kind, f.backend) == ("backend_divergence", "interpret")  # the earlier run is the wrong one
    assert f.evidence["blamed"] == ["interpret"] and f.evidence["found_on"] == "tpu_interpret"
    assert f.evidence["other_backend"] == "tpu_interpret"
    assert f.evidence["modes"] == {"interpret": {}, "tpu_interpret": {"dma_execution_mode": "eager"}}
    assert f.evidence["errors"]["tpu_interpret"] == 0.0 and f.evidence["errors"]["interpret"] > 0
    assert "the reference is missed by interpret by up to 9.537e-07, tpu_interpret by up to 0" in f.message
    assert "interpret disagrees with the reference there" in f.message
    assert "agree with the reference" not in f.message
    assert f.message.endswith("out: 1/8 elements differ, first at (3,)")


def test_the_float64_truth_decides_where_there_is_one():
    truth = X.astype(np.float64) + 1e-7  # both are off; the later backend by less
    closer = X + np.float32(1e-7)
    [f] = divergence_findings([_on("interpret"), _on("tpu_interpret")],
                              [Outcome(outputs=(X,)), Outcome(outputs=(closer,))], PATHS, expected=[X],
                              truth=Truth(outputs=[truth]))
    assert f.evidence["blamed"] == ["interpret"]


def test_when_the_reference_cannot_decide_it_is_a_tie_noted_once_per_pair_not_a_finding():
    up, down = _nudged(X, 5), X.copy()
    down[5] = np.nextafter(X[5], np.float32(-np.inf))
    runs, outcomes = [_on("interpret"), _on("tpu_interpret")], [Outcome(outputs=(up,)), Outcome(outputs=(down,))]
    ties: list[Tie] = []
    assert divergence_findings(runs, outcomes, PATHS, expected=[X], ties=ties) == []
    [tie] = ties
    assert tie.backends == ("interpret", "tpu_interpret") and tie.differing == 1 and tie.error > 0
    seen = Divergences()
    for key in ("a", "b"):  # two examples, one pair of backends: one note that counts both
        for case, outcome in zip(runs, outcomes, strict=True):
            assert seen.findings(key, case, outcome, PATHS, expected=[X]) == []
    [note] = seen.notes()
    assert note.startswith("backend_divergence not charged to the kernel: interpret and tpu_interpret")
    assert "on 2 example(s) (2 elements in all)" in note and "no evidence against the kernel" in note
    # Without reference outputs nothing can decide: the finding names both.
    [g] = divergence_findings(runs, outcomes, PATHS)
    assert g.evidence["blamed"] == ["interpret", "tpu_interpret"] and "no reference outputs" in g.message


def test_one_backend_farther_off_by_one_bit_is_still_a_finding():
    """A bug of one bit in one interpreter (the reference's value on the other): decided."""
    [f] = divergence_findings([_on("interpret"), _on("tpu_interpret")],
                              [Outcome(outputs=(_nudged(X, 5),)), Outcome(outputs=(X.copy(),))], PATHS,
                              expected=[X])
    assert f.backend == "interpret" and f.evidence["blamed"] == ["interpret"]


def test_a_real_chip_is_held_to_the_reference_not_to_the_interpreters_bits():
    """A chip's own rsqrt or reduction order (row_norm_masked on an H200: triton 2.5e-7 from
    the truth, the HLO interpreter 1.0e-7) is no divergence; two interpreters still are."""
    chip = _on("triton:h100")
    seen = Divergences()
    assert seen.findings("a", _on("interpret"), Outcome(outputs=(X.copy(),)), PATHS, expected=[X]) == []
    assert seen.findings("a", chip, Outcome(outputs=(_nudged(X, 5),)), PATHS, expected=[X], arithmetic="triton") == []
    [f] = seen.findings("a", _on("tpu_interpret"), Outcome(outputs=(_nudged(X, 5),)), PATHS, expected=[X])
    assert f.backend == "tpu_interpret" and f.evidence["backends"] == ["interpret", "tpu_interpret"]


def test_a_nan_where_the_reference_is_finite_is_infinitely_far():
    broken = X.copy()
    broken[2] = np.nan
    [f] = divergence_findings([_on("interpret"), _on("tpu_interpret")],
                              [Outcome(outputs=(X,)), Outcome(outputs=(broken,))], PATHS, expected=[X])
    assert f.evidence["blamed"] == ["tpu_interpret"] and f.evidence["errors"]["tpu_interpret"] == np.inf


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


def test_a_divergence_fails_its_own_row_not_the_backends_cells():
    found = Finding(kind="backend_divergence", kernel="k", backend="interpret", message="m",
                    evidence={"found_on": "tpu_interpret", "blamed": ["interpret"]})
    race = Finding(kind="race", kernel="k", backend="static", message="m")
    assert [(r.backend, r.status, r.reason) for r in kernel_rows("k", [found, race, found])] == [
        ("static", "fail", "race"), ("divergence", "fail", "backend_divergence")]
    assert kernel_rows("other", [found, race]) == []
    mismatch = Finding(kind="mismatch", kernel="k", backend="interpret", message="m")
    assert [row_of(f) for f in (found, race, mismatch)] == ["divergence", "static", "interpret"]


def test_divergence_evidence_is_typed_and_reads_back_from_the_finding():
    runs = [_on("interpret"), _on("tpu_interpret", mode={"detect_races": True})]
    other = X.copy()
    other.flat[0] = np.nextafter(other.flat[0], np.float32(np.inf))
    truth = Truth(outputs=[X.astype(np.float64)])
    [finding] = divergence_findings(runs, [Outcome(outputs=(X,)), Outcome(outputs=(other,))], PATHS, [X], truth)
    evidence = DivergenceEvidence.of(finding)
    assert evidence is not None and evidence.backends == ("interpret", "tpu_interpret")
    assert evidence.blamed == ("tpu_interpret",) and evidence.found_on == "tpu_interpret"
    assert evidence.other_backend == "interpret" and finding.backend == "tpu_interpret"
    assert evidence.others("tpu_interpret") == {"interpret": {}}
    assert DivergenceEvidence.of(dataclasses.replace(finding, kind="mismatch")) is None
