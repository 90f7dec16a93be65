"""KernelSpecs wrapping the Pallas kernels shipped in ``jax.experimental.pallas.ops``.

``upstream()`` imports the wrapper modules lazily (they import jax and the ops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pallas_verify as pv

__all__ = ["MODULES", "NOT_WRAPPED", "upstream"]

MODULES: tuple[str, ...] = (
    "tpu_ops", "tpu_splash", "tpu_ragged", "tpu_prng", "tpu_collective", "gpu_ops", "gpu_decode",
    "gpu_mgpu", "gpu_mgpu_persistent",
)

_SM_COUNT = ("reads the SM count from the device (`core_count`), which CPU devices lack: "
             "AttributeError before any kernel runs (jax 0.12.0.1)")

#: Kernel modules of ``jax.experimental.pallas.ops`` with no wrapper, and why (measured
#: on jax 0.12.0.1 on a CPU-only host).
NOT_WRAPPED: dict[str, str] = {
    "gpu.attention_mgpu": "GPU interpret mode cannot lower its WGMMA pipeline (ValueError: Cannot "
                          "lower jaxpr with effects: ... _WGMMAPipelineEffect); the HLO interpreter "
                          "rejects it too (NotImplementedError: run_scoped interpret rule does not "
                          "support collective axes)",
    "gpu.blackwell_matmul_mgpu": "GPU interpret mode does not support `inline_mgpu` (ValueError)",
    "gpu.blackwell_ragged_dot_mgpu": _SM_COUNT,
    "gpu.hopper_matmul_mgpu": _SM_COUNT + "; given the count it runs in GPU interpret mode",
    "gpu.hopper_mixed_type_matmul_mgpu": _SM_COUNT,
    "gpu.transposed_ragged_dot_mgpu": _SM_COUNT,
    "gpu.all_gather_mgpu": "multi-GPU multimem collective: not yet tried on the interpreters",
    "gpu.reduce_scatter_mgpu": "multi-GPU multimem collective: not yet tried on the interpreters",
    "gpu.collective_matmul_mgpu": "multi-GPU collective matmul built on hopper_matmul_mgpu: "
                                  "not yet tried on the interpreters",
}


def upstream() -> list[pv.KernelSpec]:
    """Every upstream wrapper KernelSpec, TPU kernels first."""
    from reference_kernels import specs_of

    return [spec for name in MODULES for spec in specs_of(f"{__name__}.{name}")]
