"""The static oracle: what tracing the kernel answered (``grid.tasks``), as findings.

The static grid check's GridIssues become findings of backend "static" (the rest notes of
what it could not analyse); blame's answer becomes a finding's evidence. Tracing runs the
author's Python, which may hang, abort or raise (the tracer runs it where that cannot hurt
the run, ``tracer``): a hang or an abort is the kernel's ``timeout`` or ``crash``; a raise
is no finding of the static check, which could not judge that kernel and says so ("static
check skipped for <kernel>: tracing it raised ..."): the backends' searches trace the
kernel themselves and report its exception, each judged there (the kernel's, or JAX's:
``attribution``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pallas_verify.case import Outcome
from pallas_verify.findings import Finding
from pallas_verify.grid.check import DOT_ROUNDING, NO_KERNEL, SKIPPED

__all__ = ["StaticResult", "blamed", "static_result", "trace_failure"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StaticResult:
    """The static check of one example.

    Attributes:
      findings: grid findings, or the one finding saying that tracing failed.
      notes: "static check skipped for <call>: <reason>", for each part not analysed.
    """

    findings: list[Finding]
    notes: list[str]
    no_kernel: bool = False  # the example ran no Pallas kernel at all
    dot_roundings: frozenset[str] = frozenset()  # narrow dtypes its kernels round dot operands to (grid.dots)


def trace_failure(kernel: str, config: Mapping[str, Any], outcome: Outcome,
                  purpose: str = "the static grid check") -> Finding:
    """The finding of a trace of ``kernel`` that crashed, hung or raised."""
    what = f"tracing {kernel!r} for {purpose}"
    evidence: dict[str, Any] = {}
    if outcome.crashed:
        kind, message = "crash", f"{what} crashed the process: {outcome.crashed}"
    elif outcome.timed_out:
        kind, message = "timeout", (f"{what} did not finish within its time limit ({outcome.seconds:.0f} s): "
                                    "the kernel's Python hangs while it is traced")
    else:
        error = outcome.error
        assert error is not None
        kind = "exception"
        message = f"{what} raised {error.summary()}"
        evidence = {"error_type": error.type, "traceback": error.traceback[-4000:]}
    return Finding(kind=kind, kernel=kernel, backend="static", message=message,
                   config=dict(config), evidence=evidence)


def static_result(kernel: str, config: Mapping[str, Any], answer: Any) -> StaticResult:
    """The static check of one example of ``kernel``, from the ``static`` task's answer:
    its GridIssues, or the Outcome of a trace that failed."""
    if isinstance(answer, Outcome) and answer.error is not None:  # the check could not judge this kernel
        first = (answer.error.message.strip().splitlines() or [""])[0][:200]
        return StaticResult(findings=[], notes=[
            f"static check skipped for {kernel}: tracing it raised {answer.error.type}: {first}; the "
            "backends' searches trace and run the kernel themselves and report what it does"])
    if isinstance(answer, Outcome):  # the kernel's Python hung or aborted while traced: the kernel's
        return StaticResult(findings=[trace_failure(kernel, config, answer)], notes=[])
    if any(i.kind == NO_KERNEL for i in answer):
        return StaticResult(findings=[], notes=[], no_kernel=True)
    findings = [Finding(kind=i.kind, kernel=kernel, backend="static", message=i.message, config=dict(config),
                        evidence=_evidence(i)) for i in answer if i.is_finding]
    return StaticResult(findings=findings, notes=[i.message for i in answer if i.kind == SKIPPED],
                        dot_roundings=frozenset(i.operand for i in answer if i.kind == DOT_ROUNDING))


def _evidence(issue: Any) -> dict[str, Any]:
    """A static finding's evidence: where it is, and the grid and blocks it is drawn on."""
    evidence = {"call": issue.call, "operand": issue.operand, "block": issue.block, "grid_points": issue.grid_points}
    if issue.grid:
        evidence |= {"grid": issue.grid, "semantics": issue.semantics}
    if issue.block_counts is not None:
        evidence["block_counts"] = issue.block_counts
    return evidence


def blamed(finding: Finding, answer: Any) -> Finding:
    """``finding`` with the ``blame`` task's answer (``grid.blame.Blame``): its bad elements
    mapped to output blocks and grid points. Blame is evidence: when tracing for it failed
    (raised, hung, aborted) the finding is kept as it is, with the reason under
    ``evidence["blame_error"]``."""
    if isinstance(answer, Outcome):
        reason = trace_failure(finding.kernel, finding.config, answer, "blame").message
        return dataclasses.replace(finding, evidence={**finding.evidence, "blame_error": reason})
    if not answer.outputs:
        return finding
    lines = [o.message for o in answer.outputs]
    first = answer.outputs[0]
    evidence = {**finding.evidence, "blame": {
        "messages": lines, "output": first.output, "block_shape": first.block_shape,
        "block_errors": first.block_max_error, "block_bad_count": first.block_bad_count,
        "writers": [[list(b), [list(p) for p in points]] for b, points in first.writers]}}
    return dataclasses.replace(finding, message=finding.message + "\n" + "\n".join(lines), evidence=evidence)
