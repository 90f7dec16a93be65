"""Planted interpreter bugs: a small wrong rule in the HLO interpreter (``interpret=True``)
or in TPU interpret mode, for measuring whether smith campaigns find backend bugs. Tests only.

``planted(name)`` patches one part of the interpreters' code while the context is open
(jax's caches are cleared around it, so every kernel is traced again with the bug); the
reference (plain ``jax.jit``) is untouched. Each ``Mutant`` says which interpreter it
lives in and where; ``test_mutants.py`` shows each one live on a hand-written kernel.

The first four replace one primitive's rule in every kernel body the HLO interpreter
evaluates (``hlo_interpreter.kernel_to_hlo_jaxpr`` re-traced with ``RULES[name]``); the
others patch the interpreters' own machinery: grid stepping, padding of ragged arrays,
scalar prefetch, the discharge of masked and strided refs, TPU interpret mode's block
copies, DMA engine, semaphores, masked stores, strided ranges and cores, and the
lowering of ``pltpu.roll``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.pallas import core as pallas_core
from jax._src.pallas import hlo_interpreter
from jax._src.pallas import primitives as pallas_primitives
from jax._src.pallas.mosaic import primitives as tpu_primitives
from jax._src.pallas.mosaic.interpret import interpret_pallas_call as tpu_interpret
from jax._src.pallas.mosaic.interpret import shared_memory, thread_map
from jax._src.pallas.mosaic.interpret import utils as interpret_utils
from jax._src.state import discharge as state_discharge

Rule = Callable[[Any, list[Any]], list[Any] | None]


# -- rules for primitives of the HLO interpreter's kernel bodies ---------------------------


def _iota_wrong_axis(eqn: Any, args: list[Any]) -> list[Any] | None:
    """An iota along the wrong axis for rank 3."""
    if eqn.primitive.name != "iota" or len(eqn.params["shape"]) != 3:
        return None
    params = dict(eqn.params, dimension=(eqn.params["dimension"] + 1) % 3)
    return [eqn.primitive.bind(*args, **params)]


def _max_identity_int(eqn: Any, args: list[Any]) -> list[Any] | None:
    """reduce_max over int32 with identity 0 instead of the int32 minimum."""
    if eqn.primitive.name != "reduce_max" or args[0].dtype != jnp.int32:
        return None
    return [jnp.maximum(eqn.primitive.bind(*args, **eqn.params), 0)]


def _cast_truncates(eqn: Any, args: list[Any]) -> list[Any] | None:
    """float32 -> bfloat16 conversion that truncates instead of rounding to nearest even."""
    if (eqn.primitive.name != "convert_element_type" or args[0].dtype != jnp.float32
            or eqn.params["new_dtype"] != jnp.bfloat16):
        return None
    bits = lax.bitcast_convert_type(args[0], jnp.uint32) & jnp.uint32(0xFFFF0000)
    return [lax.convert_element_type(lax.bitcast_convert_type(bits, jnp.float32), jnp.bfloat16)]


def _select_ignores_other(eqn: Any, args: list[Any]) -> list[Any] | None:
    """A masked select (``jnp.where``) that ignores its ``other`` value where the mask is
    off when that value is a fill (a zero, as masks of padding use): the masked-load bug."""
    if eqn.primitive.name != "select_n" or len(args) != 3 or not eqn.invars[1].aval.shape:
        return None
    return [jnp.where(args[0], args[2], jnp.where(args[1] == 0, args[2], args[1]))]


RULES: dict[str, Rule] = {
    "iota_wrong_axis_rank3": _iota_wrong_axis,
    "reduce_max_int32_identity": _max_identity_int,
    "cast_f32_bf16_truncates": _cast_truncates,
    "masked_select_ignores_other": _select_ignores_other,
}


def _evaluate(jaxpr: Any, consts: list[Any], args: list[Any], rule: Rule) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if type(v).__name__ == "Literal" else env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = rule(eqn, ins)
        if outs is None:
            params = {k: _retraced(v, rule) for k, v in eqn.primitive.get_bind_params(eqn.params).items()}
            result = eqn.primitive.bind(*ins, **params)
            outs = result if eqn.primitive.multiple_results else [result]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _retraced(value: Any, rule: Rule) -> Any:
    """Sub-jaxprs (``jit`` bodies such as ``jnp.where``'s, loop bodies, ``pl.when``
    branches) with the rule planted too. JAX 0.12 has no ``ClosedJaxpr`` class: a closed
    jaxpr is a ``core.Jaxpr`` carrying ``consts`` and ``in_avals``, recognised by those."""
    if type(value) is tuple:  # not a NamedTuple parameter such as gather's dimension numbers
        return tuple(_retraced(v, rule) for v in value)
    if not all(hasattr(value, a) for a in ("jaxpr", "consts", "in_avals")):  # a closed jaxpr (JAX 0.12: core.Jaxpr)
        return value
    inner, consts = value.jaxpr, list(value.consts)
    return jax.make_jaxpr(lambda *xs: _evaluate(inner, consts, list(xs), rule))(*value.in_avals)


@contextlib.contextmanager
def _rule(name: str) -> Iterator[None]:
    rule, original = RULES[name], hlo_interpreter.kernel_to_hlo_jaxpr

    def mutated(jaxpr: Any, consts: Any, grid_mapping: Any) -> Any:
        closed, _, scratch = original(jaxpr, consts, grid_mapping)
        inner = getattr(closed, "jaxpr", closed)
        inner_consts = list(getattr(closed, "consts", []))
        avals = [v.aval for v in inner.invars]
        with grid_mapping.trace_env():
            new = jax.make_jaxpr(lambda *xs: _evaluate(inner, inner_consts, list(xs), rule))(*avals)
        return new, new.consts, scratch

    with _swapped(hlo_interpreter, "kernel_to_hlo_jaxpr", mutated):
        yield


@contextlib.contextmanager
def _swapped(owner: Any, attr: str, value: Any) -> Iterator[None]:
    original = getattr(owner, attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        setattr(owner, attr, original)


# -- the HLO interpreter's own machinery ---------------------------------------------------


def _first_axis_fastest(grid: Any, indices: Any) -> tuple[Any, ...]:
    """Grid stepping with the first axis fastest (the last is meant to be)."""
    if len(grid) < 2:
        return _ORIGINAL["hlo_next"](grid, indices)
    return tuple(reversed(_ORIGINAL["hlo_next"](tuple(reversed(grid)), tuple(reversed(indices)))))


def _pad_last_dim_only(value: Any, block_shape: tuple[int, ...]) -> Any:
    """Ragged arrays padded to whole blocks along their last dim only: a partial block
    along another dim is read and written by a clamped ``dynamic_slice``, shifted back."""
    block = (*value.shape[:-1], block_shape[-1]) if value.ndim else block_shape
    return _ORIGINAL["hlo_pad"](value, block)


def _table_reversed(self: Any, loop_idx: Any, *args: Any) -> Any:
    """Index maps see the scalar-prefetch operands reversed."""
    args = tuple(jnp.flip(a) if getattr(a, "ndim", 0) == 1 else a for a in args)
    return _ORIGINAL["hlo_start"](self, loop_idx, *args)


def _mask_one_lane_off(ctx: Any, *args_flat: Any, args_tree: Any, **params: Any) -> Any:
    """A masked store (``pltpu.store(..., mask=)``) discharged with its mask one lane off."""
    ref, transforms, val, mask = args_tree.unflatten(args_flat)
    if mask is not None:
        mask = jnp.roll(mask, 1, axis=-1)
    flat = jax.tree_util.tree_leaves((ref, transforms, val, mask))
    return _ORIGINAL["swap_discharge"](ctx, *flat, args_tree=args_tree, **params)


def _strided_start_dropped(indexer: Any) -> tuple[Any, ...]:
    """The gather of a strided ``pl.ds`` starts at 0 instead of its start."""
    from jax._src.state import indexing

    stripped = [dataclasses.replace(i, start=0) if isinstance(i, indexing.Slice) and i.stride > 1 else i
                for i in indexer.indices]
    return _ORIGINAL["gather"](dataclasses.replace(indexer, indices=tuple(stripped)))


def _roll_negated(ctx: Any, x: Any, shift: Any, *, axis: int, stride: Any, stride_axis: Any) -> Any:
    """``pltpu.roll`` lowered with its shift negated (``jnp.roll`` the other way)."""
    from jax._src.interpreters import mlir

    return mlir.lower_fun(lambda x, shift: jnp.roll(x, -shift, axis), multiple_results=False)(ctx, x, shift)


# -- TPU interpret mode's machinery --------------------------------------------------------


class _LeadingOnly:
    """``jax`` for TPU interpret mode's copies of blocks in and out: whether a block changed
    from one step to the next is decided on its leading start index only."""

    class _Lax:
        def __getattr__(self, name: str) -> Any:
            return getattr(jax.lax, name)

        @staticmethod
        def reduce_or(x: Any, axes: Any) -> Any:
            return x[0]

    lax = _Lax()

    def __getattr__(self, name: str) -> Any:
        return getattr(jax, name)


def _dma_write_at_zero(self: Any) -> None:
    """A DMA writes its data at the start of its destination, whatever the destination slice."""
    from jax._src.state import indexing

    self.dst_transforms = tuple(
        dataclasses.replace(t, indices=tuple(dataclasses.replace(i, start=0) if isinstance(i, indexing.Slice) else i
                                             for i in t.indices)) if isinstance(t, indexing.NDIndexer) else t
        for t in self.dst_transforms)
    return _ORIGINAL["dma_write"](self)


def _signals_twice(self: Any) -> int:
    """A DMA signals its semaphore with twice the bytes it copied."""
    return 2 * self.data.itemsize * self.data.size


def _first_row_mask(self: Any, key: Any, rnge: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
    """A masked store applies its mask's first row to every row."""
    if mask is not None and mask.ndim >= 2:
        mask = np.broadcast_to(mask[..., :1, :], mask.shape).copy()
    return _ORIGINAL["swap"](self, key, rnge, value, mask, *args, **kwargs)


