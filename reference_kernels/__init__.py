"""The catalog: KernelSpecs of correct kernels with pure-JAX references.

``catalog()`` imports the kernel modules lazily (they import jax) and returns every
module-level KernelSpec they define, in module order. ``registered_modules`` is what this
project registers under the ``pallas_verify.kernels`` entry-point group (pyproject.toml):
the catalog's modules, then the upstream wrappers' and the kernels adapted from jax's tests.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pallas_verify as pv

__all__ = ["MODULES", "catalog", "registered_modules", "specs_of"]

MODULES: tuple[str, ...] = (
    "elementwise",
    "reductions",
    "matmul",
    "norms",
    "attention",
    "scan",
    "recurrence",
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


def registered_modules() -> list[str]:
    """The modules of the catalog and of the upstream wrappers, by import name (the
    ``pallas_verify.kernels`` entry point); importing none of them."""
    from reference_kernels import upstream

    return [*(f"{__name__}.{name}" for name in MODULES),
            *(f"{upstream.__name__}.{name}" for name in (*upstream.MODULES, *upstream.JAX_TESTS_MODULES))]


def specs_of(module_name: str) -> list[pv.KernelSpec]:
    """The module-level KernelSpecs of one module, in definition order."""
    from pallas_verify import KernelSpec

    module = importlib.import_module(module_name)
    return [value for value in vars(module).values() if isinstance(value, KernelSpec)]
