"""Finding the pallas_calls of a kernel and evaluating their index maps (no kernel runs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

__all__ = ["BlockOperand", "PallasCall", "block_indices", "grid_mappings", "grid_points"]

_CALL_LIKE = frozenset(
    {
        "jit",
        "pjit",
        "closed_call",
        "core_call",
        "remat",
        "checkpoint",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
    }
)
_TRANSPARENT = frozenset({"convert_element_type", "copy", "copy_p", "reduce_precision"})
_UNWINDOWED_SPACES = frozenset({"any", "hbm", "semaphore_mem", "host"})
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
      element_window: per dimension, the window size of a pl.Element dimension (whose
        index map gives an element offset) and None for a block dimension; ``()`` when a
        dimension is neither (its elements cannot be located statically).
    """

    name: str
    index: int
    is_output: bool
    array_shape: tuple[int, ...]
    block_shape: tuple[int, ...]
    memory_space: str
    windowed: bool
    index_map: Any
    element_window: tuple[int | None, ...] = ()

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
        consts = list(consts) + [_UNKNOWN] * (len(jaxpr.constvars) - len(consts))
        env = dict(zip(jaxpr.constvars, [(c, None) for c in consts], strict=True))
        env.update(zip(jaxpr.invars, zip(args, origins, strict=True), strict=True))

        def read(v):
            return (v.val, None) if isinstance(v, jex.core.Literal) else env[v]

        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            outs = self.eqn(eqn, [a for a, _ in ins], [o for _, o in ins])
            env.update(zip(eqn.outvars, outs, strict=True))
        result = [read(v) for v in jaxpr.outvars]
        return [a for a, _ in result], [o for _, o in result]

    def eqn(self, eqn, args, origins):
        name = eqn.primitive.name
        if name == "pallas_call":
            position = len(self.calls)
            self.calls.append(_pallas_call(eqn, args, position))
            return [(_UNKNOWN, (position, k)) for k in range(len(eqn.outvars))]
        subs = list(_sub_jaxprs(eqn.params))
        if name in _CALL_LIKE and len(subs) == 1 and len(subs[0][0].invars) == len(args):
            vals, outs = self.walk(*subs[0], args, origins)
            return list(zip(vals, outs, strict=True))
        for sub, consts in subs:
            self.walk(sub, consts, [_UNKNOWN] * len(sub.invars), [None] * len(sub.invars))
        origin = origins[0] if name in _TRANSPARENT else None
        return [(v, origin) for v in self.bind(eqn, args, subs)]

    def bind(self, eqn, args, subs):
        unknown = [_UNKNOWN] * len(eqn.outvars)
        if not self.evaluate or subs or eqn.effects or any(a is _UNKNOWN for a in args):
            return unknown
        try:
            out = eqn.primitive.bind(*args, **eqn.params)
        except Exception:  # a value we cannot compute stays unknown (its use is then skipped)
            return unknown
        return list(out) if eqn.primitive.multiple_results else [out]


def _sub_jaxprs(params: Mapping[str, Any]):
    for value in params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, jex.core.ClosedJaxpr):
                yield v.jaxpr, list(v.consts)
            elif isinstance(v, jex.core.Jaxpr):
                yield v, []


