"""Where a traced function's inputs can be grown along a grid axis of its pallas_call (JAX
0.12 internals): the plan of the ``shape_invariance`` rerun.

The rerun computes the same rows inside a larger array: each input the pallas_call tiles
along one grid axis ``g`` (its BlockSpec's block index along a dimension ``d`` is ``g``
itself) is grown along ``d``; the outputs tiled along ``g`` the same way are sliced back.
The plan is read from the traced function: its one Mosaic TPU ``pallas_call``, the
function inputs its operands are (unchanged, through ``jit`` bodies too), and the function
outputs its results are. A function that changes an input before the call or an output
after it, makes several pallas_calls, or declares ``shape_invariant_numerics=False``
has no plan (the reason says why).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

__all__ = ["ShapePlan", "shape_plan"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShapePlan:
    """How to grow a function's inputs along one grid axis of its pallas_call.

    Attributes:
      call: the kernel function's name.
      grid_axis: the grid axis ``g`` whose blocks are the rows computed again.
      semantics: that axis's declared dimension semantics ("" when none is declared).
      inputs: per flat function input, the dimension grown (None: left as it is).
      outputs: per flat function output, the dimension sliced back.
    """

    call: str
    grid_axis: int
    semantics: str
    inputs: tuple[int | None, ...]
    outputs: tuple[int, ...]


def shape_plan(closed: Any) -> ShapePlan | str:
    """The plan for a traced function (a ClosedJaxpr of its flat inputs), or why it has none."""
    from pallas_verify._jax_compat.params import _is_mosaic_tpu_call

    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") and not hasattr(closed, "eqns") else closed
    sources = {v: i for i, v in enumerate(jaxpr.invars)}
    destinations: dict[Any, list[int]] = {}
    for i, v in enumerate(jaxpr.outvars):
        destinations.setdefault(v, []).append(i)
    depends = {v: frozenset({i}) for i, v in enumerate(jaxpr.invars)}
    calls = list(_calls(jaxpr, sources, destinations, depends))
    kernels = [c for c in calls if _is_mosaic_tpu_call(c[0])]
    if len(calls) != 1 or len(kernels) != 1:
        return (f"the function makes {len(calls)} kernel call(s), {len(kernels)} of them Mosaic TPU "
                "pallas_call(s); the rerun grows the inputs of exactly one")
    eqn, operand_sources, result_destinations, operand_depends = kernels[0]
    params = eqn.params.get("compiler_params")
    if params is not None and getattr(params, "shape_invariant_numerics", True) is False:
        return "its pltpu.CompilerParams declare shape_invariant_numerics=False"
    return _plan(eqn, operand_sources, result_destinations, operand_depends, len(jaxpr.invars), len(jaxpr.outvars))


def _calls(jaxpr: Any, sources: dict[Any, int], destinations: dict[Any, list[int]],
           depends: dict[Any, frozenset[int]]) -> Iterator[tuple[Any, ...]]:
    """``(eqn, operand sources, result destinations, operand dependencies)`` of every kernel
    call, through jit bodies: the function input each operand is (None: computed), the
    function outputs each result is, and the function inputs each operand is computed from."""
    from pallas_verify._jax_compat.tracing import call_body, is_kernel, sub_jaxprs

    for eqn in jaxpr.eqns:
        deps = [depends.get(v, frozenset()) if _is_var(v) else frozenset() for v in eqn.invars]
        if is_kernel(eqn):
            yield (eqn, [sources.get(v) if _is_var(v) else None for v in eqn.invars],
                   [destinations.get(v, []) for v in eqn.outvars], deps)
        body = call_body(eqn) if eqn.primitive.name in ("pjit", "jit", "closed_call", "core_call") else None
        if body is not None:
            inner, _ = body
            inner_sources = {iv: sources[ov] for iv, ov in zip(inner.invars, eqn.invars, strict=True)
                             if _is_var(ov) and ov in sources}
            inner_destinations: dict[Any, list[int]] = {}
            for iv, ov in zip(inner.outvars, eqn.outvars, strict=True):
                if _is_var(iv):
                    inner_destinations.setdefault(iv, []).extend(destinations.get(ov, []))
            inner_depends = dict(zip(inner.invars, deps, strict=True))
            yield from _calls(inner, inner_sources, inner_destinations, inner_depends)
        elif not is_kernel(eqn):
            for sub, _ in sub_jaxprs(eqn):  # a loop or branch: kernels inside are found, not planned
                yield from _calls(sub, {}, {}, {})
        for v in eqn.outvars:  # every result depends on every operand (a call's too: an over-estimate)
            depends[v] = frozenset().union(*deps)


def _is_var(atom: Any) -> bool:
    import jax.extend as jex

    return isinstance(atom, jex.core.Var)


def _plan(eqn: Any, operand_sources: list[int | None], result_destinations: list[list[int]],
          operand_depends: list[frozenset[int]], num_inputs: int, num_outputs: int) -> ShapePlan | str:
    from pallas_verify._jax_compat.tracing import call_name, grid_mapping

    gm = eqn.params["grid_mapping"]
    mapping = grid_mapping(eqn)
    first = gm.num_dynamic_grid_bounds + gm.num_index_operands
    consts = len(eqn.invars) - first - gm.num_inputs
    if consts or gm.num_dynamic_grid_bounds:
        return "its pallas_call closes over constants or has a dynamic grid"
    inputs = operand_sources[first:]
    depends = operand_depends[first:]
    order = sorted(range(len(gm.grid)), key=lambda g: mapping.declared_semantics[g] != "parallel"
                   if g < len(mapping.declared_semantics) else True)
    reasons = []
    for g in order:
        plan = _along(g, gm, inputs, depends, result_destinations, num_inputs, num_outputs)
        if isinstance(plan, str):
            reasons.append(f"grid axis {g}: {plan}")
            continue
        semantics = mapping.declared_semantics[g] if g < len(mapping.declared_semantics) else ""
        return ShapePlan(call=call_name(eqn), grid_axis=g, semantics=semantics, inputs=plan[0], outputs=plan[1])
    return "; ".join(reasons) or "its pallas_call has no grid axis"


def _along(g: int, gm: Any, inputs: list[int | None], depends: list[frozenset[int]],
           result_destinations: list[list[int]], num_inputs: int,
           num_outputs: int) -> tuple[tuple[int | None, ...], tuple[int, ...]] | str:
    """(dimension grown per function input, dimension sliced per function output) along grid axis ``g``."""
    grown: list[int | None] = [None] * num_inputs
    mappings = list(gm.block_mappings)
    for k, (bm, source) in enumerate(zip(mappings[:gm.num_inputs], inputs, strict=True)):
        dim = _tied(bm, g)
        if isinstance(dim, str):
            return f"input {k}: {dim}"
        if dim is None:
            continue
        if source is None:
            return f"input {k} is computed by the function before the call, not one of its inputs"
        if grown[source] not in (None, dim):
            return f"function input {source} is tiled along two dimensions"
        grown[source] = dim
    sliced: list[int | None] = [None] * num_outputs
    for k, (bm, places) in enumerate(zip(mappings[gm.num_inputs:], result_destinations, strict=True)):
        dim = _tied(bm, g)
        if isinstance(dim, str) or dim is None:
            return f"output {k} is not tiled along it" if not isinstance(dim, str) else f"output {k}: {dim}"
        if not places:
            return f"output {k} is changed by the function after the call"
        for place in places:
            sliced[place] = dim
    if any(d is None for d in sliced):
        return "a function output does not come from the call"
    grown_inputs = {i for i, d in enumerate(grown) if d is not None}
    for k, (source, deps) in enumerate(zip(inputs, depends, strict=True)):
        if source is None and deps & grown_inputs:
            return f"input {k} is computed by the function from an input it grows"
    if all(d is None for d in grown):
        return "no input is tiled along it"
    return tuple(grown), tuple(d for d in sliced if d is not None)


def _tied(bm: Any, g: int) -> int | str | None:
    """The dimension whose block index is grid index ``g`` itself; None when no dimension's
    depends on ``g``; a reason when one depends on it otherwise."""
    jaxpr = bm.index_map_jaxpr.jaxpr if hasattr(bm.index_map_jaxpr, "consts") else bm.index_map_jaxpr
    axis = jaxpr.invars[g]
    derived: set[Any] = set()
    for eqn in jaxpr.eqns:
        if any(_is_var(u) and (u is axis or u in derived) for u in eqn.invars):
            derived.update(eqn.outvars)
    dims = [d for d, out in enumerate(jaxpr.outvars) if out is axis]
    if any(_is_var(out) and out in derived for out in jaxpr.outvars):
        return "its block index is computed from the grid index (not the grid index itself)"
    if len(dims) > 1:
        return "two of its dimensions follow the grid index"
    return dims[0] if dims else None
