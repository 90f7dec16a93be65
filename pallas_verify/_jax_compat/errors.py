"""Interpreter and compiler errors: unwrapped, classified by kind, and matched against the
table of known upstream limitations (JAX 0.12)."""

from __future__ import annotations

import dataclasses
import re

from pallas_verify.case import ErrorInfo

__all__ = [
    "ASYNC_ORDER_MARKER",
    "DEADLOCK_MARKER",
    "LIMITATIONS",
    "RACE_MARKER",
    "REVISIT_ANY_DECLARED",
    "Limitation",
    "allocates_hbm_in_run_scoped",
    "error_info",
    "error_kind",
    "semaphore_leaks",
    "upstream_limitation",
    "vmem_exhausted",
]

RACE_MARKER = "RACE DETECTED"
#: What the deadlock watchdog (deadlock.py) puts in the error of a run it stops.
DEADLOCK_MARKER = "DEADLOCK DETECTED"
#: What TPU interpret mode's backend adds to a "Revisited block" error when the revisited
#: output's BlockSpec declares ``pipeline_mode=pl.Buffered(..., revisit=pl.RevisitMode.ANY)``.
REVISIT_ANY_DECLARED = "(its BlockSpec declares pipeline_mode=pl.Buffered(..., revisit=pl.RevisitMode.ANY))"
#: What gpu_interpret puts in the error of a case whose kernel uses the result of an
#: asynchronous operation (a WGMMA) before the wait that completes it (wgmma.py).
ASYNC_ORDER_MARKER = "ASYNC RESULT USED BEFORE ITS WAIT"

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
# never a pass. The rule of pallas_verify.attribution decides most upstream failures by
# itself (JAX's frames only, another interpreter runs the example clean); a row here is
# for what it cannot decide, and says which: "no interpreter" (no interpreter runs such a
# kernel, so none can witness), "sanitizer text" (the error reads as one of the
# sanitizer's own signals, which the rule always keeps as findings), or "worded" (the rule
# would decide it too; the row gives a precise reason and predates the rule).
_SEMAPHORE_OUTPUTS = (
    "no interpreter runs a pallas_call that returns semaphores (the async-copy-across-calls pattern of jax's "
    "tpu_pallas_async_test.py): both fill every output buffer first, which a semaphore type cannot be "
    "(AttributeError: 'AbstractSemaphoreTyRules' has no attribute 'full'; with NaN fill TPU interpret mode "
    "says NotImplementedError: nan + dma_sem); check the kernel on mosaic_tpu, and its grid statically")
