"""The one place that knows JAX internals (``jax._src``, pallas_call eqn params,
interpreter state, the text of interpreter errors) and the facts the rest of the package
takes from JAX's own code: how a kernel equation reads (``tracing``), which blocks
Mosaic TPU accepts (``mosaic_blocks``), how TPU interpret mode numbers memory and names
it in its diagnostics (``numbering``), what a TPU interpret run is given
(``interpret.tpu_run_params``), what its knobs reach (``knobs``, ``memwatch``).

It serves every supported JAX release (0.10, 0.11, 0.12): what differs between them is
probed in ``versions`` (fields, interpreters, module homes), never read off a version
string, and what the installed release lacks is said by ``version_gaps``. When JAX
changes, this package is the only one to update: no other module imports ``jax._src``,
compares a primitive with ``"pallas_call"`` or reads a kernel equation's Pallas params
(``tests/quality/test_layers.py``). Callers use the names re-exported here.
"""

from pallas_verify._jax_compat.auto_barriers import (
    read_and_written_without_auto_barriers as read_and_written_without_auto_barriers,
)
from pallas_verify._jax_compat.bounds import checked_bounds as checked_bounds
from pallas_verify._jax_compat.deadlock import DeadlockError as DeadlockError
from pallas_verify._jax_compat.deadlock import deadlock_watch as deadlock_watch
from pallas_verify._jax_compat.devices import abstract_mesh_of as abstract_mesh_of
from pallas_verify._jax_compat.devices import backends_started as backends_started
from pallas_verify._jax_compat.errors import ASYNC_ORDER_MARKER as ASYNC_ORDER_MARKER
from pallas_verify._jax_compat.errors import DEADLOCK_MARKER as DEADLOCK_MARKER
from pallas_verify._jax_compat.errors import LIMITATIONS as LIMITATIONS
from pallas_verify._jax_compat.errors import RACE_MARKER as RACE_MARKER
from pallas_verify._jax_compat.errors import REVISIT_ANY_DECLARED as REVISIT_ANY_DECLARED
from pallas_verify._jax_compat.errors import Limitation as Limitation
from pallas_verify._jax_compat.errors import (
    allocates_hbm_in_run_scoped as allocates_hbm_in_run_scoped,
)
from pallas_verify._jax_compat.errors import error_info as error_info
from pallas_verify._jax_compat.errors import error_kind as error_kind
from pallas_verify._jax_compat.errors import semaphore_leaks as semaphore_leaks
from pallas_verify._jax_compat.errors import upstream_limitation as upstream_limitation
from pallas_verify._jax_compat.errors import vmem_exhausted as vmem_exhausted
from pallas_verify._jax_compat.frames import Frame as Frame
from pallas_verify._jax_compat.frames import operation_site as operation_site
from pallas_verify._jax_compat.frames import tool_frame as tool_frame
from pallas_verify._jax_compat.frames import upstream_frame as upstream_frame
from pallas_verify._jax_compat.gpu import TF32 as TF32
from pallas_verify._jax_compat.gpu import TF32_BITS as TF32_BITS
from pallas_verify._jax_compat.gpu import default_core_count as default_core_count
from pallas_verify._jax_compat.gpu import dots_in_tf32 as dots_in_tf32
from pallas_verify._jax_compat.gpu import gpu_device_facts as gpu_device_facts
from pallas_verify._jax_compat.gpu import sets_approx_math as sets_approx_math
from pallas_verify._jax_compat.interpret import RACE_LOGGERS as RACE_LOGGERS
from pallas_verify._jax_compat.interpret import capture_logs as capture_logs
from pallas_verify._jax_compat.interpret import force_interpret as force_interpret
from pallas_verify._jax_compat.interpret import forced_interpret as forced_interpret
from pallas_verify._jax_compat.interpret import masked_load_unsupported as masked_load_unsupported
from pallas_verify._jax_compat.interpret import reset_interpreters as reset_interpreters
from pallas_verify._jax_compat.interpret import tpu_run_params as tpu_run_params
from pallas_verify._jax_compat.interpret import tpu_run_source as tpu_run_source
from pallas_verify._jax_compat.interpret import tpu_target as tpu_target
from pallas_verify._jax_compat.invariants import grid_invariant_errors as grid_invariant_errors
from pallas_verify._jax_compat.knobs import EXPLICIT_DMA as EXPLICIT_DMA
from pallas_verify._jax_compat.knobs import FILL_REACHES as FILL_REACHES
from pallas_verify._jax_compat.knobs import KERNEL_FACTS as KERNEL_FACTS
from pallas_verify._jax_compat.knobs import PARALLEL_GRID as PARALLEL_GRID
from pallas_verify._jax_compat.knobs import kernel_facts as kernel_facts
from pallas_verify._jax_compat.memwatch import RUN_TIME as RUN_TIME
from pallas_verify._jax_compat.memwatch import MemoryPlan as MemoryPlan
from pallas_verify._jax_compat.memwatch import on_grid_point as on_grid_point
from pallas_verify._jax_compat.memwatch import run_time_knobs as run_time_knobs
from pallas_verify._jax_compat.memwatch import watch as watch_memory
from pallas_verify._jax_compat.mosaic_blocks import MOSAIC_TPU_SITES as MOSAIC_TPU_SITES
from pallas_verify._jax_compat.mosaic_blocks import TPU_TILE as TPU_TILE
from pallas_verify._jax_compat.mosaic_blocks import mosaic_block_problem as mosaic_block_problem
from pallas_verify._jax_compat.numbering import FIRST_DMA as FIRST_DMA
from pallas_verify._jax_compat.numbering import Access as Access
from pallas_verify._jax_compat.numbering import Leak as Leak
from pallas_verify._jax_compat.numbering import Race as Race
from pallas_verify._jax_compat.numbering import diagnostic_lines as diagnostic_lines
from pallas_verify._jax_compat.numbering import memory_numbers as memory_numbers
from pallas_verify._jax_compat.numbering import named_references as named_references
from pallas_verify._jax_compat.params import SIDE_EFFECT_DROPPED as SIDE_EFFECT_DROPPED
from pallas_verify._jax_compat.params import SIDE_EFFECTS as SIDE_EFFECTS
from pallas_verify._jax_compat.params import MosaicCall as MosaicCall
from pallas_verify._jax_compat.params import count_calls as count_calls
from pallas_verify._jax_compat.params import evaluator as evaluator
from pallas_verify._jax_compat.params import mosaic_calls as mosaic_calls
from pallas_verify._jax_compat.params import tagged as tagged
from pallas_verify._jax_compat.params import tpu_vmem_bytes as tpu_vmem_bytes
from pallas_verify._jax_compat.params import with_compiler_params as with_compiler_params
from pallas_verify._jax_compat.shapes import ShapePlan as ShapePlan
from pallas_verify._jax_compat.shapes import shape_plan as shape_plan
from pallas_verify._jax_compat.tracing import GRIDLESS_KERNELS as GRIDLESS_KERNELS
from pallas_verify._jax_compat.tracing import SEMAPHORE_SPACE as SEMAPHORE_SPACE
from pallas_verify._jax_compat.tracing import UNWINDOWED_SPACES as UNWINDOWED_SPACES
from pallas_verify._jax_compat.tracing import BlockMapping as BlockMapping
from pallas_verify._jax_compat.tracing import GridMapping as GridMapping
from pallas_verify._jax_compat.tracing import bind as bind
from pallas_verify._jax_compat.tracing import call_body as call_body
from pallas_verify._jax_compat.tracing import call_name as call_name
from pallas_verify._jax_compat.tracing import equations as equations
from pallas_verify._jax_compat.tracing import evaluate as evaluate
from pallas_verify._jax_compat.tracing import grid_mapping as grid_mapping
from pallas_verify._jax_compat.tracing import grid_mapping_class as grid_mapping_class
from pallas_verify._jax_compat.tracing import index_map_function as index_map_function
from pallas_verify._jax_compat.tracing import is_kernel as is_kernel
from pallas_verify._jax_compat.tracing import is_pallas_call as is_pallas_call
from pallas_verify._jax_compat.tracing import kernel_params as kernel_params
from pallas_verify._jax_compat.tracing import kernel_site as kernel_site
from pallas_verify._jax_compat.tracing import sub_jaxprs as sub_jaxprs
from pallas_verify._jax_compat.tracing import written_refs as written_refs
from pallas_verify._jax_compat.versions import Gap as Gap
from pallas_verify._jax_compat.versions import MissingFeature as MissingFeature
from pallas_verify._jax_compat.versions import gaps as version_gaps
from pallas_verify._jax_compat.versions import gpu_interpret_gap as gpu_interpret_gap
from pallas_verify._jax_compat.versions import interpret_fields as interpret_fields
from pallas_verify._jax_compat.versions import interpret_params as interpret_params
from pallas_verify._jax_compat.versions import interpret_params_source as interpret_params_source
from pallas_verify._jax_compat.versions import jax_version as jax_version
from pallas_verify._jax_compat.wgmma import wgmma_read_before_wait as wgmma_read_before_wait

