"""Differential oracle: one outcome against the reference's outputs (and its float64
ground truth), plus what the outcome itself shows: crash, timeout, errors by kind, races,
semaphore leaks. Backend-vs-backend comparison is in divergence.py, one-knob reruns in
metamorphic.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding
from pallas_verify.oracles.base import case_finding
from pallas_verify.oracles.elements import element_evidence
from pallas_verify.reference import Truth
from pallas_verify.spec import Tolerance
from pallas_verify.tolerance import Comparison, compare

__all__ = ["STRUCTURAL", "compare_outputs", "judge_outcome", "outcome_findings"]


def compare_outputs(
    paths: Sequence[str], actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], tolerance: Tolerance | None,
    truth: Truth | None = None,
) -> list[Comparison]:
    """One Comparison per output (a count mismatch is reported on a pseudo-output).

    ``truth``: the float64 ground truth (the precision oracle judges, with the float32
    shadows of narrow float outputs and the evaluation with rounded dot operands), or one without
    outputs (a bound from its reduction depth judges); an explicit ``tolerance`` wins.
    """
    if len(actual) != len(expected):
        return [Comparison(path="outputs", shape=(len(actual),), dtype="-", bad=None,
                           problem=f"kernel returned {len(actual)} outputs, reference {len(expected)}")]
    truths = truth.outputs if truth is not None and truth.outputs is not None else [None] * len(expected)
    if len(truths) != len(expected):
        truths = [None] * len(expected)
    shadows = truth.shadow if truth is not None and truth.shadow is not None else [None] * len(truths)
    if len(shadows) != len(truths):
        shadows = [None] * len(truths)
    dots = truth.dots if truth is not None and truth.dots is not None else [None] * len(truths)
    if len(dots) != len(truths):
        dots = [None] * len(truths)
    depth, note = (truth.depth, truth.reason) if truth is not None else (1, None)
    return [compare(p, a, e, tolerance, t, depth, note, w, d)
            for p, a, e, t, w, d in zip(paths, actual, expected, truths, shadows, dots, strict=True)]


def outcome_findings(
    case: Case, outcome: Outcome, expected: Sequence[np.ndarray] | None, paths: Sequence[str],
    truth: Truth | None = None,
) -> list[Finding]:
    """Findings from one outcome: crash, timeout, errors by kind, races, leaks, mismatches
    (an error of a backend that only compiles is a ``compile_error``)."""
    return judge_outcome(case, outcome, expected, paths, truth)[0]


def judge_outcome(
    case: Case, outcome: Outcome, expected: Sequence[np.ndarray] | None, paths: Sequence[str],
    truth: Truth | None = None,
) -> tuple[list[Finding], list[Comparison] | None]:
    """``outcome_findings`` and the comparison table of the outputs (None when none was
    made): what blame maps, so the outputs are compared once."""
    if outcome.crashed:
        return [case_finding(case, "crash", outcome.crashed)], None
    if outcome.timed_out:
        why = f"; {outcome.diagnostics}" if outcome.diagnostics else ""
        return [case_finding(case, "timeout", f"the case did not finish (stopped after {outcome.seconds:.1f} s{why}): "
                         "a deadlock (e.g. a semaphore wait never signalled) or an endless loop")], None
    found = []
    if outcome.error is not None:
        found.append(_error_finding(case, outcome))
    if outcome.races:
        found.append(case_finding(case, "race", "data race detected by the interpreter:\n" + outcome.diagnostics,
                              log=outcome.diagnostics))
    leaks = _jax_compat.semaphore_leaks(outcome.diagnostics)
    if leaks:
        found.append(case_finding(case, "semaphore_leak", "semaphores left non-zero at kernel exit (a DMA or signal "
                              "never waited):\n" + "\n".join(leaks), log=leaks))
    table = None
    if outcome.outputs is not None and expected is not None and not outcome.compiled_only:
        table = compare_outputs(paths, outcome.outputs, expected, case.spec.tolerance, truth)
        if not all(c.ok for c in table):
            lines = [c.describe() for c in table if not c.ok]
            found.append(case_finding(case, "mismatch", "outputs differ from the reference:\n" + "\n".join(lines),
                                  outputs=lines, **_structural(table),
                                  **_elements(table, outcome.outputs, expected, truth, case.spec.tolerance)))
    return found, table


#: Why a mismatch of shapes, dtypes or output counts is reported as found, not shrunk.
STRUCTURAL = ("the outputs' shapes, dtypes or count differ from the reference's, which no smaller input "
              "value would change: reported as found, not shrunk")


def _elements(table: Sequence[Comparison], actual: Sequence[np.ndarray], expected: Sequence[np.ndarray],
              truth: Truth | None, tolerance: Tolerance | None) -> dict[str, list]:
    """``{"elements": [...]}``: each bad output's element-level picture (``elements``)."""
    truths = truth.outputs if truth is not None and truth.outputs is not None else []
    pictures = [element_evidence(c, actual[i], expected[i], truths[i] if i < len(truths) else None, tolerance)
                for i, c in enumerate(table) if i < len(actual) and i < len(expected)]
    found = [p for p in pictures if p is not None]
    return {"elements": found} if found else {}


def _structural(table: Sequence[Comparison]) -> dict[str, str]:
    """``{"shrink_stopped": STRUCTURAL}`` when every bad output differs in structure only
    (shape, dtype, count): the engine then reports the example at once."""
    bad = [c for c in table if not c.ok]
    return {"shrink_stopped": STRUCTURAL} if bad and all(c.problem for c in bad) else {}


def _error_finding(case: Case, outcome: Outcome) -> Finding:
    error = outcome.error
    assert error is not None
    if error.type == _jax_compat.SIDE_EFFECT_DROPPED:  # a compile's own check (backends.mosaic_params)
        kind = "side_effect"
    elif outcome.compiled_only:
        kind = "compile_error"
    else:
        kind = _jax_compat.error_kind(error.message) or "exception"
    return case_finding(case, kind, error.summary(), error_type=error.type, traceback=error.traceback[-4000:])
