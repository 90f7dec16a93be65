"""Block shapes follow each family's rules by construction, within their budgets."""

import math

import jax.numpy as jnp
from hypothesis import find, given, settings
from hypothesis import strategies as st

import strategies as pvs

FIND = settings(database=None, max_examples=500)
array_dims = st.lists(st.integers(1, 700), min_size=1, max_size=4).map(tuple)
tpu_dtypes = st.sampled_from(["float32", "bfloat16", "int32", "int8", "bool", "float8_e5m2"])


def _tpu_valid(shape, block, dtype):
    """The Mosaic TPU rule, restated independently of the strategy."""
    bits = 32 if dtype == "bool" else jnp.dtype(dtype).itemsize * 8
    if len(shape) == 1:
        (b,), (a,) = block, shape
        return b == a or b % 1024 == 0 or (b >= 128 * 32 // bits and b & (b - 1) == 0)
    tile = max(8, 256 // bits)
    lane_ok = block[-1] == shape[-1] or block[-1] % 128 == 0
    sublane_ok = block[-2] == shape[-2] or block[-2] % tile == 0
    lead_ok = all(b is None or 1 <= b <= a for a, b in zip(shape[:-2], block[:-2], strict=True))
    return lane_ok and sublane_ok and lead_ok


def _grid_points(shape, block):
    return math.prod(
        a if b is None else math.ceil(a / b) for a, b in zip(shape, block, strict=True)
    )


@given(st.data(), array_dims, tpu_dtypes, st.booleans())
def test_tpu_block_shapes_follow_the_tiling_rule(data, shape, dtype, squeezed):
    block = data.draw(pvs.tpu_block_shapes(array_shape=shape, dtype=dtype, allow_squeezed=squeezed))
    assert len(block) == len(shape)
    assert _tpu_valid(shape, block, dtype), (shape, block, dtype)


@given(st.data(), array_dims, st.integers(1, 64), st.integers(2**10, 2**20))
def test_tpu_block_shapes_respect_both_budgets(data, shape, points, elements):
    strategy = pvs.tpu_block_shapes(array_shape=shape, max_grid_points=max(points, 64))
    block = data.draw(strategy)
    assert _grid_points(shape, block) <= max(points, 64)
    capped = pvs.tpu_block_shapes(array_shape=shape[-2:], max_block_elements=elements)
    assert math.prod(data.draw(capped)) <= elements


@given(st.data(), st.lists(st.integers(1, 1024), min_size=1, max_size=2), st.integers(1, 32))
def test_triton_block_shapes_are_powers_of_two_within_the_budget(data, shape, budget):
    block = data.draw(pvs.triton_block_shapes(array_shape=shape, max_grid_points=budget))
    assert all(b & (b - 1) == 0 for b in block)
    assert _grid_points(shape, block) <= budget


@given(st.data(), array_dims)
def test_triton_block_shapes_respect_the_triton_element_limit(data, shape):
    block = data.draw(pvs.triton_block_shapes(array_shape=shape))
    assert all(b & (b - 1) == 0 for b in block)
    assert math.prod(block) <= pvs.TRITON_MAX_BLOCK_ELEMENTS


@given(st.data(), array_dims, st.sampled_from(["float32", "bfloat16", "int8", "float16"]))
def test_mosaic_gpu_minor_dim_is_a_multiple_of_16_bytes(data, shape, dtype):
    block = data.draw(pvs.mosaic_gpu_block_shapes(array_shape=shape, dtype=dtype))
    itemsize = jnp.dtype(dtype).itemsize
    assert block[-1] * itemsize % 16 == 0
    assert block[-1] < shape[-1] + 16 // itemsize
    assert all(1 <= b <= a for a, b in zip(shape[:-1], block[:-1], strict=True))


def test_block_shapes_shrink_to_one_block():
    assert find(pvs.tpu_block_shapes(array_shape=(100, 300)), bool, settings=FIND) == (100, 300)
    assert find(pvs.tpu_block_shapes(array_shape=(3000,)), bool, settings=FIND) == (3000,)
    assert find(pvs.triton_block_shapes(array_shape=(100, 300)), bool, settings=FIND) == (128, 512)
    gpu = pvs.mosaic_gpu_block_shapes(array_shape=(10, 30), dtype="bfloat16")
    assert find(gpu, bool, settings=FIND) == (10, 32)


def test_tpu_block_shapes_prefer_the_dtype_sublane_tile():
    assert [pvs.preferred_sublane_tile(d) for d in ("float32", "bfloat16", "int8", "bool")] == [
        8,
        16,
        32,
        8,
    ]
    blocks = pvs.tpu_block_shapes(array_shape=(100, 128), dtype="int8")
    assert find(blocks, lambda b: b[0] != 100, settings=FIND) == (128, 128)
    assert find(blocks, lambda b: b[0] < 100, settings=FIND) == (96, 128)