def _stride_dropped(slice_or_idx: Any) -> Any:
    """A strided ``pl.ds`` read or written as a contiguous range."""
    if isinstance(slice_or_idx, int):
        return slice_or_idx
    start, size = int(slice_or_idx.start), int(slice_or_idx.size)
    return slice(start, start + size, 1)


def _only_core_zero_runs(jaxpr: Any, token: Any, device_id: Any, num_threads: Any, consts: Any, invals: Any, *,
                         on_exception: Any) -> Any:
    """Of the cores of a device only the first runs its share of the grid (the others'
    threads are never started): their output blocks are never written."""
    consts = jax.tree.map(np.array, consts)
    invals = jax.tree.map(np.array, invals)
    flat, _ = jax.tree.flatten((jnp.int32(0), *invals))
    thread_map._run_jaxpr(jaxpr, consts, *flat)
    return token


_ORIGINAL: dict[str, Any] = {
    "hlo_next": hlo_interpreter._get_next_indices, "hlo_pad": hlo_interpreter._pad_to_block_dimension,
    "hlo_start": pallas_core.BlockMapping.compute_start_indices_interpret,
    "swap_discharge": state_discharge._discharge_rules[pallas_primitives.swap_p],
    "gather": state_discharge._convert_to_gather_arrays, "dma_write": tpu_interpret.DMA.execute_write,
    "swap": shared_memory.SharedMemory.swap_buffer_content,
}