LIMITATIONS = (
    # no interpreter: semaphores as pallas_call outputs.
    Limitation(backend="interpret", transform=None,
               markers=("'AbstractSemaphoreTyRules' has no attribute 'full'",), reason=_SEMAPHORE_OUTPUTS),
    Limitation(backend="tpu_interpret", transform=None,
               markers=("'AbstractSemaphoreTyRules' has no attribute 'full'",), reason=_SEMAPHORE_OUTPUTS),
    Limitation(backend="tpu_interpret", transform=None,
               markers=("get_uninitialized_value", "NotImplementedError: nan + ", "sem"), reason=_SEMAPHORE_OUTPUTS),
    # sanitizer text: TPU interpret mode's revisit check ignores the BlockSpec's pipeline mode.
    Limitation(backend="tpu_interpret", transform=None, markers=("Revisited block", REVISIT_ANY_DECLARED), reason=(
        "TPU interpret mode rejects every revisit of an output block (RuntimeError: Revisited block ...), even "
        "one whose BlockSpec declares pipeline_mode=pl.Buffered(1, revisit=pl.RevisitMode.ANY), which Pallas "
        "supports by restoring the block; the HLO interpreter runs such a kernel and Mosaic compiles it")),
    # worded: the rows below predate the rule.
    Limitation(backend="gpu_interpret", transform=None, markers=("has_trivial_window()",), reason=(
        "GPU interpret mode runs pl.pallas_call only with whole-array blocks (JAX asserts "
        "BlockMapping.has_trivial_window); use plgpu.kernel, or run this kernel on interpret/tpu_interpret")),
    Limitation(backend="tpu_interpret", transform="vmap", markers=("_get_randomized_grid_coordinates",), reason=(
        "TPU interpret mode cannot run jax.vmap of a pallas_call that sets dimension_semantics: vmap adds a "
        "grid dimension without a semantic and the interpreter's grid randomisation zips the grid with the "
        "semantics (ValueError: safe_zip length mismatch); vmap is checked on interpret and on mosaic_tpu, "
        "whose lowering adds a 'parallel' semantic per vmapped dimension")),
    # worded. Any vmapped pallas_call: the vmap transform, or jax.vmap inside the kernel (jax's GPU
    # decode attention, paged attention, layer_norm and rms_norm vmap their pallas_calls).
    Limitation(backend="gpu_interpret", transform=None,
               markers=("unexpected keyword argument 'kernel_arg_transforms'", "batching_rule"), reason=(
        "GPU interpret mode cannot run a vmapped pallas_call (the vmap transform, or jax.vmap inside the "
        "kernel): pallas_call's batching rule rejects the kernel_arg_transforms parameter that GPU interpret "
        "mode sets (TypeError); check the kernel on interpret")),
    # no interpreter: jax.experimental.pallas.ops.tpu.ragged_paged_attention hits these two.
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
    # worded: found by smith (docs/upstream-findings.md).
    Limitation(backend="tpu_interpret", transform=None, markers=("doesn't match function result type",), reason=(
        "TPU interpret mode cannot run input_output_aliases on an array that is not a whole number of blocks: "
        "it pads the aliased buffer to the blocks and fails MLIR verification (docs/upstream-findings.md); "
        "the HLO interpreter runs it")),
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


# What an interpreter's error text says -> the finding kind it is. First match wins.
_ERROR_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(DEADLOCK_MARKER), "deadlock"),
    (re.compile(RACE_MARKER), "race"),
    (re.compile(ASYNC_ORDER_MARKER), "dma_ordering"),
    (re.compile(r"Out-of-bounds|Out of bound|out of bounds", re.IGNORECASE), "out_of_bounds"),
    (re.compile(r"Revisited block"), "revisit"),
)
# TPU interpret mode prints this at kernel exit for a DMA or signal never waited (eager DMAs).
_SEMAPHORE_LEAK = re.compile(r"^Semaphore .* has non-zero count.*$", re.MULTILINE)


# TPU interpret mode's error for pl.run_scoped(pltpu.HBM(...)) unless the params allow it.
_HBM_IN_RUN_SCOPED = "Cannot allocate HBM in `run_scoped`"


def allocates_hbm_in_run_scoped(error: ErrorInfo | None) -> bool:
    """Whether a TPU interpret run failed because the kernel allocates HBM in run_scoped."""
    return error is not None and _HBM_IN_RUN_SCOPED in error.message


# A Mosaic TPU compile that ran out of VMEM: the scoped limit (libtpu's E1001
# CompileTimeScopedVmemOom), or the chip's VMEM ("Ran out of memory in memory space vmem",
# "Allocation ... would exceed memory ... space=vmem").
_VMEM_EXHAUSTED = re.compile(r"ScopedVmemOom|memory space vmem|space=vmem")


def vmem_exhausted(error: ErrorInfo | None) -> bool:
    """Whether a Mosaic TPU compile failed because the kernel does not fit in VMEM."""
    return error is not None and bool(_VMEM_EXHAUSTED.search(error.message))


def error_kind(message: str) -> str | None:
    """The finding kind an interpreter's error message shows (race, out_of_bounds...), or None."""
    return next((kind for pattern, kind in _ERROR_KINDS if pattern.search(message)), None)


def semaphore_leaks(stdout: str) -> list[str]:
    """The lines in which TPU interpret mode reports semaphores left non-zero at kernel exit."""
    return _SEMAPHORE_LEAK.findall(stdout)
