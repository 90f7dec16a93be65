"""KernelSpecs of kernels nobody here wrote: wrappers of the Pallas kernels shipped in
``jax.experimental.pallas.ops`` (``MODULES``), and kernels adapted from jax's own test
suite, ``tests/pallas`` (``JAX_TESTS_MODULES``: features the catalog lacks, each drawing
the edges its kernel handles).

``upstream()`` imports both lazily (they import jax and the ops); the conformance run
takes every one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pallas_verify as pv

__all__ = ["JAX_TESTS_MODULES", "MODULES", "NOT_WRAPPED", "jax_tests", "shipped", "specs_of_module", "upstream"]

MODULES: tuple[str, ...] = (
    "tpu_ops", "tpu_splash", "tpu_ragged", "tpu_prng", "tpu_collective", "gpu_ops", "gpu_decode",
    "gpu_mgpu", "gpu_mgpu_persistent", "gpu_mgpu_compiled",
)
#: Kernels adapted from jax's tests/pallas (spec names ``jaxtests_*``).
JAX_TESTS_MODULES: tuple[str, ...] = ("tests_tpu_pipeline", "tests_tpu_dma", "tests_tpu_ops", "tests_gpu")

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


def shipped() -> list[pv.KernelSpec]:
    """Every wrapper of a kernel shipped in jax, TPU kernels first."""
    return _specs(MODULES)


def jax_tests() -> list[pv.KernelSpec]:
    """Every kernel adapted from jax's tests/pallas, TPU kernels first."""
    return _specs(JAX_TESTS_MODULES)


def specs_of_module(name: str) -> list[pv.KernelSpec]:
    """The KernelSpecs of one wrapper module (a name of ``MODULES``)."""
    from reference_kernels import specs_of

    return specs_of(f"{__name__}.{name}")


def upstream() -> list[pv.KernelSpec]:
    """The shipped kernels' wrappers, then the kernels adapted from jax's tests."""
    return [*shipped(), *jax_tests()]


def _specs(modules: tuple[str, ...]) -> list[pv.KernelSpec]:
    from reference_kernels import specs_of

    return [spec for name in modules for spec in specs_of(f"{__name__}.{name}")]
