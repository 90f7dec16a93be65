"""Every generated block shape lowers: Mosaic TPU and Triton, via cross-platform lowering
under an abstract device (no accelerator needed; about 10 ms per lowering)."""

import functools

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

import strategies as pvs

LOWERING = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TPU = ("TPU v5 lite", "tpu", ("tpu",))
GPU = ("NVIDIA H100 80GB HBM3", "gpu", ("cuda",))
TRITON_DEPRECATED = pytest.mark.filterwarnings(
    "ignore:The Pallas Triton backend is deprecated:DeprecationWarning"
)


def _lower(fn, args, target):
    kind, platform, lowering_platforms = target
    device = AbstractDevice(device_kind=kind, num_cores=1, platform=platform)
    mesh = AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=device)
    with jax.sharding.use_abstract_mesh(mesh):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=lowering_platforms)


def _copy(x, *, tiling, compiler_params):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    spec = pl.BlockSpec(tiling.block_shape, tiling.index_map)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(
        kernel,
        out_shape=out,
        grid=tiling.grid,
        in_specs=[spec],
        out_specs=spec,
        compiler_params=compiler_params,
    )(x)


shapes = st.lists(st.integers(1, 520), min_size=1, max_size=3).map(tuple)


@LOWERING
@given(st.data(), shapes, pvs.dtypes(backend="mosaic_tpu"))
def test_every_tpu_block_shape_lowers_for_mosaic_tpu(data, shape, dtype):
    block = data.draw(pvs.tpu_block_shapes(array_shape=shape, dtype=dtype, allow_squeezed=True))
    layout = data.draw(st.sampled_from(pvs.LAYOUTS))
    tiling = pvs.Tiling(array_shape=shape, block_shape=block, layout=layout)
    fn = functools.partial(_copy, tiling=tiling, compiler_params=pltpu.CompilerParams())
    _lower(fn, [jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))], TPU)


@TRITON_DEPRECATED
@LOWERING
@given(st.data(), st.lists(st.integers(1, 300), min_size=1, max_size=2).map(tuple))
def test_every_triton_block_shape_lowers_for_triton(data, shape):
    block = data.draw(pvs.triton_block_shapes(array_shape=shape, max_block_elements=2**14))
    tiling = pvs.Tiling(array_shape=shape, block_shape=block)
    fn = functools.partial(_copy, tiling=tiling, compiler_params=pltriton.CompilerParams())
    _lower(fn, [jax.ShapeDtypeStruct(shape, jnp.float32)], GPU)


def _matmul(x, y, *, m, n, k, block_m, block_n, block_k, grid, dimension_semantics, dtype):
    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == grid[2] - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=grid,
        in_specs=[
            pl.BlockSpec((block_m, block_k), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((block_k, block_n), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((block_m, block_n), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x, y)


MATMUL_CONFIGS = pvs.tiled_configs(
    axes={"m": "sublane", "n": "lane", "k": "lane"},
    reduction_axes=("k",),
    dtypes=("float32", "bfloat16", "int8"),
    max_grid_points=16,
)


@LOWERING
@given(MATMUL_CONFIGS)
def test_tiled_matmul_configs_lower_for_mosaic_tpu(config):
    dtype = jnp.dtype(config["dtype"])
    args = [
        jax.ShapeDtypeStruct((config["m"], config["k"]), dtype),
        jax.ShapeDtypeStruct((config["k"], config["n"]), dtype),
    ]
    _lower(functools.partial(_matmul, **config), args, TPU)


def _add(x, y, *, rows, cols, block_rows, block_cols, grid, dimension_semantics, dtype):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((rows, cols), x.dtype),
        grid=grid,
        in_specs=[spec, spec],
        out_specs=spec,
        compiler_params=pltriton.CompilerParams(),
    )(x, y)


@TRITON_DEPRECATED
@LOWERING
@given(pvs.tiled_configs(backend="triton", dtypes=("float32", "float16"), max_block_tiles=4))
def test_tiled_configs_lower_for_triton(config):
    struct = jax.ShapeDtypeStruct((config["rows"], config["cols"]), jnp.dtype(config["dtype"]))
    _lower(functools.partial(_add, **config), [struct, struct], GPU)
