"""Each planted interpreter bug (``_mutants.py``), shown live on a hand-written kernel:
the kernel matches its reference on the unmodified interpreter and not with the bug planted."""

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

from ._mutants import MUTANTS, planted

_X = (np.arange(16 * 256, dtype=np.int32).reshape(16, 256) % 97 - 40).astype(np.float32)


def _call(body: Callable[..., None], interpret: Any, out: jax.ShapeDtypeStruct, *args: Any, **kw: Any) -> Any:
    return pl.pallas_call(body, out_shape=out, interpret=interpret, **kw)(*args)


def _row_sums(interpret: Any) -> tuple[Any, Any]:
    """Row sums over two column blocks, accumulated in VMEM scratch across a (2, 2) grid."""
    def body(x_ref, o_ref, acc_ref):
        k = pl.program_id(1)

        @pl.when(k == 0)
        def _init():
            acc_ref[...] = jnp.zeros_like(acc_ref)
        acc_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)

        @pl.when(k == 1)
        def _finalize():
            o_ref[...] = acc_ref[...]
    out = _call(body, interpret, jax.ShapeDtypeStruct((16, 1), jnp.float32), _X, grid=(2, 2),
                in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))], out_specs=pl.BlockSpec((8, 1), lambda i, k: (i, 0)),
                scratch_shapes=[pltpu.VMEM((8, 1), jnp.float32)])
    return out, _X.sum(axis=1, keepdims=True)


def _ragged_rows(interpret: Any) -> tuple[Any, Any]:
    """x plus its global row index, 12 rows in blocks of 8 (the last block is partial)."""
    x = _X[:12, :128]

    def body(x_ref, o_ref):
        rows = pl.program_id(0) * 8 + lax.broadcasted_iota(jnp.int32, (8, 128), 0)
        o_ref[...] = x_ref[...] + rows.astype(jnp.float32)
    out = _call(body, interpret, jax.ShapeDtypeStruct((12, 128), jnp.float32), x, grid=(2,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))], out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    return out, x + np.arange(12, dtype=np.float32)[:, None]


def _table(interpret: Any) -> tuple[Any, Any]:
    """Output block i is input block table[i] (scalar prefetch), table (2, 0, 1)."""
    x, table = np.concatenate([_X, _X[:8] + 1000]), np.array([2, 0, 1], np.int32)

    def body(t_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]
    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(3,),
                                        in_specs=[pl.BlockSpec((8, 256), lambda i, t: (t[i], 0))],
                                        out_specs=pl.BlockSpec((8, 256), lambda i, t: (i, 0)))
    out = _call(body, interpret, jax.ShapeDtypeStruct((24, 256), jnp.float32), table, x, grid_spec=spec)
    return out, np.concatenate([x[16:], x[:8], x[8:16]])


def _masked_store(interpret: Any) -> tuple[Any, Any]:
    """Zeros, then x stored where (row + lane) is even."""
    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        even = (lax.broadcasted_iota(jnp.int32, (8, 128), 0) + lax.broadcasted_iota(jnp.int32, (8, 128), 1)) % 2 == 0
        pltpu.store(o_ref, x_ref[...], mask=even)
    out = _call(body, interpret, jax.ShapeDtypeStruct((8, 128), jnp.float32), _X[:8, :128])
    even = (np.arange(8)[:, None] + np.arange(128)[None, :]) % 2 == 0
    return out, np.where(even, _X[:8, :128], 0)


def _strided_store(interpret: Any) -> tuple[Any, Any]:
    """Rows 0..3 of x stored into rows 1, 3, 5, 7 (``pl.ds(1, 4, stride=2)``); zeros elsewhere."""
    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[pl.ds(1, 4, stride=2), :] = x_ref[pl.ds(0, 4), :]
    out = _call(body, interpret, jax.ShapeDtypeStruct((8, 128), jnp.float32), _X[:8, :128])
    expected = np.zeros((8, 128), np.float32)
    expected[1::2] = _X[:4, :128]
    return out, expected


