"""The one place that touches ``jax._src``: forced interpreter modes and their state.

Everything here is specific to JAX 0.12 (see PALLAS_ON_CPU.md); when JAX changes, this
module is the only one to update.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from collections.abc import Iterator
from typing import Any

from pallas_verify.case import ErrorInfo

__all__ = [
    "GRIDLESS_KERNELS",
    "LIMITATIONS",
    "RACE_LOGGERS",
    "Limitation",
    "capture_logs",
    "error_info",
    "force_interpret",
    "index_map_function",
    "reset_interpreters",
    "tpu_target",
    "upstream_limitation",
    "written_refs",
]

# Primitives of kernels without a grid or BlockSpecs (pl.kernel over a mesh, core_map):
# the static check names them as skipped rather than passing over them in silence.
GRIDLESS_KERNELS = frozenset({"core_map", "mpmd_map"})

# Loggers that report races with on_race="warn" (TPU and GPU interpret modes; a racing
# write is reported through the ROOT logger, a racing read through the module's), and the
# one that logs every failed interpreter callback at ERROR.
RACE_LOGGERS = (
    "jax._src.pallas.mosaic.interpret.race_detection_state",
    "jax._src.pallas.mosaic_gpu.interpret.race_detection_state",
    "",
)
RACE_MARKER = "RACE DETECTED"
_CALLBACK_LOGGER = "jax._src.callback"
_CLOCK_REPR = re.compile(r" at 0x[0-9a-f]+")


@contextlib.contextmanager
def force_interpret(params: Any) -> Iterator[None]:
    """Trace every ``pallas_call`` inside with ``interpret=params``.

    ``params`` may be ``True`` (HLO interpreter), a ``pltpu.InterpretParams`` (TPU
    interpret mode) or a ``plgpu.InterpretGPUParams`` (GPU interpret mode): pallas_call
    uses ``that value or interpret``, so one config value serves all three.
    """
    from jax._src import config

    prev = config.pallas_tpu_interpret_mode_context_manager.swap_local(params)
    try:
        yield
    finally:
        config.pallas_tpu_interpret_mode_context_manager.set_local(prev)


def index_map_function(closed: Any) -> Any:
    """A pure function of ``(*grid_indices, *prefetch_values)`` for an index-map jaxpr.

    Index maps read scalar-prefetch operands as SMEM refs, indexed with typed-int literals
    (jax's splash attention); evaluating the stateful jaxpr under vmap fails (``Invalid
    type of idxer: TypedInt``), so the refs are discharged into plain arrays first, as
    Pallas's own interpreter does (``BlockMapping.compute_start_indices_interpret``).
    The function returns the block indices followed by the (unchanged) prefetch values.
    """
    import jax.extend as jex
    from jax._src.state import discharge

    return jex.core.jaxpr_as_fun(discharge.discharge_state(closed, strip_memory_space=True))


def written_refs(jaxpr: Any) -> list[Any]:
    """The inputs (vars, or positions) of ``jaxpr`` that it writes or accumulates into."""
    from jax._src.state import types as state_types

    kinds = (state_types.WriteEffect, state_types.AccumEffect)
    return [eff.input for eff in jaxpr.effects if isinstance(eff, kinds)]


# The chip whose tiling TPU interpret mode pads buffers to under buffer_bounds="padded"
# (every current TPU tiles 32-bit arrays in (8, 128) tiles).
TPU_DEVICE_KIND = "TPU v5 lite"


@contextlib.contextmanager
def tpu_target(device_kind: str = TPU_DEVICE_KIND, num_cores: int = 1) -> Iterator[None]:
    """Trace as for a TPU of ``device_kind``: what ``buffer_bounds="padded"`` needs to
    compute each buffer's tiled (padded) shape on a machine without TPUs.

    The documented route, ``use_abstract_mesh(AbstractMesh(..., abstract_device=...))``,
    also replaces the context mesh, so a kernel inside ``shard_map`` over a concrete mesh
    fails ("The context mesh ... should match the mesh passed to shard_map"). Only the
    two device lookups of ``jax._src.tpu_info`` are redirected here; on a TPU host, or
    under an abstract TPU device already, nothing changes.
    """
    from jax._src import tpu_info

    saved = tpu_info.get_device_kind, tpu_info.get_num_device_cores
    if tpu_info.chip_version_from_device_kind(saved[0]()) is not None:
        yield
        return
    tpu_info.get_device_kind = lambda: device_kind
    tpu_info.get_num_device_cores = lambda: num_cores
    try:
        yield
    finally:
        tpu_info.get_device_kind, tpu_info.get_num_device_cores = saved


def reset_interpreters() -> None:
    """Clear interpreter state left behind by a failed run, so the next run is clean."""
    import jax
    from jax._src.pallas.mosaic_gpu.interpret import interpret_pallas_call as gi
    from jax.experimental.pallas import tpu as pltpu

    with contextlib.suppress(Exception):
        jax.effects_barrier()
    pltpu.reset_tpu_interpret_mode_state()
    gi.reset_gpu_interpret_mode_state()


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.name, _CLOCK_REPR.sub("", record.getMessage())))


@contextlib.contextmanager
def capture_logs() -> Iterator[list[tuple[str, str]]]:
    """Collect (logger, message) from the interpreters' race and callback loggers.

    The module loggers stop propagating meanwhile, so a captured race report or callback
    failure does not also print to the user's terminal; the handler on the root logger
    also keeps a bare ``logging.warning`` from installing a stderr handler for good.
    """
    collector = _Collector()
    loggers = [logging.getLogger(n or None) for n in (*RACE_LOGGERS, _CALLBACK_LOGGER)]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(collector)
        lg.propagate = False
        lg.setLevel(logging.WARNING)
    try:
        yield collector.records
    finally:
        for lg, (propagate, level) in zip(loggers, saved, strict=True):
            lg.removeHandler(collector)
            lg.propagate, lg.level = propagate, level


# An interpreter callback failure is a JaxRuntimeError whose text embeds the real
# exception: "INTERNAL: CpuCallback error calling callback: Traceback ... \nType: msg".
_EMBEDDED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (.*)$")
_WRAPPER_TAIL = "\n--------------------\nFor simplicity, JAX has removed"


def error_info(exc: BaseException) -> ErrorInfo:
    """Reduce ``exc`` to its meaningful type and message, unwrapping callback errors."""
    import traceback

    text = str(exc)
    tb = "".join(traceback.format_exception(exc))
    if "CpuCallback error" in text or ("callback" in text.lower() and "Traceback" in text):
        embedded = _embedded_error(text)
        if embedded is not None:
            return ErrorInfo(type=embedded[0], message=embedded[1], traceback=tb)
    return ErrorInfo(type=type(exc).__name__, message=text.split(_WRAPPER_TAIL)[0].strip(), traceback=tb)


def _embedded_error(text: str) -> tuple[str, str] | None:
    text = text.split(_WRAPPER_TAIL)[0]
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        match = _EMBEDDED.match(lines[i])
        if match:
            rest = "\n".join([match.group(2), *lines[i + 1 :]]).strip()
            return match.group(1).rsplit(".", 1)[-1], rest
    return None


JAX_VERSION_SEEN = "0.12.0.1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limitation:
    """A known upstream failure: a case on ``backend`` (under ``transform``; None for any)
    whose error's text or traceback holds every one of ``markers`` hit it, not the kernel.

    Attributes:
      backend: the backend's registry name.
      transform: the transform it needs, or None when it shows with or without one.
      markers: evidence copied from the real traceback; all must appear.
      reason: what fails upstream and where the kernel can be checked instead.
      jax_version: the JAX version it was reproduced on.
    """

    backend: str
    transform: str | None
    markers: tuple[str, ...]
    reason: str
    jax_version: str = JAX_VERSION_SEEN

    def matches(self, where: str, *, backend: str, transform: str | None) -> bool:
        return (backend == self.backend and self.transform in (None, transform)
                and all(m in where for m in self.markers))


# A case that hits one is an "unsupported" cell with the reason, never a finding and
# never a pass.
LIMITATIONS = (
    Limitation(backend="gpu_interpret", transform=None, markers=("has_trivial_window()",), reason=(
        "GPU interpret mode runs pl.pallas_call only with whole-array blocks (JAX asserts "
        "BlockMapping.has_trivial_window); use plgpu.kernel, or run this kernel on interpret/tpu_interpret")),
    Limitation(backend="tpu_interpret", transform="vmap", markers=("_get_randomized_grid_coordinates",), reason=(
        "TPU interpret mode cannot run jax.vmap of a pallas_call that sets dimension_semantics: vmap adds a "
        "grid dimension without a semantic and the interpreter's grid randomisation zips the grid with the "
        "semantics (ValueError: safe_zip length mismatch); vmap is checked on interpret and on mosaic_tpu, "
        "whose lowering adds a 'parallel' semantic per vmapped dimension")),
    # Any vmapped pallas_call: the vmap transform, or jax.vmap inside the kernel (jax's GPU
    # decode attention, paged attention, layer_norm and rms_norm vmap their pallas_calls).
    Limitation(backend="gpu_interpret", transform=None,
               markers=("unexpected keyword argument 'kernel_arg_transforms'", "batching_rule"), reason=(
        "GPU interpret mode cannot run a vmapped pallas_call (the vmap transform, or jax.vmap inside the "
        "kernel): pallas_call's batching rule rejects the kernel_arg_transforms parameter that GPU interpret "
        "mode sets (TypeError); check the kernel on interpret")),
    # jax.experimental.pallas.ops.tpu.ragged_paged_attention hits these two.
    Limitation(backend="interpret", transform=None,
               markers=("'TypedInt' object has no attribute 'shape'", "_swap_discharge_rule"), reason=(
        "the HLO interpreter cannot discharge a store into a ref indexed with a typed-int constant "
        "(AttributeError: 'TypedInt' object has no attribute 'shape' in pallas's _swap_discharge_rule; "
        "jax's ragged paged attention hits it); check the kernel on mosaic_tpu")),
    Limitation(backend="tpu_interpret", transform=None,
               markers=("'ReshapeTransform' object has no attribute 'indices'", "to_range"), reason=(
        "TPU interpret mode cannot read through a reshaped ref (AttributeError: 'ReshapeTransform' object "
        "has no attribute 'indices' in the interpreter's to_range; jax's ragged paged attention hits it); "
        "check the kernel on mosaic_tpu")),
)


def upstream_limitation(error: ErrorInfo | None, *, backend: str, transform: str | None) -> str | None:
    """Why ``error`` on ``backend`` (under ``transform``) is a known upstream limitation."""
    if error is None:
        return None
    where = error.traceback + error.message
    for row in LIMITATIONS:
        if row.matches(where, backend=backend, transform=transform):
            return f"{row.reason} (upstream limitation, reproduced on JAX {row.jax_version})"
    return None
