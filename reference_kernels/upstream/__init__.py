"""KernelSpecs wrapping the Pallas kernels shipped in ``jax.experimental.pallas.ops``.

``upstream()`` imports the wrapper modules lazily (they import jax and the ops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pallas_verify as pv

__all__ = ["MODULES", "upstream"]

MODULES: tuple[str, ...] = (
    "tpu_ops", "tpu_splash", "tpu_ragged", "tpu_prng", "tpu_collective", "gpu_ops", "gpu_decode",
)


def upstream() -> list[pv.KernelSpec]:
    """Every upstream wrapper KernelSpec, TPU kernels first."""
    from reference_kernels import specs_of

    return [spec for name in MODULES for spec in specs_of(f"{__name__}.{name}")]
