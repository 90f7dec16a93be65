"""gridcheck: static races, unwritten blocks, revisits and OOB blocks on tiny kernels."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.grid.check import SKIPPED, check_grid, describe_points, grid_mappings

BLOCK = (8, 128)


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy_call(x, *, grid, out_map, in_map=None, semantics=None, out_rows=None):
    """A block copy whose grid, index maps and semantics the test chooses."""
    params = None if semantics is None else pltpu.CompilerParams(dimension_semantics=semantics)
    return pl.pallas_call(
        _copy_kernel,
        grid=grid,
        in_specs=[pl.BlockSpec(BLOCK, in_map or out_map)],
        out_specs=pl.BlockSpec(BLOCK, out_map),
        out_shape=jax.ShapeDtypeStruct((out_rows or x.shape[0], 128), x.dtype),
        compiler_params=params,
    )(x)


X32 = jax.ShapeDtypeStruct((32, 128), jnp.float32)


def kinds(kernel, inputs=(X32,), **config):
    return [issue.kind for issue in check_grid(kernel, inputs, config)]


def test_clean_copy_has_no_issues():
    assert kinds(copy_call, grid=(4,), out_map=lambda i: (i, 0), semantics=("parallel",)) == []


def test_parallel_axis_writing_one_block_is_a_race():
    issues = check_grid(
        copy_call,
        (X32,),
        {
            "grid": (4, 2),
            "out_map": lambda i, j: (i, 0),
            "in_map": lambda i, j: (i, 0),
            "semantics": ("parallel", "parallel"),
        },
    )
    assert [i.kind for i in issues] == ["race"]
    assert issues[0].block == (0, 0)
    assert "(0, j) for j in 0..1" in issues[0].message
    assert "parallel dimension(s) j" in issues[0].message
    assert "3 more blocks" in issues[0].message


def _with_scratch_output(x, *, keep):
    """A copy with a second output every grid point of the parallel axis writes at block 0
    (splash attention's pattern in JAX 0.10 and 0.11): returned, or dropped."""

    def body(x_ref, o_ref, acc_ref):
        acc_ref[...] = x_ref[...]
        o_ref[...] = acc_ref[...]

    out, acc = pl.pallas_call(
        body, grid=(4,), in_specs=[pl.BlockSpec(BLOCK, lambda i: (i, 0))],
        out_specs=[pl.BlockSpec(BLOCK, lambda i: (i, 0)), pl.BlockSpec(BLOCK, lambda i: (0, 0))],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(BLOCK, x.dtype)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)
    return (out, acc) if keep else out


def test_a_race_on_an_output_the_function_discards_is_a_note_not_a_finding():
    assert kinds(_with_scratch_output, keep=True) == ["race"]
    [note] = check_grid(_with_scratch_output, (X32,), {"keep": False})
    assert note.kind == SKIPPED and not note.is_finding
    assert "output 1 is written at grid points" in note.message and "discards that output" in note.message


def test_same_grid_with_arbitrary_reduction_axis_is_clean():
    config = {
        "grid": (4, 2),
        "out_map": lambda i, j: (i, 0),
        "in_map": lambda i, j: (i, 0),
        "semantics": ("parallel", "arbitrary"),
    }
    assert kinds(copy_call, **config) == []


@pytest.mark.parametrize("semantic", ["core_parallel", pltpu.CORE_PARALLEL, pltpu.PARALLEL])
def test_core_parallel_counts_as_parallel(semantic):
    config = {
        "grid": (2,),
        "out_map": lambda i: (0, 0),
        "in_map": lambda i: (i, 0),
        "semantics": (semantic,),
    }
    assert kinds(copy_call, **config) == ["race", "uninitialized_read"]


def test_missing_semantics_default_to_arbitrary():
    config = {"grid": (2,), "out_map": lambda i: (0, 0), "in_map": lambda i: (i, 0), "out_rows": 8}
    assert kinds(copy_call, **config) == []
    (call,) = grid_mappings(copy_call, (X32,), config)
    assert call.semantics == ("arbitrary",)


def test_blocks_no_grid_point_writes_are_uninitialized():
    issues = check_grid(copy_call, (X32,), {"grid": (2,), "out_map": lambda i: (i, 0)})
    assert [i.kind for i in issues] == ["uninitialized_read"]
    assert "2 of 4 blocks of output 0" in issues[0].message
    assert "(2, 0), (3, 0)" in issues[0].message


def test_non_consecutive_revisit_is_reported_with_grid_points():
    config = {"grid": (2, 4), "out_map": lambda k, i: (i, 0), "in_map": lambda k, i: (i, 0)}
    issues = check_grid(copy_call, (X32,), config)
    assert [i.kind for i in issues] == ["revisit"]
    assert issues[0].grid_points == ((0, 0), (1, 0))
    assert "(i, 0) for i in 0..1" in issues[0].message


def test_block_index_past_the_end_is_out_of_bounds():
    issues = check_grid(copy_call, (X32,), {"grid": (4,), "out_map": lambda i: (i + 1, 0)})
    assert sorted(i.kind for i in issues) == [
        "out_of_bounds",
        "out_of_bounds",
        "uninitialized_read",
    ]
    assert any("block (4, 0)" in i.message and "grid points (3,)" in i.message for i in issues)


def test_calls_inside_jit_are_found_in_order():
    def two_calls(x):
        y = jax.jit(lambda a: copy_call(a, grid=(4,), out_map=lambda i: (i, 0)))(x)
        return copy_call(y, grid=(2,), out_map=lambda i: (i, 0))

    calls = grid_mappings(two_calls, (X32,), {})
    assert [c.grid for c in calls] == [(4,), (2,)]
    assert calls[1].produces == ((0, 0),)
    assert calls[0].produces == ()
    assert [i.kind for i in check_grid(two_calls, (X32,), {})] == ["uninitialized_read"]


def _gather_kernel(idx_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]


def gather_rows(idx, x):
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(idx.shape[0],),
        in_specs=[pl.BlockSpec(BLOCK, lambda i, s: (i, 0))],
        out_specs=pl.BlockSpec(BLOCK, lambda i, s: (s[i], 0)),
    )
    return pl.pallas_call(
        _gather_kernel,
        grid_spec=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(idx, x)


def test_scalar_prefetch_index_maps_use_concrete_values():
    x = np.zeros((32, 128), np.float32)
    assert kinds(gather_rows, (np.array([3, 1, 2, 0], np.int32), x)) == []
    issues = check_grid(gather_rows, (np.array([3, 3, 2, 0], np.int32), x), {})
    assert [i.kind for i in issues] == ["race", "uninitialized_read"]
    assert "(i,) for i in 0..1" in issues[0].message


def test_scalar_prefetch_without_values_is_skipped_with_reason():
    shapes = (jax.ShapeDtypeStruct((4,), jnp.int32), X32)
    (issue,) = check_grid(gather_rows, shapes, {})
    assert issue.kind == SKIPPED
    assert not issue.is_finding
    assert "pass concrete input arrays" in issue.message


def test_large_grid_is_skipped_honestly():
    config = {"grid": (4, 50), "out_map": lambda i, j: (i, 0)}
    (issue,) = check_grid(copy_call, (X32,), config, max_points=100)
    assert issue.kind == SKIPPED
    assert "grid too large" in issue.message
    assert "200 points" in issue.message


def test_hundred_thousand_points_are_checked_quickly():
    x = jax.ShapeDtypeStruct((8 * 400, 128), jnp.float32)
    config = {
        "grid": (400, 250),
        "out_map": lambda i, j: (i, 0),
        "semantics": ("parallel", "arbitrary"),
    }
    start = time.perf_counter()
    assert kinds(copy_call, (x,), **config) == []
    assert time.perf_counter() - start < 5


def _write_back_kernel(x_hbm, o_ref, buf, sem):
    pltpu.sync_copy(x_hbm, buf)
    o_ref[...] = buf[...]
    copy = pltpu.make_async_copy(buf, x_hbm, sem)
    copy.start()
    copy.wait()


def write_back(x, *, alias=False):
    return pl.pallas_call(
        _write_back_kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(BLOCK, lambda: (0, 0)),
        out_shape=jax.ShapeDtypeStruct(BLOCK, x.dtype),
        scratch_shapes=[pltpu.VMEM(BLOCK, x.dtype), pltpu.SemaphoreType.DMA],
        input_output_aliases={0: 0} if alias else {},
    )(x)


def test_writing_an_unaliased_any_input_is_input_mutation():
    x = jax.ShapeDtypeStruct(BLOCK, jnp.float32)
    (issue,) = check_grid(write_back, (x,), {})
    assert issue.kind == "input_mutation"
    assert issue.operand == "input 0"
    assert kinds(write_back, (x,), alias=True) == []


@pytest.mark.parametrize(
    ("points", "text"),
    [
        ([(2, 0, k) for k in range(4)], "(2, 0, k) for k in 0..3"),
        ([(i, j) for i in range(2) for j in range(3)], "(i, j) for i in 0..1, j in 0..2"),
        ([(0,), (1,), (3,)], "(i,) for i in 0..1; (3,)"),
        ([(0, 0), (1, 1)], "(0, 0); (1, 1)"),
        ([(i,) for i in range(0, 20, 2)], "(0,); (2,); (4,); (6,); and 6 more"),
    ],
)
def test_describe_points_compresses_ranges(points, text):
    assert describe_points(np.array(points)) == text


def test_scalar_prefetch_computed_inside_jit_is_evaluated():
    @jax.jit
    def flipped(idx, x):
        return gather_rows(jnp.flip(idx) + 0, x)

    x = np.zeros((32, 128), np.float32)
    assert kinds(flipped, (np.array([0, 1, 2, 3], np.int32), x)) == []
    issues = check_grid(flipped, (np.array([0, 1, 1, 3], np.int32), x), {})
    assert [i.kind for i in issues] == ["race", "uninitialized_read"]
    assert issues[0].block == (1, 0)
    assert "(i,) for i in 1..2" in issues[0].message


def update_first_blocks(x):
    """Doubles the first two row blocks of x in place (the others keep x's values)."""
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
        grid=(2,),
        in_specs=[pl.BlockSpec(BLOCK, lambda i: (i, 0))],
        out_specs=pl.BlockSpec(BLOCK, lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={0: 0},
    )(x)


def test_unwritten_blocks_of_an_aliased_output_keep_the_input():
    assert kinds(update_first_blocks) == []
