"""Bad arguments fail at construction, naming the argument, its value and the fix."""

import pytest

import strategies as pvs

BAD_ARGUMENTS = [
    (
        pvs.ragged_sizes,
        {"block": 0},
        pvs.InvalidStrategyValue,
        r"ragged_sizes\(block=0\): must be >= 1",
    ),
    (
        pvs.ragged_sizes,
        {"block": 8, "kinds": ("ragged",)},
        pvs.InvalidStrategyValue,
        r"not one of .*'exact'",
    ),
    (
        pvs.ragged_sizes,
        {"block": 1, "kinds": ("small",), "max_blocks": 1},
        pvs.InvalidStrategyValue,
        r"Add 'exact' to kinds",
    ),
    (pvs.ragged_sizes, {"block": 8.0}, pvs.InvalidStrategyType, r"block=8.0\): expected an int"),
    (
        pvs.array_shapes,
        {"block_shape": ()},
        pvs.InvalidStrategyValue,
        r"needs at least one dimension",
    ),
    (
        pvs.array_shapes,
        {"block_shape": "8x128"},
        pvs.InvalidStrategyType,
        r"expected a tuple of ints",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (8, 0)},
        pvs.InvalidStrategyValue,
        r"array_shape\[1\]=0\): must be >= 1",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (8, 128), "sublane_tile": 12},
        pvs.InvalidStrategyValue,
        r"sublane_tile=12\): must be a multiple of 8, e.g. sublane_tile=16",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (8, 128), "dtype": "float64"},
        pvs.InvalidStrategyValue,
        r"no 64-bit vectors",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (8, 128), "dtype": "floot32"},
        pvs.InvalidStrategyType,
        r"dtype='floot32'\): not a dtype",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (4096, 4096), "max_grid_points": 2, "max_block_elements": 2**20},
        pvs.InvalidStrategyValue,
        r"needs at least 16 grid points.*max_grid_points=16",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (8, 128), "max_block_elements": 100},
        pvs.InvalidStrategyValue,
        r"max_block_elements=100\).*Raise max_block_elements",
    ),
    (
        pvs.tpu_block_shapes,
        {"array_shape": (8, 128), "allow_squeezed": 1},
        pvs.InvalidStrategyType,
        r"allow_squeezed=1\): expected True or False",
    ),
    (
        pvs.triton_block_shapes,
        {"array_shape": (8, 128), "max_grid_points": 0},
        pvs.InvalidStrategyValue,
        r"max_grid_points=0\): must be >= 1",
    ),
    (
        pvs.block_shapes,
        {"backend": "mosaic_tpuu", "array_shape": (8,)},
        pvs.InvalidStrategyValue,
        r"backend='mosaic_tpuu'\).*Did you mean 'mosaic_tpu'",
    ),
    (
        pvs.block_shapes,
        {"backend": 3, "array_shape": (8,)},
        pvs.InvalidStrategyType,
        r"backend=3\): expected a string",
    ),
    (
        pvs.grids,
        {"array_shape": (8, 128), "layouts": ("row-major",)},
        pvs.InvalidStrategyValue,
        r"Did you mean 'row_major'",
    ),
    (
        pvs.grids,
        {"array_shape": (8, 128), "layouts": ()},
        pvs.InvalidStrategyValue,
        r"layouts=\(\)\): must not be empty",
    ),
    (
        pvs.dimension_semantics,
        {"num_axes": 2, "reduction_axes": (2,)},
        pvs.InvalidStrategyValue,
        r"reduction_axes=2\): must be <= 1",
    ),
    (
        pvs.dimension_semantics,
        {"num_axes": 2, "reduction_axes": (1, 1)},
        pvs.InvalidStrategyValue,
        r"contains duplicates",
    ),
    (
        pvs.unsafe_dimension_semantics,
        {"num_axes": -1},
        pvs.InvalidStrategyValue,
        r"num_axes=-1\): must be >= 0",
    ),
    (
        pvs.tpu_interpret_modes,
        {"max_cores": 0},
        pvs.InvalidStrategyValue,
        r"max_cores=0\): must be >= 1",
    ),
    (
        pvs.tpu_interpret_modes,
        {"detect_races": "yes"},
        pvs.InvalidStrategyType,
        r"detect_races='yes'\): expected True or False",
    ),
    (
        pvs.tpu_interpret_modes,
        {"fixed": {"dma_mode": "eager"}},
        pvs.InvalidStrategyValue,
        r"'dma_mode' is not a tpu interpret param.*Did you mean 'dma_execution_mode'",
    ),
    (
        pvs.tpu_interpret_modes,
        {"fixed": {"dma_execution_mode": "lazy"}},
        pvs.InvalidStrategyValue,
        r"fixed\['dma_execution_mode'\]='lazy'\): not one of \('on_wait', 'eager'\)",
    ),
    (
        pvs.gpu_interpret_modes,
        {"fixed": {"vector_clock_size": 4}},
        pvs.InvalidStrategyValue,
        r"vector_clock_size",
    ),
    (
        pvs.make_interpret_params,
        {"mode": {}, "platform": "tpuu"},
        pvs.InvalidStrategyValue,
        r"platform='tpuu'\).*Did you mean 'tpu'",
    ),
    (
        pvs.make_interpret_params,
        {"mode": [("detect_races", True)]},
        pvs.InvalidStrategyType,
        r"expected a dict of interpret params",
    ),
    (
        pvs.arrays,
        {"shape": (4,), "max_magnitude": 0},
        pvs.InvalidStrategyValue,
        r"max_magnitude=0\): must be finite and > 0",
    ),
    (
        pvs.arrays,
        {"shape": (4,), "max_edge_values": -1},
        pvs.InvalidStrategyValue,
        r"max_edge_values=-1\): must be >= 0",
    ),
    (pvs.dtypes, {"backend": "cuda"}, pvs.InvalidStrategyValue, r"backend='cuda'\): not one of"),
    (
        pvs.tiled_configs,
        {"axes": {"grid": "lane"}},
        pvs.InvalidStrategyValue,
        r"axis name 'grid' must be an identifier other than",
    ),
    (
        pvs.tiled_configs,
        {"axes": {"m": "row"}},
        pvs.InvalidStrategyValue,
        r"axes\['m'\]='row'\): not one of",
    ),
    (
        pvs.tiled_configs,
        {"axes": {"m": "lane", "block_m": "lane"}},
        pvs.InvalidStrategyValue,
        r"collides with the block-size key",
    ),
    (
        pvs.tiled_configs,
        {"reduction_axes": ("k",)},
        pvs.InvalidStrategyValue,
        r"reduction_axes='k'\): not one of \('rows', 'cols'\)",
    ),
    (
        pvs.tiled_configs,
        {"reduction_axes": "cols"},
        pvs.InvalidStrategyType,
        r"expected a tuple of axis names",
    ),
    (
        pvs.tiled_configs,
        {"dtypes": "float32"},
        pvs.InvalidStrategyType,
        r"dtypes='float32'\): expected a non-empty tuple",
    ),
]


@pytest.mark.parametrize(("function", "kwargs", "error", "match"), BAD_ARGUMENTS)
def test_bad_arguments_raise_a_named_error(function, kwargs, error, match):
    with pytest.raises(error, match=match):
        function(**kwargs)


def test_errors_are_value_and_type_errors_under_one_root():
    assert issubclass(pvs.InvalidStrategyValue, ValueError)
    assert issubclass(pvs.InvalidStrategyType, TypeError)
    assert issubclass(pvs.InvalidStrategyValue, pvs.StrategyError)
    assert issubclass(pvs.InvalidStrategyType, pvs.StrategyError)


def test_strategy_functions_take_keyword_arguments_only():
    with pytest.raises(TypeError):
        pvs.ragged_sizes(128)  # type: ignore[misc]
