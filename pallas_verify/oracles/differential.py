"""Oracles: turn outcomes (and the reference's outputs) into findings.

Differential oracles compare a backend's outputs with the reference's, or two backends'
outputs with each other. Metamorphic oracles compare the same case run with one
interpreter knob changed: a correct kernel gives bitwise-identical outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding
from pallas_verify.reference import Truth
from pallas_verify.spec import Tolerance
from pallas_verify.tolerance import Comparison, compare

__all__ = [
    "bitwise_equal",
    "compare_outputs",
    "divergence_findings",
    "metamorphic_finding",
    "outcome_findings",
]



def _finding(case: Case, kind: str, message: str, **evidence: object) -> Finding:
    return Finding(
        kind=kind,  # type: ignore[arg-type]
        kernel=case.spec.name,
        backend=case.backend,
        message=message,
        config=dict(case.config),
        mode=dict(case.mode),
        transform=case.transform,
        evidence=evidence,
    )


def compare_outputs(
    paths: Sequence[str], actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], tolerance: Tolerance | None,
    truth: Truth | None = None,
) -> list[Comparison]:
    """One Comparison per output (a count mismatch is reported on a pseudo-output).

    ``truth``: the float64 ground truth (the precision oracle judges), or one without
    outputs (a bound from its reduction depth judges); an explicit ``tolerance`` wins.
    """
    if len(actual) != len(expected):
        return [Comparison(path="outputs", shape=(len(actual),), dtype="-", bad=None,
                           problem=f"kernel returned {len(actual)} outputs, reference {len(expected)}")]
    truths = truth.outputs if truth is not None and truth.outputs is not None else [None] * len(expected)
    if len(truths) != len(expected):
        truths = [None] * len(expected)
    depth, note = (truth.depth, truth.reason) if truth is not None else (1, None)
    return [compare(p, a, e, tolerance, t, depth, note)
            for p, a, e, t in zip(paths, actual, expected, truths, strict=True)]


def outcome_findings(
    case: Case, outcome: Outcome, expected: Sequence[np.ndarray] | None, paths: Sequence[str],
    truth: Truth | None = None, *, executes: bool = True,
) -> list[Finding]:
    """Findings from one outcome: crash, timeout, errors by kind, races, leaks, mismatches.

    ``executes``: whether the case's backend runs kernels (an error of a compile-only
    backend is a ``compile_error``)."""
    if outcome.crashed:
        return [_finding(case, "crash", outcome.crashed)]
    if outcome.timed_out:
        why = f"; {outcome.diagnostics}" if outcome.diagnostics else ""
        return [_finding(case, "timeout", f"the case did not finish (stopped after {outcome.seconds:.1f} s{why}): "
                         "a deadlock (e.g. a semaphore wait never signalled) or an endless loop")]
    found = []
    if outcome.error is not None:
        found.append(_error_finding(case, outcome, executes))
    if outcome.races:
        found.append(_finding(case, "race", "data race detected by the interpreter:\n" + outcome.diagnostics,
                              log=outcome.diagnostics))
    leaks = _jax_compat.semaphore_leaks(outcome.diagnostics)
    if leaks:
        found.append(_finding(case, "semaphore_leak", "semaphores left non-zero at kernel exit (a DMA or signal "
                              "never waited):\n" + "\n".join(leaks), log=leaks))
    if outcome.outputs is not None and expected is not None:
        table = compare_outputs(paths, outcome.outputs, expected, case.spec.tolerance, truth)
        if not all(c.ok for c in table):
            lines = [c.describe() for c in table if not c.ok]
            found.append(_finding(case, "mismatch", "outputs differ from the reference:\n" + "\n".join(lines),
                                  outputs=lines))
    return found


def _error_finding(case: Case, outcome: Outcome, executes: bool) -> Finding:
    error = outcome.error
    assert error is not None
    if outcome.compiled_only or not executes:
        kind = "compile_error"
    else:
        kind = _jax_compat.error_kind(error.message) or "exception"
    return _finding(case, kind, error.summary(), error_type=error.type, traceback=error.traceback[-4000:])


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise: same shape, dtype and bits (NaN equals NaN of the same payload)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.itemsize in (1, 2, 4, 8) and a.dtype == b.dtype and a.shape == b.shape:
        view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return a.view(view) == b.view(view)
    return np.zeros(a.shape, bool)


def _differences(paths: Sequence[str], one: Sequence[np.ndarray], two: Sequence[np.ndarray]) -> list[str]:
    lines = []
    for path, a, b in zip(paths, one, two, strict=True):
        same = bitwise_equal(a, b)
        if not same.all():
            idx = tuple(int(i) for i in np.unravel_index(int(np.argmin(same)), same.shape))
            lines.append(f"{path}: {int((~same).sum())}/{same.size} elements differ, first at {idx}")
    return lines


def metamorphic_finding(
    case: Case, kind: str, knob: str, base: Outcome, variant_case: Case, variant: Outcome, paths: Sequence[str]
) -> Finding | None:
    """A finding when the variant (one knob changed) does not reproduce ``base`` bitwise."""
    if variant.error is not None and base.error is None:
        return _finding(case, kind, f"with {knob} changed from {case.mode.get(knob)!r} to "
                        f"{variant_case.mode.get(knob)!r} the kernel fails: {variant.error.summary()}",
                        variant_mode=dict(variant_case.mode))
    if base.outputs is None or variant.outputs is None:
        return None
    lines = _differences(paths, base.outputs, variant.outputs)
    if not lines:
        return None
    return _finding(case, kind, f"outputs change when {knob} changes from {case.mode.get(knob)!r} to "
                    f"{variant_case.mode.get(knob)!r}:\n" + "\n".join(lines), variant_mode=dict(variant_case.mode),
                    outputs=lines)


def divergence_findings(cases: Sequence[Case], outcomes: Sequence[Outcome], paths: Sequence[str]) -> list[Finding]:
    """Executing backends that each pass the reference but differ from each other bitwise.

    Only for specs declaring ``bitwise_stable`` (no floating-point reassociation that a
    backend may legitimately order differently); reported against the later backend.
    """
    runs = [(c, o) for c, o in zip(cases, outcomes, strict=True) if o.ok and o.outputs is not None]
    if len(runs) < 2 or not runs[0][0].spec.bitwise_stable:
        return []
    (first_case, first), found = runs[0], []
    for case, outcome in runs[1:]:
        lines = _differences(paths, first.outputs, outcome.outputs)  # type: ignore[arg-type]
        if lines:
            found.append(_finding(case, "backend_divergence", f"outputs agree with the reference on both "
                                  f"{first_case.backend} and {case.backend} but differ bitwise between them:\n"
                                  + "\n".join(lines), other_backend=first_case.backend))
    return found
