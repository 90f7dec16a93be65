"""The static grid check and blame of one example, traced where user code cannot hurt the run.

Both trace the kernel (``jax.make_jaxpr``, under the device context the backends trace
under), which runs the author's Python: a kernel may hang, abort or raise while it is
traced. When a worker is given, the tracing happens there, so a hang becomes a
``timeout`` finding and an abort a ``crash``; the run goes on. A raise is no finding of
the static check: it could not judge that kernel, and says so ("static check skipped for
<kernel>: tracing it raised ..."); the backends' searches trace the kernel themselves and
report its exception, each judged there (the kernel's, or JAX's: ``attribution``). Without a
worker (a spec built inside a function has no reference a worker could load) the same
findings come from tracing in-process, where only exceptions can be caught.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pallas_verify.case import Outcome
from pallas_verify.execution.isolation import Pending, Worker
from pallas_verify.findings import Finding
from pallas_verify.spec import KernelSpec

__all__ = ["StaticResult", "blame_finding", "serve_task", "start_static_check"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StaticResult:
    """The static check of one example.

    Attributes:
      findings: grid findings, or the one finding saying that tracing failed.
      notes: "static check skipped for <call>: <reason>", for each part not analysed.
    """

    findings: list[Finding]
    notes: list[str]


def _static_issues(spec: KernelSpec, request: Mapping[str, Any]) -> list[Any]:
    from pallas_verify.backends.interpreters import trace_context
    from pallas_verify.grid import check
    from pallas_verify.grid.invariants import invariant_issues
    from pallas_verify.grid.tiling import tiling_issues

    with trace_context(spec.platforms):  # the device context the backends trace under
        calls = check.grid_mappings(spec.kernel, request["inputs"], request["config"])
        return [*(issue for call in calls for issue in check.check_call(call)), *tiling_issues(spec, calls),
                *invariant_issues(spec.kernel, request["inputs"], request["config"])]


def _blame(spec: KernelSpec, request: Mapping[str, Any]) -> Any:
    from pallas_verify.backends.interpreters import trace_context
    from pallas_verify.case import Case
    from pallas_verify.grid import blame
    from pallas_verify.grid.trace import grid_mappings
    from pallas_verify.transforms import bound

    case = Case(spec=spec, config=request["config"], inputs=request["inputs"], backend="static",
                transform=request["transform"])
    with trace_context(spec.platforms):
        calls = grid_mappings(bound(case), case.inputs, {})
    return blame.blame_outputs(calls, request["masks"], request["errors"])


_TASKS = {"static": _static_issues, "blame": _blame}


def serve_task(spec: KernelSpec, request: Mapping[str, Any]) -> Any:
    """Do one task for ``spec``; a failure comes back as an Outcome with the error."""
    from pallas_verify import _jax_compat

    try:
        return _TASKS[request["task"]](spec, request)
    except Exception as exc:  # the kernel's own failure while tracing is data
        return Outcome(error=_jax_compat.error_info(exc))


@dataclasses.dataclass
class _Task:
    """One task under way: sent to a worker (which works meanwhile), or done in-process
    when its answer is asked for."""

    spec: KernelSpec
    request: dict[str, Any]
    worker: Worker | None
    timeout_s: float
    pending: Pending | None = None

    def answer(self) -> Any:
        if self.pending is None:
            return serve_task(self.spec, self.request)
        assert self.worker is not None
        return self.worker.collect(self.pending, timeout_s=self.timeout_s)


def _start(task: str, spec: KernelSpec, spec_ref: str | None, worker: Worker | None,
           timeout_s: float, **payload: Any) -> _Task:
    request = {"task": task, "spec": spec_ref, **payload}
    if worker is None or spec_ref is None:
        return _Task(spec, request, None, timeout_s)
    return _Task(spec, request, worker, timeout_s, worker.submit(request))


def _failure(spec: KernelSpec, config: Mapping[str, Any], outcome: Outcome,
             purpose: str = "the static grid check") -> Finding:
    what = f"tracing {spec.name!r} for {purpose}"
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
    return Finding(kind=kind, kernel=spec.name, backend="static", message=message,  # type: ignore[arg-type]
                   config=dict(config), evidence=evidence)


def start_static_check(spec: KernelSpec, config: Mapping[str, Any], inputs: Sequence[np.ndarray], *,
                       spec_ref: str | None = None, worker: Worker | None = None,
                       timeout_s: float = 120.0) -> Callable[[], StaticResult]:
    """Start the static grid check of one example: in ``worker`` (given), which traces
    while the caller goes on; the returned function waits for the result. Without a
    worker the trace happens in-process when the result is asked for."""
    task = _start("static", spec, spec_ref, worker, timeout_s, config=dict(config), inputs=tuple(inputs))
    return lambda: _static_result(spec, config, task.answer())


def _static_result(spec: KernelSpec, config: Mapping[str, Any], answer: Any) -> StaticResult:
    if isinstance(answer, Outcome) and answer.error is not None:  # the check could not judge this kernel
        first = (answer.error.message.strip().splitlines() or [""])[0][:200]
        return StaticResult(findings=[], notes=[
            f"static check skipped for {spec.name}: tracing it raised {answer.error.type}: {first}; the "
            "backends' searches trace and run the kernel themselves and report what it does"])
    if isinstance(answer, Outcome):  # the kernel's Python hung or aborted while traced: the kernel's
        return StaticResult(findings=[_failure(spec, config, answer)], notes=[])
    findings = [Finding(kind=i.kind, kernel=spec.name, backend="static", message=i.message, config=dict(config),
                        evidence={"call": i.call, "operand": i.operand, "block": i.block, "grid_points": i.grid_points})
                for i in answer if i.is_finding]
    return StaticResult(findings=findings, notes=[i.message for i in answer if not i.is_finding])


def blame_finding(finding: Finding, spec: KernelSpec, inputs: Sequence[np.ndarray],
                  masks: Sequence[np.ndarray | None], errors: Sequence[np.ndarray | None], *,
                  spec_ref: str | None = None, worker: Worker | None = None, timeout_s: float = 120.0) -> Finding:
    """``finding`` with the bad elements mapped to output blocks and grid points.

    Blame is evidence: when tracing for it fails (raises, hangs, aborts) the finding is
    kept as it is, with the reason under ``evidence["blame_error"]``.
    """
    answer = _start("blame", spec, spec_ref, worker, timeout_s, config=dict(finding.config), inputs=tuple(inputs),
                    transform=finding.transform, masks=list(masks), errors=list(errors)).answer()
    if isinstance(answer, Outcome):
        reason = _failure(spec, finding.config, answer, "blame").message
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
