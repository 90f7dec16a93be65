"""Each planted bug of ``_classes.py`` shown live on a hand-written kernel: the unmodified
interpreter does what the kernel means (or, for the poison, shows the read it must show),
the planted one does not, and lifting the bug restores it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ._classes import BUGS, planted

_X = (np.arange(16 * 128, dtype=np.int32).reshape(16, 128) % 97 - 40).astype(np.float32)


def _aliased_after_table(interpret: Any) -> tuple[Any, Any]:
    """x0 + x1 over two row blocks, written over x0 (operand 1: a scalar-prefetch table
    comes first), x1 read block by block after x0's blocks were written."""
    def body(t_ref, x0_ref, x1_ref, o_ref):
        o_ref[...] = x0_ref[...] + x1_ref[...] + t_ref[pl.program_id(0)]

    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(2,),
                                        in_specs=[pl.BlockSpec((8, 128), lambda i, t: (i, 0))] * 2,
                                        out_specs=pl.BlockSpec((8, 128), lambda i, t: (i, 0)))
    table = np.array([10, 20], np.int32)
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(_X.shape, _X.dtype), grid_spec=spec,
                         input_output_aliases={1: 0}, interpret=interpret)(table, _X, 3 * _X + 1)
    return out, 4 * _X + 1 + np.repeat(table, 8)[:, None]


def _aliased_vmap(interpret: Any) -> tuple[Any, Any]:
    """x + 1 in place (input 0 aliased to output 0), vmapped with the aliased input batched
    along axis 1 and the output along axis 0."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def kernel(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                              input_output_aliases={0: 0}, interpret=interpret)(x)
    batched = np.stack([_X, -_X, 2 * _X], axis=1)  # (16, 3, 128): batch on axis 1
    out = jax.vmap(kernel, in_axes=1, out_axes=0)(batched)
    return out, np.moveaxis(batched, 1, 0) + 1


def _vmap_axis_1(interpret: Any) -> tuple[Any, Any]:
    """2 x over two row blocks, vmapped with the input batched along axis 1."""
    def body(x_ref, o_ref):
        o_ref[...] = 2 * x_ref[...]

    def kernel(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), interpret=interpret)(x)
    batched = np.stack([_X, -_X, _X + 1], axis=1)  # (16, 3, 128)
    return jax.vmap(kernel, in_axes=1)(batched), 2 * np.moveaxis(batched, 1, 0)


def _overhanging_load(interpret: Any) -> tuple[Any, Any]:
    """Rows 12..15 of x through an 8-row window starting at row 12 (4 rows past the end),
    masked to the rows inside, the rest 0."""
    def body(x_ref, o_ref):
        start = pl.program_id(0) + 12
        inside = lax.broadcasted_iota(jnp.int32, (8, 128), 0) < 4
        window = x_ref.at[pl.ds(start, 8), :]
        o_ref[...] = jnp.where(inside, pltpu.load(window, mask=inside), 0.0)
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(1,),
                         interpret=interpret)(_X)
    expected = np.zeros((8, 128), np.float32)
    expected[:4] = _X[12:]
    return out, expected


def _overhanging_store(interpret: Any) -> tuple[Any, Any]:
    """Zeros, then the first 4 rows of x stored through an 8-row window starting at row 12."""
    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        start = pl.program_id(0) + 12
        inside = lax.broadcasted_iota(jnp.int32, (8, 128), 0) < 4
        pltpu.store(o_ref.at[pl.ds(start, 8), :], x_ref[pl.ds(0, 8), :], mask=inside)
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(1,),
                         interpret=interpret)(_X)
    expected = np.zeros((16, 128), np.float32)
    expected[12:] = _X[:4]
    return out, expected


def _reads_output_first(interpret: Any) -> tuple[Any, Any]:
    """``o += 2 x`` on an output nothing wrote: the interpreter's poison must show (NaN)."""
    def body(x_ref, o_ref):
        o_ref[...] += 2 * x_ref[...]
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(2,),
                         in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                         out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), interpret=interpret)(_X)
    return out, np.full((16, 128), np.nan, np.float32)


_NAN_FILL = pltpu.InterpretParams(uninitialized_memory="nan")
_SHOWN: dict[str, list[tuple[Callable[[Any], tuple[Any, Any]], Any]]] = {
    "alias_sync_by_operand_index": [(_aliased_after_table, True)],
    "vmap_aliased_axis_not_moved": [(_aliased_vmap, True), (_aliased_vmap, pltpu.InterpretParams())],
    "vmap_batch_index_in_front": [(_vmap_axis_1, True), (_vmap_axis_1, pltpu.InterpretParams())],
    "masked_window_start_clamped": [(_overhanging_load, True), (_overhanging_store, True)],
    "outputs_start_at_zero": [(_reads_output_first, True)],
    "poison_fill_is_zero": [(_reads_output_first, _NAN_FILL)],
}


def _run(kernel: Callable[[Any], tuple[Any, Any]], interpret: Any) -> tuple[Any, Any]:
    try:
        out, expected = kernel(interpret)
        return np.asarray(out), expected
    except Exception as exc:  # a planted bug may make the kernel fail instead
        return exc, None


def test_every_bug_is_shown_and_each_class_has_one() -> None:
    assert set(_SHOWN) == set(BUGS)
    assert {bug.cls for bug in BUGS.values()} == {1, 2, 3, 4}


@pytest.mark.parametrize(("bug", "which"), [(b, i) for b, shown in sorted(_SHOWN.items()) for i in range(len(shown))])
def test_a_planted_bug_changes_a_hand_written_kernel(bug: str, which: int) -> None:
    kernel, interpret = _SHOWN[bug][which]
    out, expected = _run(kernel, interpret)
    np.testing.assert_array_equal(out, expected)  # the unmodified interpreter is right (NaN: the poison shows)
    with planted(bug):
        wrong, _ = _run(kernel, interpret)
    assert isinstance(wrong, Exception) or not np.array_equal(wrong, expected, equal_nan=True)
    again, _ = _run(kernel, interpret)
    np.testing.assert_array_equal(again, expected)  # and right again once it is lifted
