"""Hypothesis strategies for Pallas kernels: sizes, blocks, grids, semantics, modes, arrays,
and whole random Pallas programs (``pallas_programs``).

Every strategy is valid by construction and shrinks toward the simplest case (one block,
full-array blocks, float32, small values, no raggedness); each docstring says how.
"""

from strategies.arrays import DEFAULT_INT_MAGNITUDE as DEFAULT_INT_MAGNITUDE
from strategies.arrays import arrays as arrays
from strategies.arrays import dtypes as dtypes
from strategies.arrays import edge_values as edge_values
from strategies.blocks import TPU_LANES as TPU_LANES
from strategies.blocks import TPU_RANK1_CHUNK as TPU_RANK1_CHUNK
from strategies.blocks import TRITON_MAX_BLOCK_ELEMENTS as TRITON_MAX_BLOCK_ELEMENTS
from strategies.blocks import block_shapes as block_shapes
from strategies.blocks import mosaic_gpu_block_shapes as mosaic_gpu_block_shapes
from strategies.blocks import preferred_sublane_tile as preferred_sublane_tile
from strategies.blocks import tpu_block_shapes as tpu_block_shapes
from strategies.blocks import triton_block_shapes as triton_block_shapes
from strategies.compiler_params import GPU_DIMENSION_SEMANTICS as GPU_DIMENSION_SEMANTICS
from strategies.compiler_params import TPU_OVERRIDE_FIELDS as TPU_OVERRIDE_FIELDS
from strategies.compiler_params import mosaic_gpu_compiler_params as mosaic_gpu_compiler_params
from strategies.compiler_params import (
    mosaic_tpu_compiler_overrides as mosaic_tpu_compiler_overrides,
)
from strategies.compiler_params import tpu_field_choices as tpu_field_choices
from strategies.compiler_params import vmem_limits as vmem_limits
from strategies.errors import InvalidStrategyType as InvalidStrategyType
from strategies.errors import InvalidStrategyValue as InvalidStrategyValue
from strategies.errors import StrategyError as StrategyError
from strategies.grids import LAYOUTS as LAYOUTS
from strategies.grids import Tiling as Tiling
from strategies.grids import cdiv_grid as cdiv_grid
from strategies.grids import grids as grids
from strategies.modes import INTERPRET_PLATFORMS as INTERPRET_PLATFORMS
from strategies.modes import dma_execution_modes as dma_execution_modes
from strategies.modes import gpu_interpret_modes as gpu_interpret_modes
from strategies.modes import gpu_interpret_params as gpu_interpret_params
from strategies.modes import literal_choices as literal_choices
from strategies.modes import make_interpret_params as make_interpret_params
from strategies.modes import tpu_interpret_modes as tpu_interpret_modes
from strategies.modes import tpu_interpret_params as tpu_interpret_params
from strategies.programs import SKELETONS as SKELETONS
from strategies.programs import pallas_programs as pallas_programs
from strategies.programs import program_inputs as program_inputs
from strategies.programs import program_productions as program_productions
from strategies.semantics import SEMANTICS as SEMANTICS
from strategies.semantics import dimension_semantics as dimension_semantics
from strategies.semantics import unsafe_dimension_semantics as unsafe_dimension_semantics
from strategies.shapes import RAGGED_KINDS as RAGGED_KINDS
from strategies.shapes import array_shapes as array_shapes
from strategies.shapes import ragged_sizes as ragged_sizes
from strategies.tiled import AXIS_ROLES as AXIS_ROLES
from strategies.tiled import tiled_configs as tiled_configs

__all__ = [
    "AXIS_ROLES",
    "DEFAULT_INT_MAGNITUDE",
    "GPU_DIMENSION_SEMANTICS",
    "INTERPRET_PLATFORMS",
    "LAYOUTS",
    "RAGGED_KINDS",
    "SEMANTICS",
    "SKELETONS",
    "TPU_LANES",
    "TPU_OVERRIDE_FIELDS",
    "TPU_RANK1_CHUNK",
    "TRITON_MAX_BLOCK_ELEMENTS",
    "InvalidStrategyType",
    "InvalidStrategyValue",
    "StrategyError",
    "Tiling",
    "array_shapes",
    "arrays",
    "block_shapes",
    "cdiv_grid",
    "dimension_semantics",
    "dma_execution_modes",
    "dtypes",
    "edge_values",
    "gpu_interpret_modes",
    "gpu_interpret_params",
    "grids",
    "literal_choices",
    "make_interpret_params",
    "mosaic_gpu_block_shapes",
    "mosaic_gpu_compiler_params",
    "mosaic_tpu_compiler_overrides",
    "pallas_programs",
    "preferred_sublane_tile",
    "program_inputs",
    "program_productions",
    "ragged_sizes",
    "tiled_configs",
    "tpu_block_shapes",
    "tpu_field_choices",
    "tpu_interpret_modes",
    "tpu_interpret_params",
    "triton_block_shapes",
    "unsafe_dimension_semantics",
    "vmem_limits",
]
