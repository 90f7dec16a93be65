"""blame: bad elements -> output blocks -> the grid points that wrote them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.grid.blame import blame
from pallas_verify.spec import Tolerance
from pallas_verify.tolerance import compare, element_errors

BM, BN = 8, 128


def _scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def scale(x, *, off_by_one=False, reduce_steps=1):
    """2 * x over a grid (rows, reduce_steps); the bug maps the last row block one early."""
    n = x.shape[0] // BM

    def out_map(i, k):
        return (jnp.where(i == n - 1, i - 1, i) if off_by_one else i, 0)

    return pl.pallas_call(
        _scale_kernel,
        grid=(n, reduce_steps),
        in_specs=[pl.BlockSpec((BM, BN), lambda i, k: (i, 0))],
        out_specs=pl.BlockSpec((BM, BN), out_map),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")),
    )(x)


X = np.arange(4 * BM * BN, dtype=np.float32).reshape(4 * BM, BN)


def judged(actual, expected, *, rtol=0.0):
    """blame's arguments as the runner passes them: the comparison's mask and the errors."""
    mask = compare("out", actual, expected, Tolerance(rtol=rtol, atol=0.0)).bad
    return {"bad": [mask], "errors": [element_errors(actual, expected)]}


def test_off_by_one_block_is_blamed_on_the_right_blocks_and_grid_points():
    config = {"off_by_one": True, "reduce_steps": 4}
    actual = np.array(2 * X)
    actual[3 * BM :] = np.nan  # block 3 is never written
    actual[2 * BM : 3 * BM] = 2 * X[3 * BM :]  # block 2 holds block 3's data
    (out,) = blame(scale, (X,), config, **judged(actual, 2 * X, rtol=1e-6)).outputs
    assert out.structure == "blocked"
    assert out.call == "_scale_kernel"
    assert out.bad_blocks == ((2, 0), (3, 0))
    assert dict(out.writers)[(2, 0)] == tuple((i, k) for i in (2, 3) for k in range(4))
    assert dict(out.writers)[(3, 0)] == ()
    assert "block (2, 0), written at grid points (i, j) for i in 2..3, j in 0..3" in out.message
    assert "block (3, 0), written at no grid point" in out.message
    assert out.block_bad_count == [[0], [0], [BM * BN], [BM * BN]]
    assert out.block_max_error[0] == [0.0]
    assert out.block_max_error[3] == [float("inf")]
    assert out.block_max_error[2][0] == pytest.approx(2 * BM * BN)


def test_a_mask_alone_gives_counts_but_no_errors():
    mask = np.zeros(X.shape, bool)
    mask[9, 5] = True
    (out,) = blame(scale, (X,), {"reduce_steps": 3}, bad=[mask]).outputs
    assert out.bad_blocks == ((1, 0),)
    assert out.block_max_error is None
    assert "written at grid points (1, j) for j in 0..2" in out.message
    assert out.bad_ranges == (((9, 9),), ((5, 5),))


def test_good_outputs_are_left_out():
    assert blame(scale, (X,), {}, bad=[np.zeros(X.shape, bool)]).outputs == ()
    assert blame(scale, (X,), {}, **judged(2 * X, 2 * X)).outputs == ()


def test_the_last_pallas_call_producing_the_output_is_blamed():
    def twice(x):
        return scale(scale(x, reduce_steps=2), reduce_steps=3)

    mask = np.zeros(X.shape, bool)
    mask[0, 0] = True
    (out,) = blame(twice, (X,), {}, bad=[mask]).outputs
    assert "(0, j) for j in 0..2" in out.message


def _hbm_copy_kernel(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.start()
    copy.wait()


def hbm_copy(x):
    return pl.pallas_call(
        _hbm_copy_kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.SemaphoreType.DMA],
    )(x)


def test_any_outputs_have_unknown_structure_and_index_ranges():
    mask = np.zeros(X.shape, bool)
    mask[8:16, :] = True
    mask[24, 3] = True
    (out,) = blame(hbm_copy, (X,), {}, bad=[mask]).outputs
    assert out.structure == "unknown"
    assert out.block_bad_count is None
    assert out.bad_ranges == (((8, 15), (24, 24)), ((0, 127),))
    assert "indices [{8..15, 24}, 0..127]" in out.message
    assert "memory space 'any'" in out.message


def test_outputs_computed_after_the_last_call_have_unknown_structure():
    def sliced(x):
        return scale(x)[:BM]

    (out,) = blame(sliced, (X,), {}, bad=[np.ones((BM, BN), bool)]).outputs
    assert out.structure == "unknown"
    assert "not the direct result of a pallas_call" in out.message


def ragged_scale(x):
    return pl.pallas_call(
        _scale_kernel,
        grid=(pl.cdiv(x.shape[0], BM),),
        in_specs=[pl.BlockSpec((BM, BN), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BM, BN), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def test_partial_edge_blocks_are_blamed():
    x = np.ones((2 * BM + 4, BN), np.float32)
    actual = 2 * x
    actual[-1, -1] = -7.0
    (out,) = blame(ragged_scale, (x,), {}, **judged(actual, 2 * x)).outputs
    assert out.bad_blocks == ((2, 0),)
    assert out.block_bad_count == [[0], [0], [1]]
    assert out.block_max_error == [[0.0], [0.0], [9.0]]
    assert "block (2, 0), written at grid points (2,)" in out.message
