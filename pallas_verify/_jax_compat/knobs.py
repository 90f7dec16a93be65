"""Which TPU interpret mode knobs can change a kernel's outputs, read from its jaxpr:
the metamorphic reruns worth running.

TPU interpret mode (JAX 0.12) copies BlockSpec blocks synchronously and applies its knobs
to specific parts of a kernel only (``interpret_pallas_call.py``):

- ``dma_execution_mode`` changes when explicit DMAs (``dma_start``: async copies, remote
  copies, ``emit_pipeline``) complete; without one, nothing depends on it.
- ``random_seed`` permutes, and ``num_cores_or_threads`` splits, the "parallel" grid
  dimensions only ("core_parallel" and "subcore_parallel" run as arbitrary): the grid-order
  rerun, and race detection on two cores, need one of more than one step.
- ``uninitialized_memory`` fills scratch buffers, ``run_scoped`` allocations, the padding
  of blocks that overhang their array, and output elements nothing writes. The last are
  seen by the base run itself (a NaN fill where the reference is finite is a mismatch),
  so the knob is worth a rerun only where one of the others exists.

A kernel over a mesh (``pl.kernel``, ``core_map``) or a pallas_call whose structure is
not the one JAX 0.12 has keeps every knob.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pallas_verify._jax_compat.tracing import equations, grid_mapping, is_kernel

__all__ = ["DMA", "FILL", "GRID_ORDER", "RACE", "RERUNS", "SKIPPED_CHECKS", "rerun_kinds"]

# The metamorphic reruns, named by the finding kind each can show.
FILL, DMA, GRID_ORDER, RACE = "uninitialized_read", "dma_ordering", "grid_order", "race"
#: Each rerun, with why a kernel that lacks what it varies is not rerun.
RERUNS: dict[str, str] = {
    FILL: "no scratch buffer, run_scoped allocation or block overhanging its array",
    DMA: "no explicit DMA (dma_start)",
    GRID_ORDER: "no 'parallel' grid dimension of more than one step",
    RACE: "no 'parallel' grid dimension of more than one step to split over two cores",
}
_ALL = frozenset(RERUNS)
#: Checks of a run itself that a backend leaves out where nothing can trip them, and why.
SKIPPED_CHECKS: dict[str, str] = {
    "race": "nothing runs concurrently: no DMA, and no 'parallel' grid dimension split over two cores",
}


def rerun_kinds(fn: Callable[..., Any], args: Sequence[Any]) -> frozenset[str]:
    """The reruns of ``RERUNS`` whose knob can change the outputs of ``fn(*args)``
    (every one when the kernel cannot be read)."""
    import jax

    try:
        closed = jax.make_jaxpr(fn)(*args)
    except Exception:  # the run itself reports a kernel that does not trace
        return _ALL
    knobs: set[str] = set()
    for eqn in equations(closed.jaxpr):
        if is_kernel(eqn):
            knobs |= _kernel_knobs(eqn)
    return frozenset(knobs)


def _kernel_knobs(eqn: Any) -> frozenset[str]:
    if eqn.primitive.name != "pallas_call":
        return _ALL
    try:
        gm = grid_mapping(eqn)
        body = gm.body
        primitives = {e.primitive.name for e in equations(body)}
        scratch = len(body.invars) > gm.num_index_operands + len(gm.blocks)
        padded = any(_overhangs(b.array_shape, b.block_dims) for b in gm.blocks)
        parallel = gm.num_dynamic_grid_bounds > 0 or any(
            s == "parallel" and not (isinstance(n, int) and n <= 1)
            for s, n in zip(gm.declared_semantics, gm.grid, strict=False))
    except Exception:
        return _ALL
    knobs = set()
    if "dma_start" in primitives:
        knobs.add(DMA)
    if parallel:
        knobs |= {GRID_ORDER, RACE}  # its order matters, and two cores can race on it
    if scratch or padded or "run_scoped" in primitives:
        knobs.add(FILL)
    return frozenset(knobs)


def _overhangs(array_shape: tuple[int, ...], block_dims: tuple[Any, ...]) -> bool:
    """Whether a block of ``block_dims`` can overhang ``array_shape`` (unknown kinds can)."""
    from jax.experimental import pallas as pl

    for size, dim in zip(array_shape, block_dims, strict=True):
        if dim is None or isinstance(dim, pl.Squeezed):
            continue
        if not isinstance(dim, pl.Blocked) or size % dim.block_size:
            return True
    return False
