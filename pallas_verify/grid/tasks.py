"""What the tracer asks of the process that traces the kernel (a worker, or this one).

Two tasks, each one trace of the kernel under the device context the backends trace under
(``interpreters.trace_context``), answered as plain data that crosses a pipe:

- ``static``: the grid check of one example's config and input shapes: the GridIssues of
  every ``pallas_call`` (``grid.check``), Mosaic TPU's block rules (``grid.tiling``) and
  jax's own grid-mapping invariants (``grid.invariants``), and the dtypes its bodies round
  dot operands to (``grid.dots``, a fact for the precision oracle);
- ``blame``: the bad elements of a finding's outputs mapped to output blocks and the grid
  points that wrote them (``grid.blame``), the kernel under the finding's transform.

A failure while tracing (the kernel's own Python raised) comes back as an Outcome with the
error: data, never this process's crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pallas_verify.case import Case, Outcome
from pallas_verify.spec import KernelSpec

__all__ = ["TASKS", "serve"]


def _static(spec: KernelSpec, request: Mapping[str, Any]) -> list[Any]:
    from pallas_verify.backends.interpreters import trace_context
    from pallas_verify.grid import check
    from pallas_verify.grid.invariants import invariant_issues
    from pallas_verify.grid.tiling import tiling_issues

    with trace_context(spec.platforms):  # the device context the backends trace under
        calls = check.grid_mappings(spec.kernel, request["inputs"], request["config"])
        if not calls and not _runs_a_kernel(spec, request):
            return [check.GridIssue(kind=check.NO_KERNEL, call=spec.name, message=(
                f"{spec.name} ran no Pallas kernel (no pallas_call, pl.kernel or core_map) for config "
                f"{dict(request['config'])}"))]
        facts = [check.GridIssue(kind=check.DOT_ROUNDING, call=call.name, operand=dtype,
                                 message=f"{call.name} rounds dot operands to {dtype}")
                 for call in calls for dtype in call.dot_roundings]
        return [*(issue for call in calls for issue in check.check_call(call)), *tiling_issues(spec, calls),
                *invariant_issues(spec.kernel, request["inputs"], request["config"]), *facts]


def _runs_a_kernel(spec: KernelSpec, request: Mapping[str, Any]) -> bool:
    """Whether the kernel function, traced on the example's shapes, holds any Pallas kernel
    (a kernel over a mesh has no grid mapping, so ``grid_mappings`` does not list it)."""
    import jax
    import numpy as np

    from pallas_verify import _jax_compat

    avals = [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in request["inputs"]]
    with _jax_compat.gpu_device_facts():
        closed = jax.make_jaxpr(lambda *xs: spec.kernel(*xs, **request["config"]))(*avals)
    return any(_jax_compat.is_kernel(eqn) for eqn in _jax_compat.equations(closed.jaxpr))


def _blame(spec: KernelSpec, request: Mapping[str, Any]) -> Any:
    from pallas_verify.backends.interpreters import trace_context
    from pallas_verify.grid.blame import blame_outputs
    from pallas_verify.grid.trace import grid_mappings
    from pallas_verify.transforms import bound

    case = Case(spec=spec, config=request["config"], inputs=request["inputs"], backend="static",
                transform=request["transform"])
    with trace_context(spec.platforms):
        calls = grid_mappings(bound(case), case.inputs, {})
    return blame_outputs(calls, request["masks"], request["errors"])


#: task name -> what it answers.
TASKS = {"static": _static, "blame": _blame}


def serve(spec: KernelSpec, request: Mapping[str, Any]) -> Any:
    """Do one task for ``spec``; a failure comes back as an Outcome with the error."""
    from pallas_verify import _jax_compat

    try:
        return TASKS[request["task"]](spec, request)
    except Exception as exc:  # the kernel's own failure while tracing is data
        return Outcome(error=_jax_compat.error_info(exc))
