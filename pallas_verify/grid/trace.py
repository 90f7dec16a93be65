"""Finding the pallas_calls of a kernel and evaluating their index maps (no kernel runs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.extend as jex
import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.grid.dots import dot_roundings
from pallas_verify.grid.points import block_indices, grid_points

__all__ = ["BlockOperand", "PallasCall", "block_indices", "grid_mappings", "grid_points"]

_TRANSPARENT = frozenset({"convert_element_type", "copy", "copy_p", "reduce_precision"})
_UNKNOWN = object()


@dataclasses.dataclass(frozen=True, kw_only=True)
class BlockOperand:
    """One input or output of a pallas_call and its block structure.

    Attributes:
      name: ``"input N"`` or ``"output N"`` (N counts inputs and outputs separately).
      index: N.
      is_output: True for outputs.
      array_shape: the shape of the whole array.
      block_shape: the block's size per dimension (1 for squeezed dimensions).
      memory_space: e.g. ``"default"``, ``"any"``.
      windowed: True when the index map picks aligned blocks (Blocked/Squeezed dims,
        a memory space Pallas pipelines); False for pl.ANY/HBM operands and
        element-offset windows, whose accesses the kernel makes itself.
      index_map: the index map as a ClosedJaxpr of ``*grid_indices, *scalar_prefetch``.
      element_dims: the block dims that index by element offsets or bounded slices
        (``pl.Element``, ``pl.BoundedSlice``, indirect), as text; the static check does
        not judge such windows (the dynamic searches do).
      element_window: per dimension, the window size of a pl.Element dimension (whose
        index map gives an element offset) and None for a block dimension; ``()`` when a
        dimension is neither (its elements cannot be located statically).
      revisit_any: True when its BlockSpec's ``pipeline_mode`` declares
        ``revisit=pl.RevisitMode.ANY``: its blocks may be revisited at any grid step
        (Pallas restores the block's state), so a non-consecutive revisit is no hazard.
      semaphore: True for an operand of semaphores (``pltpu.SEMAPHORE``, a semaphore
        dtype): the kernel signals and waits on it; a wait is no write of data.
    """

    name: str
    index: int
    is_output: bool
    array_shape: tuple[int, ...]
    block_shape: tuple[int, ...]
    memory_space: str
    windowed: bool
    index_map: Any
    element_dims: tuple[str, ...] = ()
    element_window: tuple[int | None, ...] = ()
    revisit_any: bool = False
    semaphore: bool = False

    @property
    def block_counts(self) -> tuple[int, ...]:
        return tuple(-(-a // b) for a, b in zip(self.array_shape, self.block_shape, strict=True))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PallasCall:
    """One pallas_call found in a kernel's jaxpr.

    Attributes:
      name: the kernel function's name.
      position: its index among the kernel's pallas_calls, in execution order.
      grid: the static grid (``()`` when dynamic, see skip_reason).
      grid_names: named grid axes, or None.
      semantics: ``"parallel"`` or ``"arbitrary"`` per grid dimension (core- and
        subcore-parallel count as parallel; dimensions without declared semantics,
        e.g. under Triton compiler params, count as arbitrary).
      inputs, outputs: the block operands.
      prefetch: the scalar-prefetch operands' values, when known.
      needs_prefetch: True when an index map reads scalar-prefetch operands.
      skip_reason: why the grid cannot be evaluated, or None.
      mutated_inputs: indices of un-aliased pl.ANY/HBM inputs the kernel writes.
      aliased_outputs: indices of outputs aliased to an input (input_output_aliases):
        their blocks that no grid point writes keep the input's values.
      produces: ``(kernel output index, call output index)`` pairs for the kernel's
        outputs this call produces directly (through jit and dtype casts).
      aliases: ``(input index, output index)`` pairs of input_output_aliases (indices into
        ``inputs`` and ``outputs``).
      params: ``(name, memory space, shape, dtype)`` of each parameter of the kernel
        function (scalar prefetch, inputs, outputs, scratch), named as in its signature.
      num_prefetch: how many of ``params`` are scalar-prefetch operands.
      lowering: the lowering its compiler params ask for (``"default"``, ``"mosaic_tpu"``,
        ``"triton"``, ...; see ``_jax_compat.kernel_site``), ``""`` when unknown.
      discarded: indices of outputs the jaxpr holding the call never uses (the wrapper
        drops them: what is written there reaches no result).
      dot_roundings: the narrow float dtypes its body rounds dot operands to (``grid.dots``).
    """

    name: str
    position: int
    grid: tuple[int, ...]
    grid_names: tuple[Any, ...] | None
    semantics: tuple[str, ...]
    inputs: tuple[BlockOperand, ...]
    outputs: tuple[BlockOperand, ...]
    prefetch: tuple[np.ndarray, ...] | None
    needs_prefetch: bool
    skip_reason: str | None
    mutated_inputs: tuple[int, ...]
    aliased_outputs: tuple[int, ...] = ()
    produces: tuple[tuple[int, int], ...] = ()
    aliases: tuple[tuple[int, int], ...] = ()
    params: tuple[tuple[str, str, tuple[int, ...], str], ...] = ()
    num_prefetch: int = 0
    lowering: str = ""
    discarded: tuple[int, ...] = ()
    dot_roundings: tuple[str, ...] = ()

    def output_for(self, kernel_output: int) -> BlockOperand | None:
        for k, c in self.produces:
            if k == kernel_output:
                return self.outputs[c]
        return None


class _Walker:
    """Walks a jaxpr in execution order, recording pallas_calls and where outputs come from."""

    def __init__(self, *, evaluate: bool) -> None:
        self.evaluate = evaluate
        self.calls: list[PallasCall] = []
        self.unused: dict[int, tuple[int, ...]] = {}  # id(eqn) -> its outputs its jaxpr never uses

    def top(self, closed: Any, args: list[Any] | None) -> list[PallasCall]:
        args = args if args is not None else [_UNKNOWN] * len(closed.jaxpr.invars)
        _, origins = self.walk(closed.jaxpr, closed.consts, args, [None] * len(args))
        produces: dict[int, list[tuple[int, int]]] = {}
        for k, origin in enumerate(origins):
            if origin is not None:
                produces.setdefault(origin[0], []).append((k, origin[1]))
        return [
            dataclasses.replace(c, produces=tuple(produces.get(c.position, ()))) for c in self.calls
        ]

    def walk(self, jaxpr, consts, args, origins):
        self.unused.update(_unused_outputs(jaxpr))
        consts = list(consts) + [_UNKNOWN] * (len(jaxpr.constvars) - len(consts))
        result = _jax_compat.evaluate(
            jaxpr, [(c, None) for c in consts], list(zip(args, origins, strict=True)),
            lambda eqn, ins: self.eqn(eqn, [a for a, _ in ins], [o for _, o in ins]),
            literal=lambda v: (v.val, None),
        )
        return [a for a, _ in result], [o for _, o in result]

    def eqn(self, eqn, args, origins):
        name = eqn.primitive.name
        if _jax_compat.is_pallas_call(eqn):
            position = len(self.calls)
            call = _pallas_call_or_skip(eqn, args, position)
            self.calls.append(dataclasses.replace(call, discarded=self.unused.get(id(eqn), ())))
            return [(_UNKNOWN, (position, k)) for k in range(len(eqn.outvars))]
        if name in _jax_compat.GRIDLESS_KERNELS:
            self.calls.append(_gridless(eqn, len(self.calls)))
            return [(_UNKNOWN, None) for _ in eqn.outvars]
        body = _jax_compat.call_body(eqn)
        if body is not None and len(body[0].invars) == len(args):
            vals, outs = self.walk(*body, args, origins)
            return list(zip(vals, outs, strict=True))
        subs = list(_jax_compat.sub_jaxprs(eqn))
        for sub, consts in subs:
            self.walk(sub, consts, [_UNKNOWN] * len(sub.invars), [None] * len(sub.invars))
        origin = origins[0] if name in _TRANSPARENT else None
        return [(v, origin) for v in self.bind(eqn, args, subs)]

    def bind(self, eqn, args, subs):
        unknown = [_UNKNOWN] * len(eqn.outvars)
        if not self.evaluate or subs or eqn.effects or any(a is _UNKNOWN for a in args):
            return unknown
        try:
            return _jax_compat.bind(eqn, args)
        except Exception:  # a value we cannot compute stays unknown (its use is then skipped)
            return unknown


def _unused_outputs(jaxpr: Any) -> dict[int, tuple[int, ...]]:
    """Per pallas_call equation of ``jaxpr`` (by id), the outputs that no later equation
    and no output of ``jaxpr`` uses (dropped, or bound to a var nothing reads)."""
    used = {id(v) for eqn in jaxpr.eqns for v in eqn.invars} | {id(v) for v in jaxpr.outvars}
    return {id(eqn): tuple(k for k, v in enumerate(eqn.outvars) if id(v) not in used)
            for eqn in jaxpr.eqns if _jax_compat.is_pallas_call(eqn)}


def _unanalysed(name: str, position: int, reason: str) -> PallasCall:
    """A call the static check cannot analyse: only its name and the reason are known."""
    return PallasCall(name=name, position=position, grid=(), grid_names=None, semantics=(), inputs=(),
                      outputs=(), prefetch=None, needs_prefetch=False, skip_reason=reason, mutated_inputs=())


def _gridless(eqn, position: int) -> PallasCall:
    name = _jax_compat.call_name(eqn)
    return _unanalysed(name, position, (
        f"it is a pl.kernel/core_map kernel ({eqn.primitive.name}), which has no grid or BlockSpecs "
        "to check statically; its memory accesses are checked by the dynamic searches"))


def _pallas_call_or_skip(eqn, args, position: int) -> PallasCall:
    try:
        return _pallas_call(eqn, args, position)
    except Exception as exc:  # a structure this version does not understand: skip it, say why
        return _unanalysed(_jax_compat.call_name(eqn), position,
                           f"its grid mapping could not be read ({type(exc).__name__}: {exc})")


def _pallas_call(eqn, args, position: int) -> PallasCall:
    gm = _jax_compat.grid_mapping(eqn)
    name = _jax_compat.call_name(eqn)
    operands = [_operand(bm, i, gm.num_inputs) for i, bm in enumerate(gm.blocks)]
    ins, outs = operands[: gm.num_inputs], operands[gm.num_inputs :]
    needs = any(_reads_prefetch(op.index_map.jaxpr, len(gm.grid)) for op in operands if op.windowed)
    n_dyn = gm.num_dynamic_grid_bounds
    prefetch_args = args[n_dyn : n_dyn + gm.num_index_operands]
    known = all(a is not _UNKNOWN for a in prefetch_args)
    prefetch = tuple(np.asarray(a) for a in prefetch_args) if known else None
    if not needs:
        prefetch = tuple(np.zeros(a.shape, a.dtype) for a in gm.prefetch_avals)
    return PallasCall(
        name=name,
        position=position,
        grid=gm.grid if not n_dyn else (),
        grid_names=gm.grid_names,
        semantics=_semantics(gm),
        inputs=tuple(ins),
        outputs=tuple(outs),
        prefetch=prefetch,
        needs_prefetch=needs,
        skip_reason=_call_skip_reason(name, n_dyn, prefetch),
        mutated_inputs=_mutated_inputs(gm, ins),
        aliased_outputs=tuple(sorted(o for _, o in gm.aliases)),
        aliases=tuple(sorted((i - gm.num_index_operands, o) for i, o in gm.aliases)),
        params=_jax_compat.kernel_params(gm.body),
        num_prefetch=gm.num_index_operands,
        lowering=_jax_compat.kernel_site(eqn),
        dot_roundings=dot_roundings(gm.body),
    )


def _call_skip_reason(name: str, n_dyn: int, prefetch) -> str | None:
    if n_dyn:
        return f"{name} has a dynamic grid; its index maps cannot be enumerated statically"
    if prefetch is None:
        return (
            f"the index maps of {name} read scalar-prefetch operands whose values are unknown; "
            "pass concrete input arrays (not ShapeDtypeStructs) so they can be computed"
        )
    return None


def _operand(bm: _jax_compat.BlockMapping, i: int, num_inputs: int) -> BlockOperand:
    is_output = i >= num_inputs
    index = i - num_inputs if is_output else i
    space = bm.memory_space
    return BlockOperand(
        name=f"{'output' if is_output else 'input'} {index}",
        index=index,
        is_output=is_output,
        array_shape=bm.array_shape,
        block_shape=bm.block_shape,
        memory_space=space,
        windowed=space not in _jax_compat.UNWINDOWED_SPACES and not bm.element_dims,
        index_map=bm.index_map,
        element_dims=bm.element_dims,
        element_window=bm.element_window,
        revisit_any=bm.revisit == "any",
        semaphore=bm.semaphore,
    )


def _reads_prefetch(jaxpr, ngrid: int) -> bool:
    prefetch = set(jaxpr.invars[ngrid:])
    used = {v for e in jaxpr.eqns for v in e.invars if not isinstance(v, jex.core.Literal)}
    used |= {v for v in jaxpr.outvars if not isinstance(v, jex.core.Literal)}
    return bool(prefetch & used)


def _semantics(gm: _jax_compat.GridMapping) -> tuple[str, ...]:
    given = list(gm.declared_semantics)
    out = []
    for d in range(len(gm.grid)):
        if d in gm.vmapped_dims:
            out.append("parallel")
        else:
            value = given.pop(0) if given else "arbitrary"
            out.append("parallel" if "parallel" in value.lower() else "arbitrary")
    return tuple(out)


def _mutated_inputs(gm: _jax_compat.GridMapping, ins: list[BlockOperand]) -> tuple[int, ...]:
    body = gm.body
    aliased = {i for i, _ in gm.aliases}
    refs = body.invars[gm.num_index_operands : gm.num_index_operands + gm.num_inputs]
    written = {refs[t] if isinstance(t, int) and t < len(refs) else t for t in _jax_compat.written_refs(body)}
    return tuple(
        i
        for i, (ref, op) in enumerate(zip(refs, ins, strict=True))
        if ref in written and i + gm.num_index_operands not in aliased and not op.windowed and not op.semaphore
    )


def grid_mappings(
    kernel: Callable[..., Any], inputs: Sequence[Any], config: Mapping[str, Any]
) -> list[PallasCall]:
    """Every pallas_call of ``kernel(*inputs, **config)``, in execution order.

    ``inputs`` may be arrays (then scalar-prefetch operands are computed, so index maps
    that read them can be evaluated) or ``jax.ShapeDtypeStruct``s (then such index maps
    are skipped with a reason).
    """
    avals = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in inputs]
    with _jax_compat.gpu_device_facts():  # a GPU kernel may size its grid by the SM count
        closed = jax.make_jaxpr(lambda *xs: kernel(*xs, **config))(*avals)
    calls = _Walker(evaluate=False).top(closed, None)
    concrete = not any(isinstance(x, jax.ShapeDtypeStruct) for x in inputs)
    if concrete and any(c.needs_prefetch for c in calls):
        calls = _Walker(evaluate=True).top(closed, [np.asarray(x) for x in inputs])
    return calls
