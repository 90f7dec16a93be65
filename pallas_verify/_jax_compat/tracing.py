"""Reading traced jaxprs (JAX 0.12 internals): the one walker over equations, the
call-like primitives whose body runs in place, and what a kernel equation says (a
pallas_call's grid mapping, block mappings and compiler params, the lowering a kernel
asks for, the refs its body writes).

Callers see plain data (``GridMapping``, ``BlockMapping``, strings); the attribute
names and eqn params of jax's internal classes are read only here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pallas_verify._jax_compat.versions import (
    discharge_strips_memory_space,
    swapped_waits_mislabelled,
    tensorcore_mesh_class,
)

__all__ = [
    "GRIDLESS_KERNELS",
    "SEMAPHORE_SPACE",
    "UNWINDOWED_SPACES",
    "BlockMapping",
    "GridMapping",
    "bind",
    "call_body",
    "call_name",
    "equations",
    "evaluate",
    "grid_mapping",
    "grid_mapping_class",
    "index_map_function",
    "is_kernel",
    "is_pallas_call",
    "kernel_site",
    "sub_jaxprs",
    "written_refs",
]

# Primitives of kernels without a grid or BlockSpecs (pl.kernel over a mesh, core_map):
# the static check names them as skipped rather than passing over them in silence.
GRIDLESS_KERNELS = frozenset({"core_map", "mpmd_map"})

#: The memory space of TPU semaphores (``pltpu.SEMAPHORE``), as text.
SEMAPHORE_SPACE = "semaphore_mem"
#: Memory spaces (as text) whose operands Pallas does not cut into blocks: the kernel gets
#: the whole array and makes its accesses itself (pl.ANY, HBM, semaphores, host memory).
UNWINDOWED_SPACES = frozenset({"any", "hbm", SEMAPHORE_SPACE, "host"})

# Call-like primitives whose body runs in place on the call's operands -> the param
# holding that body (a closed or open jaxpr).
_CALL_BODIES = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
                "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
                "custom_vjp_call_jaxpr": "fun_jaxpr", "checkpoint": "jaxpr", "remat": "jaxpr"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class BlockMapping:
    """One operand of a pallas_call as its BlockSpec maps it.

    Attributes:
      array_shape: the whole array's shape.
      block_shape: the block's size per dimension (1 for a squeezed dimension; the window
        of a dimension indexed by element offsets).
      element_dims: the BlockSpec's dimensions that index by element offsets or bounded
        slices (``pl.Element``, ``pl.BoundedSlice``, indirect), as text without their
        padding (one note per kind of window); ``()`` when every dimension is a block.
      element_window: per dimension, the window of a ``pl.Element`` dimension (whose index
        map gives an element offset) and None for a block dimension; ``()`` when a
        dimension is neither (its elements cannot be located statically).
      memory_space: its memory space as text (``"default"``, ``"any"``, ``"hbm"``...).
      index_map: the index map, a ClosedJaxpr of ``*grid_indices, *scalar_prefetch``.
      revisit: the revisit mode its ``pipeline_mode`` declares (``"any"``,
        ``"immediate"``), or None when it declares none.
      semaphore: True when the operand holds semaphores (a semaphore dtype, or the
        semaphore memory space): it is signalled and waited on, never data.
    """

    array_shape: tuple[int, ...]
    block_shape: tuple[int, ...]
    memory_space: str
    index_map: Any
    revisit: str | None = None
    semaphore: bool = False
    element_dims: tuple[str, ...] = ()
    element_window: tuple[int | None, ...] = ()

    def can_overhang(self) -> bool:
        """Whether a block can reach past the array's end (a dimension the block size does
        not divide, or one indexed by element offsets)."""
        return bool(self.element_dims) or any(a % b for a, b in zip(self.array_shape, self.block_shape, strict=True))


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridMapping:
    """What a pallas_call equation says about its grid and operands.

    Attributes:
      grid: the grid (its entries may be dynamic when ``num_dynamic_grid_bounds``).
      grid_names: named grid axes, or None.
      num_dynamic_grid_bounds: leading operands giving dynamic grid bounds.
      num_index_operands: scalar-prefetch operands (after the dynamic bounds).
      num_inputs: inputs among ``blocks`` (the rest are outputs).
      prefetch_avals: the avals of the scalar-prefetch operands.
      vmapped_dims: grid dimensions added by vmap.
      blocks: the block mappings, inputs then outputs.
      declared_semantics: the ``dimension_semantics`` of the compiler params, as text.
      aliases: ``input_output_aliases`` as (operand index, output index) pairs; operand
        indices count the scalar-prefetch operands.
      body: the kernel body's jaxpr.
    """

    grid: tuple[Any, ...]
    grid_names: tuple[Any, ...] | None
    num_dynamic_grid_bounds: int
    num_index_operands: int
    num_inputs: int
    prefetch_avals: tuple[Any, ...]
    vmapped_dims: tuple[int, ...]
    blocks: tuple[BlockMapping, ...]
    declared_semantics: tuple[str, ...]
    aliases: tuple[tuple[int, int], ...]
    body: Any


def sub_jaxprs(eqn: Any) -> Iterator[tuple[Any, list[Any]]]:
    """``(jaxpr, consts)`` of every jaxpr an equation holds in its params (bodies, branches)."""
    import jax.extend as jex

    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, jex.core.ClosedJaxpr):
                yield v.jaxpr, list(v.consts)
            elif isinstance(v, jex.core.Jaxpr):
                yield v, []


def call_body(eqn: Any) -> tuple[Any, list[Any]] | None:
    """``(jaxpr, consts)`` of a call-like equation's body (jit, closed_call, remat,
    custom_jvp/vjp calls), which runs in place on the call's operands; None otherwise."""
    param = _CALL_BODIES.get(eqn.primitive.name)
    if param is None or param not in eqn.params:
        return None
    inner = eqn.params[param]
    return (inner.jaxpr, list(inner.consts)) if hasattr(inner, "consts") else (inner, [])


