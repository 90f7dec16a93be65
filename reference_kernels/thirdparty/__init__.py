"""The third-party corpus: KernelSpecs of Pallas kernels from kernel libraries other than
jax, each checked against that library's own reference (its XLA implementation, or the
jnp function its docstring or tests give). docs/thirdparty.md holds the verdicts.

The libraries are not dependencies of pallas-verify: ``pip install 'pallas-verify[corpus]'``
installs the pinned releases (``PINS``). Each spec module imports its library only when a
kernel runs, so it loads without it; every kernel of a library that is absent is skipped,
saying so (``_library.needs``). The modules register under the ``pallas_verify.kernels``
entry points (pyproject.toml) through ``registered_modules``.
"""

from __future__ import annotations

__all__ = ["EXTRA", "MODULES", "PINS", "registered_modules"]

#: The optional extra of pyproject.toml that installs the libraries.
EXTRA = "corpus"

#: One spec module per library, in the order the verdict table lists them.
MODULES: tuple[str, ...] = ("pallas_forge", "tokamax", "deciax", "atomic_ops")

#: The release of each library the verdicts were measured on (the extra pins the same).
PINS: dict[str, str] = {"pallas-forge": "0.1.2", "tokamax": "0.0.17", "deciax": "0.1.2", "atomic-ops": "0.2.0"}


def registered_modules() -> list[str]:
    """The corpus's spec modules by import name (the ``pallas_verify.kernels`` entry point)."""
    return [f"{__name__}.{name}" for name in MODULES]
