"""Grids cover their array exactly once, in every layout, and run as real index_maps."""

import functools

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import strategies as pvs

FIND = settings(database=None, max_examples=500)
shapes = st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple)
backends = st.sampled_from(["mosaic_tpu", "triton", "mosaic_gpu"])


def _coverage(tiling):
    """How many times each element of the array is in a visited block."""
    counts = np.zeros(tiling.array_shape, np.int32)
    for point in tiling.grid_points():
        window = []
        for index, block, size in zip(
            tiling.index_map(*point), tiling.block_shape, tiling.array_shape, strict=True
        ):
            start = index if block is None else index * block
            window.append(slice(start, min(start + (block or 1), size)))
        counts[tuple(window)] += 1
    return counts


@given(st.data(), shapes, backends)
def test_every_grid_covers_its_array_exactly_once(data, shape, backend):
    tiling = data.draw(pvs.grids(array_shape=shape, backend=backend, max_grid_points=64))
    assert np.all(_coverage(tiling) == 1)
    assert tiling.grid == tuple(
        (pvs.cdiv_grid(shape, tiling.block_shape)[::-1])
        if tiling.layout == "transposed"
        else pvs.cdiv_grid(shape, tiling.block_shape)
    )
    assert np.prod(tiling.grid) <= 64


@given(st.data(), shapes, st.integers(1, 16))
def test_grids_respect_the_grid_point_budget(data, shape, budget):
    tiling = data.draw(pvs.grids(array_shape=shape, backend="triton", max_grid_points=budget))
    assert np.prod(tiling.grid) <= budget


def test_reduction_last_marks_the_last_grid_axis_and_drops_it_from_outputs():
    tiling = pvs.Tiling(array_shape=(16, 256), block_shape=(8, 128), layout="reduction_last")
    assert tiling.reduction_axes == (1,)
    assert tiling.out_index_map(1, 1) == (1,)
    assert pvs.Tiling(array_shape=(16, 256), block_shape=(8, 128)).reduction_axes == ()


def test_grids_shrink_to_one_row_major_block():
    tiling = find(pvs.grids(array_shape=(100, 300)), lambda t: True, settings=FIND)
    assert (tiling.block_shape, tiling.grid, tiling.layout) == ((100, 300), (1, 1), "row_major")


def _copy(x, tiling):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    spec = pl.BlockSpec(tiling.block_shape, tiling.index_map)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(
        kernel, out_shape=out, grid=tiling.grid, in_specs=[spec], out_specs=spec, interpret=True
    )(x)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(st.integers(1, 20), min_size=2, max_size=2).map(tuple))
def test_tilings_drive_a_real_pallas_call(data, shape):
    layouts = ("row_major", "transposed")
    tiling = data.draw(pvs.grids(array_shape=shape, backend="mosaic_gpu", layouts=layouts))
    x = data.draw(pvs.arrays(shape=shape))
    out = jax.jit(functools.partial(_copy, tiling=tiling))(x)
    np.testing.assert_array_equal(np.asarray(out), x + 1)