def equations(jaxpr: Any, *, into: Callable[[Any], bool] = lambda eqn: True) -> Iterator[Any]:
    """Every equation of ``jaxpr`` in order, each followed by those of its sub-jaxprs
    when ``into(eqn)`` is true."""
    for eqn in jaxpr.eqns:
        yield eqn
        if into(eqn):
            for sub, _ in sub_jaxprs(eqn):
                yield from equations(sub, into=into)


def evaluate(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any],
             apply: Callable[[Any, list[Any]], Sequence[Any]], *, literal: Callable[[Any], Any]) -> list[Any]:
    """Run ``jaxpr`` on ``args`` with ``apply(eqn, values) -> outputs`` per equation.

    The values are whatever the caller carries (arrays, (value, origin) pairs...);
    ``literal(var)`` gives the value of a literal operand. Returns the output values.
    """
    from jax.extend.core import DropVar, Literal

    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(v: Any) -> Any:
        return literal(v) if isinstance(v, Literal) else env[v]

    for eqn in jaxpr.eqns:
        outs = apply(eqn, [read(v) for v in eqn.invars])
        for var, out in zip(eqn.outvars, outs, strict=True):
            if not isinstance(var, DropVar):
                env[var] = out
    return [read(v) for v in jaxpr.outvars]


def bind(eqn: Any, args: Sequence[Any], params: Mapping[str, Any] | None = None) -> list[Any]:
    """The outputs of ``eqn``'s primitive applied to ``args`` (with ``params``, default its own)."""
    out = eqn.primitive.bind(*args, **(eqn.params if params is None else params))
    return list(out) if eqn.primitive.multiple_results else [out]


def is_pallas_call(eqn: Any) -> bool:
    """Whether ``eqn`` is a ``pallas_call`` (a kernel with a grid and BlockSpecs)."""
    return eqn.primitive.name == "pallas_call"


def is_kernel(eqn: Any) -> bool:
    """Whether ``eqn`` is a Pallas kernel (a pallas_call, or a kernel over a mesh)."""
    return eqn.primitive.name in ("pallas_call", "core_map") or "meshes" in eqn.params


