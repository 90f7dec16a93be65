"""What one example runs (a Case) and what running it produced (an Outcome)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["UNSUPPORTED", "Case", "ErrorInfo", "Outcome"]

# ErrorInfo.type of an outcome whose backend cannot take this kernel at all (e.g. TPU
# compiler params on a GPU compiler): an unsupported cell, not a finding.
UNSUPPORTED = "Unsupported"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case:
    """One example on one backend.

    Attributes:
      spec: the KernelSpec under test.
      config: keyword arguments of the kernel, drawn from ``spec.configs``.
      inputs: positional arguments of the kernel (numpy arrays).
      backend: the backend's registry name, e.g. ``"tpu_interpret"``.
      mode: the knobs that backend drew for this example (plain data, JSON-able).
      transform: ``None`` for the bare kernel, else a transform name (``"vmap"``...).
    """

    spec: Any
    config: Mapping[str, Any]
    inputs: tuple[np.ndarray, ...]
    backend: str
    mode: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    transform: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """An exception, reduced to what survives pickling and JSON.

    Attributes:
      type: the innermost meaningful exception type name (e.g. ``"IndexError"``);
        for errors raised inside an interpreter callback, the embedded type.
      message: the exception's message, trimmed of JAX's wrapping.
      traceback: the formatted traceback (may be empty).
    """

    type: str
    message: str
    traceback: str = ""

    def summary(self) -> str:
        return f"{self.type}: {self.message}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    """What running (or compiling) a case produced.

    Attributes:
      outputs: the kernel's outputs as a tuple of numpy arrays (None if it raised or if
        the backend only compiles).
      error: the exception, if any.
      races: True when the interpreter's race detector fired.
      diagnostics: captured stdout/log text worth keeping (race reports, semaphore
        counts at kernel exit, compiler remarks).
      seconds: wall time of the run.
      compiled_only: True when the backend compiled, or tried to, without executing (its
        error is then a ``compile_error``, and it has no outputs to judge).
      crashed: a description when the process running the case died (signal, exit code).
      timed_out: True when the case exceeded its time limit.
      inputs_after: the inputs as they were after the run (for input_mutation), or None.
      reruns: the metamorphic reruns (named by the finding kind each can show) whose knob
        can change this kernel's outputs, as its jaxpr shows; None when not known (every
        rerun the backend has applies).
      skipped: checks the run left out because nothing in the kernel can trip them (e.g.
        ``"race"``: race detection where nothing runs concurrently).
      settled: reruns the kernel has (named as in ``reruns``) that this run's memory showed
        could not change its outputs (``backends.tpu_reruns.settle``); not in ``reruns``.
      schedule: the (grid point, core) pairs TPU interpret mode ran, in order (see
        ``backends.schedule``); None for other backends.
      compiler_params: for a ``mosaic_tpu`` compile under drawn overrides of the kernel's
        compiler params, what they did (``backends.mosaic_params``); None otherwise.
    """

    outputs: tuple[np.ndarray, ...] | None = None
    error: ErrorInfo | None = None
    races: bool = False
    diagnostics: str = ""
    seconds: float = 0.0
    compiled_only: bool = False
    crashed: str | None = None
    timed_out: bool = False
    inputs_after: tuple[np.ndarray, ...] | None = None
    reruns: frozenset[str] | None = None
    skipped: tuple[str, ...] = ()
    settled: tuple[str, ...] = ()
    schedule: tuple[tuple[tuple[int, ...], int], ...] | None = None
    compiler_params: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return (self.error is None and self.crashed is None and not self.timed_out)
