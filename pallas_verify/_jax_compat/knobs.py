"""What a kernel's jaxpr says TPU interpret mode's knobs can reach: facts about the kernel,
for the metamorphic reruns (their table, with the kinds and reasons, is
``backends.tpu_reruns``).

TPU interpret mode (JAX 0.12) copies BlockSpec blocks synchronously and applies its knobs
to specific parts of a kernel only (``interpret_pallas_call.py``):

- ``dma_execution_mode`` changes when explicit DMAs (``dma_start``: async copies, remote
  copies, ``emit_pipeline``) complete: the fact ``EXPLICIT_DMA``.
- ``random_seed`` permutes, and ``num_cores_or_threads`` splits, the "parallel" grid
  dimensions only ("core_parallel" and "subcore_parallel" run as arbitrary): the fact
  ``PARALLEL_GRID``, a parallel dimension of more than one step.
- ``uninitialized_memory`` fills scratch buffers, ``run_scoped`` allocations, the padding
  of blocks that overhang their array, and output elements nothing writes: the fact
  ``FILL_REACHES`` (the last are seen by the base run itself: a NaN fill where the
  reference is finite is a mismatch).

A kernel over a mesh (``pl.kernel``, ``core_map``) or a pallas_call whose structure is
not the one JAX 0.12 has has every fact.

Whether a fact could change a given run's outputs is what the run's memory shows
(``memwatch``: ``MemoryWatch.saw``); ``kernel_facts`` also gives what a watch of a run
needs (``MemoryPlan``), for a kernel the watch can follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pallas_verify._jax_compat.memwatch import HBM_SPACES, MemoryPlan
from pallas_verify._jax_compat.memwatch import available as memwatch_available
from pallas_verify._jax_compat.tracing import (
    SEMAPHORE_SPACE,
    equations,
    grid_mapping,
    is_kernel,
    is_pallas_call,
    kernel_params,
    sub_jaxprs,
)

__all__ = ["EXPLICIT_DMA", "FILL_REACHES", "KERNEL_FACTS", "PARALLEL_GRID", "kernel_facts"]

#: What a kernel has that a knob reaches (see the module docstring).
FILL_REACHES, EXPLICIT_DMA, PARALLEL_GRID = "fill_reaches", "explicit_dma", "parallel_grid"
KERNEL_FACTS: frozenset[str] = frozenset({FILL_REACHES, EXPLICIT_DMA, PARALLEL_GRID})


# Primitives whose effects a watch does not follow: asynchronous copies and the semaphores
# that order them (emit_pipeline copies with DMAs too), and host callbacks that return
# values (host state the kernel reads).
_UNWATCHED = frozenset({"dma_start", "dma_wait", "semaphore_signal", "semaphore_wait", "semaphore_read",
                        "get_barrier_semaphore", "emit_pipeline", "pipeline_body", "io_callback", "pure_callback"})


# Primitives that run a kernel on several devices, which share one interpreter memory.
_MANY_DEVICES = frozenset({"shard_map", "xla_pmap", "pmap"})


def kernel_facts(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[frozenset[str], MemoryPlan | None]:
    """The facts of ``KERNEL_FACTS`` that ``fn(*args)`` has (every one when the kernel
    cannot be read), and the plan of a watch of its run (None where a watch cannot follow
    the kernel: see ``memwatch``)."""
    import jax

    try:
        closed = jax.make_jaxpr(fn)(*args)
    except Exception:  # the run itself reports a kernel that does not trace
        return KERNEL_FACTS, None
    knobs: set[str] = set()
    eqns = list(equations(closed.jaxpr))
    kernels = [eqn for eqn in eqns if is_kernel(eqn)]
    for eqn in kernels:
        knobs |= _kernel_facts(eqn)
    one_device = not any(eqn.primitive.name in _MANY_DEVICES for eqn in eqns)
    watched = len(kernels) == 1 and one_device and memwatch_available()
    return frozenset(knobs), _plan(kernels[0]) if watched else None


def _kernel_facts(eqn: Any) -> frozenset[str]:
    if not is_pallas_call(eqn):
        return KERNEL_FACTS
    try:
        gm = grid_mapping(eqn)
        body = gm.body
        primitives = {e.primitive.name for e in equations(body)}
        scratch = len(body.invars) > gm.num_index_operands + len(gm.blocks)
        padded = any(b.can_overhang() for b in gm.blocks)
        parallel = gm.num_dynamic_grid_bounds > 0 or any(
            s == "parallel" and not (isinstance(n, int) and n <= 1)
            for s, n in zip(gm.declared_semantics, gm.grid, strict=False))
    except Exception:
        return KERNEL_FACTS
    facts = set()
    if "dma_start" in primitives:
        facts.add(EXPLICIT_DMA)
    if parallel:
        facts.add(PARALLEL_GRID)
    if scratch or padded or "run_scoped" in primitives:
        facts.add(FILL_REACHES)
    return frozenset(facts)


def _plan(eqn: Any) -> MemoryPlan | None:
    """What a watch of one pallas_call needs (``followed`` False where it cannot follow
    every access), or None for a kernel over a mesh or one jax's classes do not describe."""
    if not is_pallas_call(eqn):
        return None
    try:
        gm = grid_mapping(eqn)
        followed = not (any(space == SEMAPHORE_SPACE for _, space, _, _ in kernel_params(gm.body))
                        or any(e.primitive.name in _UNWATCHED for e in equations(gm.body))
                        or _swap_value_used(gm.body))
        # As TPU interpret mode reads them (a dynamic grid dimension is never parallel there).
        parallel = tuple(s == "parallel" for s in gm.declared_semantics) or (False,) * len(gm.grid)
        # The buffers it makes on each core: blocks not in HBM, then scratch (no semaphores).
        roles = ["in" if i < gm.num_inputs else "out" for i, b in enumerate(gm.blocks)
                 if b.memory_space not in HBM_SPACES and not b.semaphore]
        scratch = kernel_params(gm.body)[gm.num_index_operands + len(gm.blocks):]
        roles += ["scratch" for _, space, _, _ in scratch if space not in HBM_SPACES and space != SEMAPHORE_SPACE]
        return MemoryPlan(input_shapes=tuple(b.array_shape for b in gm.blocks[:gm.num_inputs]),
                          num_index_operands=gm.num_index_operands, parallel=parallel, buffers=tuple(roles),
                          followed=followed)
    except Exception:
        return None


def _swap_value_used(jaxpr: Any) -> bool:
    """Whether the old value a ``swap`` returns is used anywhere in ``jaxpr`` (``ref[...] = x``
    leaves it unused; a watch does not follow it)."""
    from jax.extend.core import Var

    used = {id(v) for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
    used |= {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    for e in jaxpr.eqns:
        if e.primitive.name in ("swap", "masked_swap") and any(id(v) in used for v in e.outvars):
            return True
        if any(_swap_value_used(sub) for sub, _ in sub_jaxprs(e)):
            return True
    return False