def kernel_site(eqn: Any) -> str:
    """The lowering a kernel equation asks for: ``"default"`` (a pallas_call without
    ``compiler_params``), ``"mosaic_tpu"``, ``"triton"``, ``"mosaic_gpu"``, or
    ``"unknown:<type>"``."""
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas import triton as pltriton

    meshes = eqn.params.get("meshes") or (eqn.params.get("mesh"),)
    if any(isinstance(m, (plgpu.Mesh, plgpu.WarpMesh)) for m in meshes):
        return "mosaic_gpu"
    if any(isinstance(m, tensorcore_mesh_class()) for m in meshes):
        return "mosaic_tpu"
    params = eqn.params.get("compiler_params")
    kinds = ((pltpu.CompilerParams, "mosaic_tpu"), (pltriton.CompilerParams, "triton"),
             (plgpu.CompilerParams, "mosaic_gpu"))
    if params is None:
        return "default"
    return next((name for cls, name in kinds if isinstance(params, cls)), f"unknown:{type(params).__name__}")


def call_name(eqn: Any) -> str:
    """A kernel equation's function name (its body jaxpr's), else the call's own name."""
    bodies = [eqn.params.get("jaxpr"), *(j for j, _ in sub_jaxprs(eqn))]
    names = [getattr(getattr(b, "debug_info", None), "func_name", None) for b in bodies]
    return next((n for n in names if n), None) or eqn.params.get("name") or eqn.primitive.name


def grid_mapping_class() -> type:
    """jax's own GridMapping class (for introspecting its fields)."""
    from jax._src.pallas import core

    return core.GridMapping


def grid_mapping(eqn: Any) -> GridMapping:
    """What a ``pallas_call`` equation says about its grid, operands and compiler params.

    Raises whatever jax's classes raise when their structure is not the one JAX 0.12
    has (the static check then skips the call, naming the error).
    """
    gm = eqn.params["grid_mapping"]
    blocks = tuple(_block_mapping(bm) for bm in gm.block_mappings)
    params = eqn.params.get("compiler_params")
    if isinstance(params, Mapping):
        params = next(iter(params.values()), None)
    declared = tuple(str(getattr(s, "value", s)) for s in getattr(params, "dimension_semantics", None) or ())
    return GridMapping(
        grid=tuple(gm.grid),
        grid_names=gm.grid_names,
        num_dynamic_grid_bounds=gm.num_dynamic_grid_bounds,
        num_index_operands=gm.num_index_operands,
        num_inputs=gm.num_inputs,
        prefetch_avals=tuple(gm.index_map_avals[len(gm.grid):]),
        vmapped_dims=tuple(gm.vmapped_dims),
        blocks=blocks,
        declared_semantics=declared,
        aliases=tuple(eqn.params.get("input_output_aliases", ())),
        body=eqn.params["jaxpr"],
    )


def kernel_params(body: Any) -> tuple[tuple[str, str, tuple[int, ...], str], ...]:
    """``(name, memory space, shape, dtype)`` of each parameter of a kernel body jaxpr, in
    order (scalar prefetch, inputs, outputs, scratch), named as in the kernel function's
    signature (``arg3`` where the trace kept no name)."""
    names = getattr(getattr(body, "debug_info", None), "arg_names", None) or ()
    params = []
    for i, var in enumerate(body.invars):
        aval = var.aval
        name = names[i] if i < len(names) and names[i] else f"arg{i}"
        space = getattr(aval, "memory_space", None)
        params.append((str(name), str(space) if space is not None else "default",
                       tuple(int(d) for d in getattr(aval, "shape", ())), str(getattr(aval, "dtype", ""))))
    return tuple(params)
def _block_mapping(bm: Any) -> BlockMapping:
    import jax.extend as jex

    mode = bm.pipeline_mode
    revisit = getattr(mode, "revisit", None)
    space = str(getattr(bm.transformed_block_aval, "memory_space", "default"))
    sizes, element_dims, window = _block_dims(tuple(bm.block_shape))
    return BlockMapping(
        array_shape=tuple(int(d) for d in bm.array_aval.shape),
        block_shape=sizes,
        element_dims=element_dims,
        element_window=window,
        memory_space=space,
        index_map=jex.core.ClosedJaxpr(bm.index_map_jaxpr, list(bm.index_map_jaxpr.consts)),
        revisit=None if revisit is None else str(getattr(revisit, "value", revisit)),
        semaphore=_is_semaphore(bm.array_aval.dtype) or space == SEMAPHORE_SPACE,
    )


