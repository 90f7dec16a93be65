"""Every public strategy runs at Hypothesis's default settings without a health-check failure."""

import pytest
from hypothesis import given

import strategies as pvs

STRATEGIES = {
    "ragged_sizes": pvs.ragged_sizes(block=128),
    "array_shapes": pvs.array_shapes(block_shape=(8, 128, 128)),
    "tpu_block_shapes": pvs.tpu_block_shapes(array_shape=(4, 1000, 3000), allow_squeezed=True),
    "triton_block_shapes": pvs.triton_block_shapes(array_shape=(5000, 5000), max_grid_points=32),
    "mosaic_gpu_block_shapes": pvs.mosaic_gpu_block_shapes(array_shape=(300, 300), dtype="int8"),
    "block_shapes": pvs.block_shapes(backend="mosaic_tpu:v6e", array_shape=(64, 64)),
    "grids": pvs.grids(array_shape=(512, 512), max_grid_points=16),
    "dimension_semantics": pvs.dimension_semantics(num_axes=3, reduction_axes=(2,)),
    "unsafe_dimension_semantics": pvs.unsafe_dimension_semantics(num_axes=3, reduction_axes=(2,)),
    "tpu_interpret_modes": pvs.tpu_interpret_modes(),
    "gpu_interpret_modes": pvs.gpu_interpret_modes(),
    "tpu_interpret_params": pvs.tpu_interpret_params(),
    "gpu_interpret_params": pvs.gpu_interpret_params(),
    "dma_execution_modes": pvs.dma_execution_modes(),
    "mosaic_gpu_compiler_params": pvs.mosaic_gpu_compiler_params(grid_rank=2),
    "mosaic_tpu_compiler_overrides": pvs.mosaic_tpu_compiler_overrides(vmem_bytes=128 << 20),
    "dtypes": pvs.dtypes(fp8=True),
    "arrays": pvs.arrays(shape=(512, 512), dtype="float32"),
    "tiled_configs": pvs.tiled_configs(axes={"m": "sublane", "n": "lane", "k": "lane"}),
    "pallas_programs": pvs.pallas_programs(),
    "program_inputs": pvs.program_inputs({"inputs": (((9, 300), "bfloat16", ("identity",)), ((1,), "int32", ("any",)))}),
}


HELPERS = {"cdiv_grid", "edge_values", "literal_choices", "make_interpret_params"}
HELPERS |= {"preferred_sublane_tile", "program_productions", "tpu_field_choices", "vmem_limits"}


def test_every_public_strategy_is_listed():
    functions = {name for name in pvs.__all__ if name[0].islower()}
    assert functions - HELPERS == set(STRATEGIES)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_no_health_check_failure_at_default_settings(name):
    @given(STRATEGIES[name])
    def draw(value):
        assert value is not None

    draw()
