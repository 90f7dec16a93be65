"""Forced interpreter modes, the params of a TPU interpret run, the interpreters' state
and logs (JAX 0.12 internals)."""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from pallas_verify._jax_compat.versions import (
    interpret_params,
    interpret_params_class,
    interpret_params_source,
    tpu_info_modules,
)

__all__ = [
    "RACE_LOGGERS",
    "capture_logs",
    "force_interpret",
    "forced_interpret",
    "masked_load_unsupported",
    "reset_interpreters",
    "tpu_run_params",
    "tpu_run_source",
    "tpu_target",
]

# Loggers that report races with on_race="warn" (TPU and GPU interpret modes; a racing
# write is reported through the ROOT logger, a racing read through the module's), and the
# one that logs every failed interpreter callback at ERROR.
RACE_LOGGERS = (
    "jax._src.pallas.mosaic.interpret.race_detection_state",
    "jax._src.pallas.mosaic_gpu.interpret.race_detection_state",
    "",
)
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


# What every TPU interpret run pallas-verify makes is given before its mode's own fields:
# races reported (logged, ``races_found`` set) rather than raised, which is what releases
# without ``on_race`` (before 0.12) do anyway; buffers padded to the chip's tiles, so a
# DMA of a whole tile past an array's logical end (legal on hardware) reads no
# out-of-bounds memory. A mode may set either field itself.
_TPU_RUN: Mapping[str, Any] = {"on_race": "warn", "buffer_bounds": "padded"}


def tpu_run_params(mode: Mapping[str, Any], *,
                   recorder: Callable[[tuple[int, ...], int], None] | None = None) -> Any:
    """``pltpu.InterpretParams`` of a TPU interpret run in ``mode`` (InterpretParams fields)
    on the installed JAX: races reported, not raised; padded buffer bounds;
    ``recorder(grid point, core)`` called for every grid point the run takes, in the order
    it runs them (its ``grid_point_recorder``)."""
    recorded = {} if recorder is None else {"grid_point_recorder": _grid_point_recorder(recorder)}
    return interpret_params("tpu", **{**_TPU_RUN, **recorded, **mode})


@functools.cache
def _grid_point_recorder(recorder: Callable[[tuple[int, ...], int], None]) -> Callable[..., Any]:
    """``recorder`` as TPU interpret mode calls a ``grid_point_recorder``: with a token it
    must return, the grid point as an array and the core as a scalar, from XLA's callback
    threads. One function per recorder: the params are part of jax's trace cache key, so a
    new callable per run would retrace every case."""

    def called(token: Any, grid_point: Any, core_id: Any) -> Any:
        # numpy, not iteration: iterating a jax array dispatches (and may compile) an unstack
        recorder(tuple(np.asarray(grid_point).tolist()), int(core_id))
        return token

    return called


def tpu_run_source(mode: Mapping[str, Any]) -> str:
    """``tpu_run_params(mode)`` as plain-jax source (for reproducers; no recorder)."""
    return interpret_params_source("tpu", {**_TPU_RUN, **mode})


def forced_interpret() -> Any:
    """The ``interpret`` value every ``pallas_call`` traced now is forced to (``force_interpret``'s
    ``params``), or None outside it."""
    from jax._src import config

    return config.pallas_tpu_interpret_mode_context_manager.value


def masked_load_unsupported(interpret: Any) -> str | None:
    """Why the interpreter ``interpret`` (an ``interpret=`` value, as ``forced_interpret``
    gives it) cannot run a masked load (``pltpu.load(ref, mask=m)``), or None when it can:
    TPU interpret mode raises ``NotImplementedError: masked load_p`` (JAX 0.10 to 0.12)."""
    tpu_params = interpret_params_class("tpu")
    if tpu_params is not None and isinstance(interpret, tpu_params):
        return "TPU interpret mode (JAX 0.10 to 0.12) cannot run a masked load (NotImplementedError: masked load_p)"
    return None


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
    two device lookups of jax's TPU chip table (``versions.tpu_info_modules``) are
    redirected here; on a TPU host, or under an abstract TPU device already, nothing
    changes.
    """
    modules = tpu_info_modules()
    saved = [(m.get_device_kind, m.get_num_device_cores) for m in modules]
    if modules[0].chip_version_from_device_kind(saved[0][0]()) is not None:
        yield
        return
    for module in modules:
        module.get_device_kind = lambda: device_kind
        module.get_num_device_cores = lambda: num_cores
    try:
        yield
    finally:
        for module, (kind, cores) in zip(modules, saved, strict=True):
            module.get_device_kind, module.get_num_device_cores = kind, cores


def reset_interpreters() -> None:
    """Clear interpreter state left behind by a failed run, so the next run is clean.

    TPU interpret mode orders its callbacks with JAX's runtime token. A run that failed
    after dispatch leaves its error in that token, and ``jax.effects_barrier`` raises it
    without forgetting it: every later computation with an ordered effect would then
    fail with the old run's error, charged to a kernel that never raised it.
    """
    import jax
    from jax._src import dispatch
    from jax._src.pallas.mosaic_gpu.interpret import interpret_pallas_call as gi
    from jax.experimental.pallas import tpu as pltpu

    try:
        jax.effects_barrier()
    except Exception:  # the failed run's own error, already recorded by the caller
        dispatch.runtime_tokens.clear()
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