__all__ = [
    "ASYNC_ORDER_MARKER",
    "DEADLOCK_MARKER",
    "EXPLICIT_DMA",
    "FILL_REACHES",
    "FIRST_DMA",
    "GRIDLESS_KERNELS",
    "KERNEL_FACTS",
    "LIMITATIONS",
    "MOSAIC_TPU_SITES",
    "PARALLEL_GRID",
    "RACE_LOGGERS",
    "RACE_MARKER",
    "REVISIT_ANY_DECLARED",
    "RUN_TIME",
    "SEMAPHORE_SPACE",
    "SIDE_EFFECTS",
    "SIDE_EFFECT_DROPPED",
    "TF32",
    "TF32_BITS",
    "TPU_TILE",
    "UNWINDOWED_SPACES",
    "Access",
    "BlockMapping",
    "DeadlockError",
    "Frame",
    "Gap",
    "GridMapping",
    "Leak",
    "Limitation",
    "MemoryPlan",
    "MissingFeature",
    "MosaicCall",
    "Race",
    "ShapePlan",
    "abstract_mesh_of",
    "allocates_hbm_in_run_scoped",
    "bind",
    "call_body",
    "call_name",
    "capture_logs",
    "checked_bounds",
    "count_calls",
    "deadlock_watch",
    "default_core_count",
    "diagnostic_lines",
    "dots_in_tf32",
    "equations",
    "error_info",
    "error_kind",
    "evaluate",
    "evaluator",
    "force_interpret",
    "forced_interpret",
    "gpu_device_facts",
    "gpu_interpret_gap",
    "grid_invariant_errors",
    "grid_mapping",
    "grid_mapping_class",
    "index_map_function",
    "interpret_fields",
    "interpret_params",
    "interpret_params_source",
    "is_kernel",
    "is_pallas_call",
    "jax_version",
    "kernel_facts",
    "kernel_params",
    "kernel_site",
    "masked_load_unsupported",
    "memory_numbers",
    "mosaic_block_problem",
    "mosaic_calls",
    "named_references",
    "on_grid_point",
    "operation_site",
    "read_and_written_without_auto_barriers",
    "reset_interpreters",
    "run_time_knobs",
    "semaphore_leaks",
    "sets_approx_math",
    "shape_plan",
    "sub_jaxprs",
    "tagged",
    "tool_frame",
    "tpu_run_params",
    "tpu_run_source",
    "tpu_target",
    "tpu_vmem_bytes",
    "upstream_frame",
    "upstream_limitation",
    "version_gaps",
    "vmem_exhausted",
    "watch_memory",
    "wgmma_read_before_wait",
    "with_compiler_params",
    "written_refs",
]
