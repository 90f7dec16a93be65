"""Planted interpreter bugs by class, for measuring backend conformance. Tests only.

Each bug re-plants, against the installed JAX's public behaviour, one of the classes of
bugs JAX's Pallas interpreters and ``pallas_call`` machinery really had:

1. ``input_output_aliases`` across grid steps (reads through the aliased input of what an
   earlier step wrote, scalar-prefetch operands before the aliased one);
2. ``jax.vmap`` of a kernel: the batching rule (an aliased input batched on another axis
   than its output);
3. windows that overhang their ref: a masked ``pltpu.load`` / ``pltpu.store`` of a
   ``pl.ds`` window past the ref's end, read or written at a clamped (shifted) start;
4. what a sanitizer sees: outputs that start at zero instead of the poison value, so a
   kernel that reads its output before writing it looks correct.

``planted(name)`` (as in ``_mutants.py``) patches the code while the context is open, jax's
caches cleared around it. ``test_classes.py`` shows each bug live on a hand-written kernel;
``benchmarks/conformance_kills.py`` measures which campaign kills it and how fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax.numpy as jnp
from jax._src.pallas import hlo_interpreter, pallas_call
from jax._src.pallas import primitives as pallas_primitives
from jax._src.pallas.mosaic.interpret import interpret_pallas_call as tpu_interpret
from jax._src.pallas.mosaic.interpret import utils as interpret_utils

from ._mutants import _swapped

# -- class 1: aliasing across grid steps --------------------------------------------------


def _alias_sync_by_operand_index() -> Any:
    """The HLO interpreter's run with one line changed: after each grid step it syncs the
    aliased output into the input's carry slot found by the alias's operand index, not
    its index among the blocked inputs (off by the scalar-prefetch operands): with a
    scalar-prefetch table the next input's slot is overwritten with the output, so later
    steps read, through that input, what earlier steps wrote (or the aliased input)."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(hlo_interpreter.pallas_call_hlo_interpret))
    line = "in_idx_adj = in_idx - len(scalars)"
    assert source.count(line) == 1, "the installed JAX's HLO interpreter no longer syncs aliases this way"
    namespace = dict(vars(hlo_interpreter))
    exec(compile(source.replace(line, "in_idx_adj = in_idx"), hlo_interpreter.__file__, "exec"), namespace)
    return namespace["pallas_call_hlo_interpret"]


# -- class 2: the batching rule -------------------------------------------------------------


def _aliased_batch_axis_kept(args: Any, dims: Any, *, input_output_aliases: Any, axis_size: int) -> Any:
    """An aliased input batched on a non-zero axis is declared batched on axis 0 without
    moving its batch axis there."""
    args_, dims_ = list(args), list(dims)
    for index, _ in input_output_aliases:
        if dims_[index] is None:
            return _ORIGINAL["broadcast"](args, dims, input_output_aliases=input_output_aliases, axis_size=axis_size)
        dims_[index] = 0
    return tuple(args_), tuple(dims_)


def _batch_index_in_front(grid_mapping: Any, axis_size: int, aval: Any, dim: Any, block_mapping: Any) -> Any:
    """A batched operand's index map puts the batch index first whatever its batch axis
    (its block shape puts the batch axis where it belongs): an operand batched on a
    non-zero axis reads the wrong blocks."""
    from jax._src import core as jax_core
    from jax._src import tree_util
    from jax._src.interpreters import partial_eval as pe
    from jax._src.pallas import core as pallas_core

    def block_map(new_idx: Any, *args: Any) -> tuple:
        indices = jax_core.eval_jaxpr(block_mapping.index_map_jaxpr, block_mapping.index_map_jaxpr.consts, *args)
        unflat = tree_util.tree_unflatten(block_mapping.index_map_out_tree, indices)
        unflat = list(unflat if isinstance(unflat, tuple) else (unflat,))
        if dim is not None:
            unflat.insert(0, new_idx)  # the bug: at dim
        return tuple(unflat)

    if dim is None or dim == 0:
        return _ORIGINAL["batch_block"](grid_mapping, axis_size, aval, dim, block_mapping)
    avals = [pallas_core.index_map_grid_aval, *block_mapping.index_map_jaxpr.in_avals]
    with grid_mapping.trace_env():
        jaxpr, out_avals = pe.trace_to_jaxpr(block_map, pallas_call.ft.flatten_args(*avals),
                                             block_mapping.index_map_jaxpr.debug_info.with_unknown_names())
    shape = pallas_call.tuple_insert(block_mapping.block_shape, dim, pallas_core.squeezed)
    array = jax_core.ShapedArray(pallas_call.tuple_insert(block_mapping.array_aval.shape, dim, axis_size),
                                 block_mapping.array_aval.dtype)
    return block_mapping.replace(block_shape=shape, array_aval=array, index_map_jaxpr=jaxpr,
                                 index_map_out_tree=out_avals.tree)