@contextlib.contextmanager
def _roll_lowering() -> Iterator[None]:
    from jax._src.interpreters import mlir

    mlir.register_lowering(tpu_primitives.roll_p, _roll_negated)
    try:
        yield
    finally:
        mlir.register_lowering(tpu_primitives.roll_p, tpu_primitives._roll_lowering_rule)


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A planted bug: the interpreter it lives in, the part of its code, and its patch."""

    backend: str  # "interpret", "tpu_interpret", or "both" (code both interpreters run)
    where: str
    patch: Callable[[], contextlib.AbstractContextManager[None]]


def _attr(owner: Any, attr: str, value: Any) -> Callable[[], contextlib.AbstractContextManager[None]]:
    return lambda: _swapped(owner, attr, value)


MUTANTS: dict[str, Mutant] = {
    **{name: Mutant("interpret", "the rule of one primitive in kernel bodies", lambda name=name: _rule(name))
       for name in RULES},
    "grid_first_axis_fastest": Mutant("interpret", "grid stepping (_get_next_indices)",
                                      _attr(hlo_interpreter, "_get_next_indices", _first_axis_fastest)),
    "ragged_padding_last_dim_only": Mutant("interpret", "padding of ragged arrays (_pad_to_block_dimension)",
                                           _attr(hlo_interpreter, "_pad_to_block_dimension", _pad_last_dim_only)),
    "scalar_prefetch_reversed": Mutant("interpret", "index maps' scalar-prefetch operands "
                                       "(BlockMapping.compute_start_indices_interpret)",
                                       _attr(pallas_core.BlockMapping, "compute_start_indices_interpret",
                                             _table_reversed)),
    "masked_store_mask_one_lane_off": Mutant("interpret", "discharge of masked stores (masked_swap)",
                                             lambda: _swapped_rule(pallas_primitives.swap_p, _mask_one_lane_off)),
    "strided_gather_from_zero": Mutant("interpret", "discharge of strided refs (_convert_to_gather_arrays)",
                                       _attr(state_discharge, "_convert_to_gather_arrays", _strided_start_dropped)),
    "roll_shift_negated": Mutant("both", "the lowering of pltpu.roll", _roll_lowering),
    "block_change_leading_dim_only": Mutant("tpu_interpret", "copying blocks in and out between grid steps",
                                            _attr(tpu_interpret, "jax", _LeadingOnly())),
    "dma_writes_at_offset_zero": Mutant("tpu_interpret", "the DMA engine (DMA.execute_write)",
                                        _attr(tpu_interpret.DMA, "execute_write", _dma_write_at_zero)),
    "dma_signals_twice": Mutant("tpu_interpret", "DMA semaphore counts (DMA.data_size)",
                                _attr(tpu_interpret.DMA, "data_size", property(_signals_twice))),
    "masked_store_first_row_mask": Mutant("tpu_interpret", "masked stores (SharedMemory.swap_buffer_content)",
                                          _attr(shared_memory.SharedMemory, "swap_buffer_content", _first_row_mask)),
    "strided_range_contiguous": Mutant("tpu_interpret", "ref ranges (utils._transform_slice_or_index)",
                                       _attr(interpret_utils, "_transform_slice_or_index", _stride_dropped)),
    "second_core_never_runs": Mutant("tpu_interpret", "running the grid on several cores (thread_map)",
                                     _attr(thread_map, "_thread_map_callback", _only_core_zero_runs)),
}


@contextlib.contextmanager
def _swapped_rule(primitive: Any, rule: Any) -> Iterator[None]:
    with _swapped_item(state_discharge._discharge_rules, primitive, rule):
        yield


@contextlib.contextmanager
def _swapped_item(table: dict[Any, Any], key: Any, value: Any) -> Iterator[None]:
    original = table[key]
    table[key] = value
    try:
        yield
    finally:
        table[key] = original


def planted(name: str) -> contextlib.AbstractContextManager[None]:
    """Run the interpreters with mutant ``name`` planted; caches cleared around it."""
    return planting(MUTANTS[name].patch())


@contextlib.contextmanager
def planting(patch: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    """Run the interpreters under ``patch`` (a planted bug), compiled caches cleared around
    it so that nothing compiled without it (or with it) is reused."""
    from pallas_verify.backends import execute

    def clear() -> None:
        execute._JIT_CACHE.clear()
        jax.clear_caches()

    clear()
    try:
        with patch:
            yield
    finally:
        clear()