_PADDING = re.compile(r", padding=\([^)]*\)")


def _block_dims(dims: tuple[Any, ...]) -> tuple[tuple[int, ...], tuple[str, ...], tuple[int | None, ...]]:
    """(block sizes, element dimensions as text, element windows or ``()``) of a
    BlockMapping's per-dimension entries (``pl.Blocked``, ``pl.Squeezed`` or None,
    ``pl.Element``, ``pl.BoundedSlice``, ...): see ``BlockMapping``."""
    from jax.experimental import pallas as pl

    sizes: list[int] = []
    element_dims: list[str] = []
    window: list[int | None] = []
    known = True
    for b in dims:
        if isinstance(b, pl.Blocked):
            sizes.append(int(b.block_size))
            window.append(None)
        elif isinstance(b, pl.Squeezed) or b is None:
            sizes.append(1)
            window.append(None)
        else:  # Element, BoundedSlice, Indirect: windows at element offsets the kernel chooses
            sizes.append(int(getattr(b, "block_size", 1)))
            element_dims.append(_PADDING.sub("", str(b)))
            if isinstance(b, pl.Element):
                window.append(int(b.block_size))
            else:
                known = False
    return tuple(sizes), tuple(element_dims), tuple(window) if known else ()


def _is_semaphore(dtype: Any) -> bool:
    """Whether ``dtype`` is a Pallas semaphore type (regular, DMA or barrier semaphore)."""
    from jax._src.pallas import core as pallas_core

    return isinstance(dtype, pallas_core.AbstractSemaphoreTy)


def index_map_function(closed: Any) -> Any:
    """A pure function of ``(*grid_indices, *prefetch_values)`` for an index-map jaxpr.

    Index maps read scalar-prefetch operands as SMEM refs, indexed with typed-int literals
    (jax's splash attention); evaluating the stateful jaxpr under vmap fails (``Invalid
    type of idxer: TypedInt``), so the refs are discharged into plain arrays first, as
    Pallas's own interpreter does (``BlockMapping.compute_start_indices_interpret``).
    The function returns the block indices followed by the (unchanged) prefetch values.
    """
    import jax.extend as jex
    from jax._src.state import discharge

    strip = {"strip_memory_space": True} if discharge_strips_memory_space() else {}
    return jex.core.jaxpr_as_fun(discharge.discharge_state(closed, **strip))


def written_refs(jaxpr: Any) -> list[Any]:
    """The inputs (vars, or positions) of ``jaxpr`` that it writes or accumulates into.

    JAX 0.10 declares a write to the *source* ref of a remote copy's send wait (it binds
    ``dma_wait`` with source and destination swapped, and its effects did not swap back
    until 0.11, ``versions.swapped_waits_mislabelled``). There, a data ref that a DMA of this
    jaxpr's own equations reads as its source and that only its waits write is not
    counted. (A wait's write of its destination, as a kernel that only waits on a copy
    another call started declares it, is counted on every release.)"""
    from jax._src.state import types as state_types

    kinds = (state_types.WriteEffect, state_types.AccumEffect)
    written = [eff.input for eff in jaxpr.effects if isinstance(eff, kinds)]
    if not swapped_waits_mislabelled():
        return written
    by_others = {eff.input for eqn in jaxpr.eqns if eqn.primitive.name != "dma_wait"
                 for eff in eqn.effects if isinstance(eff, kinds)}
    sources = {eff.input for eqn in jaxpr.eqns if eqn.primitive.name == "dma_start"
               for eff in eqn.effects if isinstance(eff, state_types.ReadEffect)}
    return [ref for ref in written if ref in by_others or ref not in sources or _is_semaphore_ref(ref)]


def _is_semaphore_ref(ref: Any) -> bool:
    aval = getattr(ref, "aval", None)
    return aval is not None and _is_semaphore(getattr(aval, "dtype", None))
