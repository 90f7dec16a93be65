"""The one place that touches ``jax._src``: forced interpreter modes and their state.

Everything here is specific to JAX 0.12 (see PALLAS_ON_CPU.md); when JAX changes, this
module is the only one to update.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

from pallas_verify.case import ErrorInfo

__all__ = [
    "RACE_LOGGERS",
    "capture_logs",
    "error_info",
    "force_interpret",
    "reset_interpreters",
    "upstream_limitation",
]

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


# Known upstream (JAX 0.12) limitations: (backend, transform or None for any, a marker in
# the error's text or traceback, the reason). A case that hits one is an "unsupported"
# cell with the reason, never a finding and never a pass.
_LIMITATIONS = (
    ("gpu_interpret", None, "has_trivial_window()",
     "GPU interpret mode runs pl.pallas_call only with whole-array blocks (JAX 0.12 asserts "
     "BlockMapping.has_trivial_window); use plgpu.kernel, or run this kernel on "
     "interpret/tpu_interpret"),
    ("tpu_interpret", "vmap", "_get_randomized_grid_coordinates",
     "TPU interpret mode (JAX 0.12) cannot run jax.vmap of a pallas_call that sets "
     "dimension_semantics: vmap adds a grid dimension without a semantic and the "
     "interpreter's grid randomisation zips the grid with the semantics (ValueError: "
     "safe_zip length mismatch); vmap is checked on interpret and on mosaic_tpu, whose "
     "lowering adds a 'parallel' semantic per vmapped dimension"),
    ("gpu_interpret", "vmap", "unexpected keyword argument 'kernel_arg_transforms'",
     "GPU interpret mode (JAX 0.12) cannot run jax.vmap of a pallas_call: pallas_call's "
     "batching rule rejects the kernel_arg_transforms parameter that GPU interpret mode "
     "sets (TypeError); vmap is checked on interpret"),
    ("tpu_interpret", None, "doesn't match function result type",
     "TPU interpret mode (JAX 0.12) cannot run input_output_aliases on an array that is not a "
     "whole number of blocks: it pads the aliased buffer to the blocks and fails MLIR "
     "verification (docs/upstream-findings.md); the HLO interpreter runs it"),
)


def upstream_limitation(error: ErrorInfo | None, *, backend: str, transform: str | None) -> str | None:
    """Why ``error`` on ``backend`` (under ``transform``) is a known upstream limitation."""
    if error is None:
        return None
    where = error.traceback + error.message
    for row_backend, row_transform, marker, reason in _LIMITATIONS:
        if backend == row_backend and row_transform in (None, transform) and marker in where:
            return reason
    return None