# -- class 3: windows that overhang the ref -------------------------------------------------


def _unpadded(value: Any, slice_sizes: Any, unpad: bool = False) -> Any:
    """No padding before a masked window's ``dynamic_slice``: a window that runs past the
    end of the ref is clamped, and reads or writes rows shifted back."""
    return value


# -- class 4: the poison value --------------------------------------------------------------


def _outputs_start_at_zero(block_mappings_output: Any, input_args: Any, input_output_aliases: Any) -> Any:
    """The HLO interpreter starts outputs at zero instead of NaN / the integer minimum."""
    outs = _ORIGINAL["hlo_init"](block_mappings_output, input_args, input_output_aliases)
    aliased = {o for _, o in input_output_aliases}
    return [x if i in aliased else jnp.zeros_like(x) for i, x in enumerate(outs)]


def _poison_is_zero(dtype: Any, uninitialized_memory: str) -> Any:
    """TPU interpret mode fills uninitialized memory with zeros whatever it is asked."""
    return _ORIGINAL["tpu_fill"](dtype, "zero")


_ORIGINAL: dict[str, Any] = {
    "hlo_init": hlo_interpreter._initialize_output_vals,
    "broadcast": pallas_call._broadcast_input_output_aliases,
    "batch_block": pallas_call._batch_block_mapping,
    "tpu_fill": interpret_utils.get_uninitialized_value,
}


@contextlib.contextmanager
def _window_clamped() -> Iterator[None]:
    with _swapped(pallas_primitives, "_pad_values_to_avoid_dynamic_slice_oob_shift", _unpadded), \
            _swapped(pallas_primitives, "_unpad_values_to_avoid_dynamic_slice_oob_shift", _unpadded):
        yield


@dataclasses.dataclass(frozen=True)
class ClassBug:
    """A planted bug: its class (1-4), the interpreter it lives in, where, and its patch."""

    cls: int
    backend: str  # "interpret", "tpu_interpret" or "both"
    where: str
    patch: Callable[[], contextlib.AbstractContextManager[None]]


def _attr(owner: Any, attr: str, value: Any) -> Callable[[], contextlib.AbstractContextManager[None]]:
    return lambda: _swapped(owner, attr, value)


BUGS: dict[str, ClassBug] = {
    "alias_sync_by_operand_index": ClassBug(1, "interpret", "syncing aliased carries across grid steps "
                                            "(pallas_call_hlo_interpret)",
                                            lambda: _swapped(hlo_interpreter, "pallas_call_hlo_interpret",
                                                             _alias_sync_by_operand_index())),
    "vmap_aliased_axis_not_moved": ClassBug(2, "both", "the batching rule's aliases "
                                            "(_broadcast_input_output_aliases)",
                                            _attr(pallas_call, "_broadcast_input_output_aliases",
                                                  _aliased_batch_axis_kept)),
    "vmap_batch_index_in_front": ClassBug(2, "both", "the batching rule's index maps (_batch_block_mapping)",
                                          _attr(pallas_call, "_batch_block_mapping", _batch_index_in_front)),
    "masked_window_start_clamped": ClassBug(3, "interpret", "discharge of masked windows "
                                            "(_pad_values_to_avoid_dynamic_slice_oob_shift)", _window_clamped),
    "outputs_start_at_zero": ClassBug(4, "interpret", "outputs' first value (_initialize_output_vals)",
                                      _attr(hlo_interpreter, "_initialize_output_vals", _outputs_start_at_zero)),
    "poison_fill_is_zero": ClassBug(4, "tpu_interpret", "the uninitialized fill (utils.get_uninitialized_value)",
                                    _attr(interpret_utils, "get_uninitialized_value", _poison_is_zero)),
}
del tpu_interpret  # imported for its side effect: interpret mode's modules loaded before patching


def planted(name: str) -> contextlib.AbstractContextManager[None]:
    """Run the interpreters with bug ``name`` planted; caches cleared around it."""
    from tests.campaigns.smith._mutants import planting

    return planting(BUGS[name].patch())
