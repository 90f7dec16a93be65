"""KernelSpecs wrapping the Pallas kernels shipped in ``jax.experimental.pallas.ops``.

``upstream()`` imports the wrapper modules lazily (they import jax and the ops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pallas_verify as pv

__all__ = ["MODULES", "NOT_WRAPPED", "specs_of_module", "upstream"]

MODULES: tuple[str, ...] = (
    "tpu_ops", "tpu_splash", "tpu_ragged", "tpu_prng", "tpu_collective", "gpu_ops", "gpu_decode",
    "gpu_mgpu", "gpu_mgpu_persistent", "gpu_mgpu_compiled",
)

#: Kernel modules of ``jax.experimental.pallas.ops`` with no wrapper, and why (measured
#: on jax 0.12.0.1 on a CPU-only host). The Mosaic GPU collectives need semaphores, which
#: GPU interpret mode cannot allocate (``mgpu_gaps.semaphore_scratch`` reproduces it with
#: plain JAX), and several GPUs, while the compile backends compile for one.
NOT_WRAPPED: dict[str, str] = {
    "gpu.all_gather_mgpu": "multimem all-gather over several GPUs: GPU interpret mode cannot allocate its "
                           "REGULAR semaphore (NotImplementedError: nan + semaphore; measured on 4 host devices "
                           "under shard_map; reproducer: mgpu_gaps.semaphore_scratch); the compile backends "
                           "compile for one GPU",
    "gpu.reduce_scatter_mgpu": "multimem reduce-scatter over several GPUs: GPU interpret mode cannot allocate its "
                               "REGULAR semaphore (NotImplementedError: nan + semaphore; measured on 4 host devices "
                               "under shard_map; reproducer: mgpu_gaps.semaphore_scratch); the compile backends "
                               "compile for one GPU",
    "gpu.collective_matmul_mgpu": "all-gather matmul over several GPUs signalling remote semaphores: GPU interpret "
                                  "mode cannot lower them (ValueError: Cannot lower jaxpr with effects: {IOEffect, "
                                  "NamedAxisEffect, SemaphoreEffect}, measured on 4 host devices under shard_map); "
                                  "the compile backends compile for one GPU",
}


def specs_of_module(name: str) -> list[pv.KernelSpec]:
    """The KernelSpecs of one wrapper module (a name of ``MODULES``)."""
    from reference_kernels import specs_of

    return specs_of(f"{__name__}.{name}")


def upstream() -> list[pv.KernelSpec]:
    """Every upstream wrapper KernelSpec, TPU kernels first."""
    from reference_kernels import specs_of

    return [spec for name in MODULES for spec in specs_of(f"{__name__}.{name}")]