def _pallas_call(eqn, args, position: int) -> PallasCall:
    gm = eqn.params["grid_mapping"]
    body = eqn.params["jaxpr"]
    name = (body.debug_info.func_name if body.debug_info else None) or "pallas_call"
    operands = [_operand(bm, i, gm.num_inputs) for i, bm in enumerate(gm.block_mappings)]
    ins, outs = operands[: gm.num_inputs], operands[gm.num_inputs :]
    needs = any(_reads_prefetch(op.index_map.jaxpr, len(gm.grid)) for op in operands if op.windowed)
    n_dyn = gm.num_dynamic_grid_bounds
    prefetch_args = args[n_dyn : n_dyn + gm.num_index_operands]
    known = all(a is not _UNKNOWN for a in prefetch_args)
    prefetch = tuple(np.asarray(a) for a in prefetch_args) if known else None
    if not needs:
        prefetch = tuple(np.zeros(a.shape, a.dtype) for a in gm.index_map_avals[len(gm.grid) :])
    return PallasCall(
        name=name,
        position=position,
        grid=tuple(gm.grid) if not n_dyn else (),
        grid_names=gm.grid_names,
        semantics=_semantics(eqn.params, gm),
        inputs=tuple(ins),
        outputs=tuple(outs),
        prefetch=prefetch,
        needs_prefetch=needs,
        skip_reason=_call_skip_reason(name, n_dyn, prefetch),
        mutated_inputs=_mutated_inputs(eqn, gm, ins),
        aliased_outputs=tuple(sorted(o for _, o in eqn.params.get("input_output_aliases", ()))),
        aliases=tuple(sorted((i - gm.num_index_operands, o) for i, o in eqn.params.get("input_output_aliases", ()))),
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


def _operand(bm, i: int, num_inputs: int) -> BlockOperand:
    is_output = i >= num_inputs
    index = i - num_inputs if is_output else i
    space = str(getattr(bm.transformed_block_aval, "memory_space", "default"))
    sizes, windowed, elements = [], space not in _UNWINDOWED_SPACES, []
    for b in bm.block_shape:
        if isinstance(b, pl.Blocked):
            sizes.append(int(b.block_size))
            elements.append(None)
        elif isinstance(b, pl.Squeezed) or b is None:
            sizes.append(1)
            elements.append(None)
        else:
            sizes.append(1)
            windowed = False
            elements.append(int(b.block_size) if isinstance(b, pl.Element) else _UNKNOWN)
    return BlockOperand(
        name=f"{'output' if is_output else 'input'} {index}",
        index=index,
        is_output=is_output,
        array_shape=tuple(int(d) for d in bm.array_aval.shape),
        block_shape=tuple(sizes),
        memory_space=space,
        windowed=windowed,
        index_map=jex.core.ClosedJaxpr(bm.index_map_jaxpr, list(bm.index_map_jaxpr.consts)),
        element_window=() if _UNKNOWN in elements else tuple(elements),
    )


def _reads_prefetch(jaxpr, ngrid: int) -> bool:
    prefetch = set(jaxpr.invars[ngrid:])
    used = {v for e in jaxpr.eqns for v in e.invars if not isinstance(v, jex.core.Literal)}
    used |= {v for v in jaxpr.outvars if not isinstance(v, jex.core.Literal)}
    return bool(prefetch & used)


def _semantics(params: Mapping[str, Any], gm) -> tuple[str, ...]:
    cp = params.get("compiler_params")
    if isinstance(cp, Mapping):
        cp = next(iter(cp.values()), None)
    given = list(getattr(cp, "dimension_semantics", None) or ())
    out = []
    for d in range(len(gm.grid)):
        if d in gm.vmapped_dims:
            out.append("parallel")
        else:
            item = given.pop(0) if given else "arbitrary"
            value = str(getattr(item, "value", item))
            out.append("parallel" if "parallel" in value.lower() else "arbitrary")
    return tuple(out)


def _mutated_inputs(eqn, gm, ins: list[BlockOperand]) -> tuple[int, ...]:
    body = eqn.params["jaxpr"]
    aliased = {i for i, _ in eqn.params.get("input_output_aliases", ())}
    refs = body.invars[gm.num_index_operands : gm.num_index_operands + gm.num_inputs]
    written = set()
    for eff in body.effects:
        if type(eff).__name__ in ("WriteEffect", "AccumEffect"):
            target = getattr(eff, "input", getattr(eff, "input_index", None))
            written.add(refs[target] if isinstance(target, int) and target < len(refs) else target)
    return tuple(
        i
        for i, (ref, op) in enumerate(zip(refs, ins, strict=True))
        if ref in written and i + gm.num_index_operands not in aliased and not op.windowed
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
    closed = jax.make_jaxpr(lambda *xs: kernel(*xs, **config))(*avals)
    calls = _Walker(evaluate=False).top(closed, None)
    concrete = not any(isinstance(x, jax.ShapeDtypeStruct) for x in inputs)
    if concrete and any(c.needs_prefetch for c in calls):
        calls = _Walker(evaluate=True).top(closed, [np.asarray(x) for x in inputs])
    return calls


def grid_points(grid: tuple[int, ...]) -> np.ndarray:
    """All points of ``grid`` in row-major order, as an int array of shape (N, len(grid))."""
    if not grid:
        return np.zeros((1, 0), np.int32)
    mesh = np.meshgrid(*[np.arange(n, dtype=np.int32) for n in grid], indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh], axis=1)


def block_indices(call: PallasCall, operand: BlockOperand, points: np.ndarray) -> np.ndarray:
    """The block index ``operand``'s index map gives at each of ``points`` (N, rank)."""
    fn = jex.core.jaxpr_as_fun(operand.index_map)
    ndim = points.shape[1]
    prefetch = call.prefetch or ()

    def at_all(pts, *values):
        refs = [jax.new_ref(v) for v in values]

        def at(p):
            out = fn(*[p[d] for d in range(ndim)], *refs)
            return jnp.stack([jnp.asarray(v, jnp.int32) for v in out])

        return jax.vmap(at)(pts)

    return np.asarray(jax.jit(at_all)(jnp.asarray(points, jnp.int32), *prefetch)).reshape(
        len(points), len(operand.array_shape)
    )
