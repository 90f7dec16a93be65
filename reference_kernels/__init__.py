"""The catalog: KernelSpecs of correct kernels with pure-JAX references.

``catalog()`` imports the kernel modules lazily (they import jax) and returns every
module-level KernelSpec they define, in module order.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pallas_verify as pv

__all__ = ["MODULES", "catalog", "specs_of"]

MODULES: tuple[str, ...] = (
    "elementwise",
    "reductions",
    "matmul",
    "norms",
    "attention",
    "scan",
    "transpose",
    "gather",
    "windows",
    "aliasing",
    "control",
    "dma",
    "prng",
    "multicore",
    "collective",
    "triton_style",
    "gpu_barrier",
    "gpu_params",
    "transforms_matmul",
    "transforms_norms",
    "transforms_attention",
)


def catalog() -> list[pv.KernelSpec]:
    """Every correct catalog KernelSpec (not the mutants, not the upstream wrappers)."""
    return [spec for name in MODULES for spec in specs_of(f"{__name__}.{name}")]


def specs_of(module_name: str) -> list[pv.KernelSpec]:
    """The module-level KernelSpecs of one module, in definition order."""
    from pallas_verify import KernelSpec

    module = importlib.import_module(module_name)
    return [value for value in vars(module).values() if isinstance(value, KernelSpec)]