def _strided_load(interpret: Any) -> tuple[Any, Any]:
    """Rows 1, 3, 5, 7 of x (``x_ref[pl.ds(1, 4, stride=2)]``)."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(1, 4, stride=2), :]
    out = _call(body, interpret, jax.ShapeDtypeStruct((4, 128), jnp.float32), _X[:8, :128])
    return out, _X[1:8:2, :128]


def _roll(interpret: Any) -> tuple[Any, Any]:
    def body(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], 3, 1)
    return _call(body, interpret, jax.ShapeDtypeStruct((8, 128), jnp.float32), _X[:8, :128]), np.roll(_X[:8, :128], 3, 1)


def _column_blocks(interpret: Any) -> tuple[Any, Any]:
    """Twice x, walked in two column blocks (the row block stays the same)."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    out = _call(body, interpret, jax.ShapeDtypeStruct((8, 256), jnp.float32), _X[:8], grid=(1, 2),
                in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))], out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)))
    return out, _X[:8] * 2


def _dma_chunks(interpret: Any) -> tuple[Any, Any]:
    """Each 8-row block copied from HBM in two 4-row DMAs sharing one semaphore."""
    def body(x_hbm, o_ref, buf, sem):
        g = pl.program_id(0)
        first = pltpu.make_async_copy(x_hbm.at[pl.ds(g * 8, 4)], buf.at[pl.ds(0, 4)], sem)
        second = pltpu.make_async_copy(x_hbm.at[pl.ds(g * 8 + 4, 4)], buf.at[pl.ds(4, 4)], sem)
        first.start()
        second.start()
        first.wait()
        second.wait()
        o_ref[...] = buf[...] + 1
    out = _call(body, interpret, jax.ShapeDtypeStruct((16, 256), jnp.float32), _X, grid=(2,),
                in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                scratch_shapes=[pltpu.VMEM((8, 256), jnp.float32), pltpu.SemaphoreType.DMA])
    return out, _X + 1


def _parallel(interpret: Any) -> tuple[Any, Any]:
    """Twice x over a ("parallel",) grid of two blocks."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    out = _call(body, interpret, jax.ShapeDtypeStruct((16, 256), jnp.float32), _X, grid=(2,),
                in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))], out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))
    return out, _X * 2


_TPU = pltpu.InterpretParams(dma_execution_mode="on_wait")
_SHOWN: dict[str, tuple[Callable[[Any], tuple[Any, Any]], Any]] = {
    "grid_first_axis_fastest": (_row_sums, True),
    "ragged_padding_last_dim_only": (_ragged_rows, True),
    "scalar_prefetch_reversed": (_table, True),
    "masked_store_mask_one_lane_off": (_masked_store, True),
    "strided_gather_from_zero": (_strided_store, True),
    "roll_shift_negated": (_roll, True),
    "block_change_leading_dim_only": (_column_blocks, _TPU),
    "dma_writes_at_offset_zero": (_dma_chunks, _TPU),
    "dma_signals_twice": (_dma_chunks, _TPU),
    "masked_store_first_row_mask": (_masked_store, _TPU),
    "strided_range_contiguous": (_strided_load, _TPU),
    "second_core_never_runs": (_parallel, pltpu.InterpretParams(num_cores_or_threads=2)),
}


def test_every_new_mutant_is_shown() -> None:
    assert set(_SHOWN) == set(MUTANTS) - {"iota_wrong_axis_rank3", "reduce_max_int32_identity",
                                          "cast_f32_bf16_truncates", "masked_select_ignores_other"}
    assert len({MUTANTS[m].where for m in _SHOWN}) == len(_SHOWN)  # each in a different part of the code


@pytest.mark.parametrize("mutant", sorted(_SHOWN))
def test_a_planted_bug_changes_a_hand_written_kernel(mutant: str) -> None:
    kernel, interpret = _SHOWN[mutant]
    out, expected = kernel(interpret)
    np.testing.assert_array_equal(np.asarray(out), expected)  # the unmodified interpreter is right
    with planted(mutant):
        wrong, _ = kernel(interpret)
    assert not np.array_equal(np.asarray(wrong), expected, equal_nan=True)
    again, _ = kernel(interpret)
    np.testing.assert_array_equal(np.asarray(again), expected)  # and right again once it is lifted
