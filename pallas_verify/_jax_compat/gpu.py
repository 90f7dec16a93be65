"""Device facts a Mosaic GPU kernel reads from jax, supplied on a host without a GPU
(JAX 0.12 / jaxlib internals).

jax's shipped Mosaic GPU kernels size their persistent grid by the SM count of the device
they run on: ``jax.devices()[0].core_count``, ``jax.local_devices()[0].core_count`` or
``jax.extend.backend.get_default_device().core_count``. A CPU device has no
``core_count`` (``AttributeError`` before any kernel runs), so neither GPU interpret mode
nor a deviceless Mosaic GPU compile could trace them. ``gpu_device_facts`` makes the CPU
devices of this process report the SM count of the GPU being simulated or compiled for,
for as long as it is active. Devices that have a real ``core_count`` (a GPU) keep theirs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from pallas_verify.errors import check_positive_int

__all__ = ["TF32", "default_core_count", "dots_in_tf32", "gpu_device_facts", "sets_approx_math"]

#: The rounding of a float32 dot's operands to TF32 (8 exponent bits, 10 mantissa bits)
#: that NVIDIA's matrix units make at default precision, as ``reduce_precision`` names it.
TF32 = "tf32"
TF32_BITS = (8, 10)
#: ``jax_default_matmul_precision`` values under which a float32 dot at default precision
#: may run in TF32 on such a GPU (unset, or asking for it).
_TF32_PRECISIONS = (None, "default", "fastest", "tensorfloat32")

_LOCK = threading.RLock()
_MISSING = object()


def _device_class() -> type:
    import jax

    return type(jax.devices()[0])


def default_core_count() -> int:
    """The SM count of an H100 SXM (132): what a trace that is not for one GPU assumes."""
    from pallas_verify.backends.families import GPU_TARGETS

    return next(t.core_count for t in GPU_TARGETS if t.name == "h100")


def dots_in_tf32() -> bool:
    """Whether jax's default device runs a float32 dot at default precision on TF32
    operands: an NVIDIA GPU of compute capability 8.0 or later (Ampere on), where XLA's
    dots and Triton's ``tl.dot`` take TF32 unless asked for more, while
    ``jax_default_matmul_precision`` leaves it so. Measured on an H200 (JAX 0.11.2): jax's
    decode attention, its float32 dots at default precision, differs from the float64
    truth by 0.054 relative on triton and in interpret mode alike, where the CPU gives
    float32's own error."""
    import jax

    if jax.config.jax_default_matmul_precision not in _TF32_PRECISIONS:
        return False
    device = jax.devices()[0]
    if device.platform not in ("gpu", "cuda"):
        return False
    major = str(getattr(device, "compute_capability", "0")).split(".")[0]
    return major.isdigit() and int(major) >= 8


def sets_approx_math(closed_jaxpr: Any) -> bool:
    """Whether a kernel in ``closed_jaxpr`` (a jaxpr, closed or not) sets Mosaic GPU's
    ``approx_math`` in its compiler params (``plgpu.CompilerParams(approx_math=True)``,
    given as the params or under their ``"mosaic_gpu"`` key)."""
    from pallas_verify._jax_compat.tracing import equations, is_kernel

    for eqn in equations(getattr(closed_jaxpr, "jaxpr", closed_jaxpr)):
        if is_kernel(eqn):
            params = eqn.params.get("compiler_params")
            params = params.get("mosaic_gpu") if isinstance(params, dict) else params
            if getattr(params, "approx_math", False):
                return True
    return False


@contextlib.contextmanager
def gpu_device_facts(*, core_count: int | None = None) -> Iterator[None]:
    """While active, every CPU device reports ``core_count`` streaming multiprocessors
    (default ``default_core_count()``).

    jaxlib's ``Device`` answers unknown attributes through ``__getattr__`` (a CPU device
    has no ``core_count``); a property on the class is found first, so it answers for CPU
    devices and defers to ``__getattr__`` for the others. Nests; the previous state is
    restored on exit.
    """
    core_count = default_core_count() if core_count is None else core_count
    check_positive_int("core_count", core_count, example=132)  # the GPU's SM count
    cls = _device_class()
    getattr_ = cls.__getattr__ if hasattr(cls, "__getattr__") else None

    def reported(device: Any) -> int:
        if device.platform == "cpu":
            return core_count
        if getattr_ is None:
            raise AttributeError("core_count")
        return getattr_(device, "core_count")

    with _LOCK:
        saved = cls.__dict__.get("core_count", _MISSING)
        cls.core_count = property(reported, doc="SM count supplied by pallas_verify for GPU interpret mode")
    try:
        yield
    finally:
        with _LOCK:
            if saved is _MISSING:
                del cls.core_count
            else:
                cls.core_count = saved
