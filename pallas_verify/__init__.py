"""pallas-verify: property-based testing and differential verification of Pallas kernels.

The names below are loaded on first use, so ``import pallas_verify`` imports neither jax,
pytest nor hypothesis; ``pallas_verify.verify`` loads the engine, ``KernelSpec`` the spec
model (and hypothesis, whose strategies a spec holds).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pallas_verify.engine import verify as verify
    from pallas_verify.errors import InvalidArgument as InvalidArgument
    from pallas_verify.errors import InvalidSpec as InvalidSpec
    from pallas_verify.errors import PallasVerifyError as PallasVerifyError
    from pallas_verify.findings import FINDING_KINDS as FINDING_KINDS
    from pallas_verify.findings import Finding as Finding
    from pallas_verify.reports.report import Report as Report
    from pallas_verify.spec import KernelSpec as KernelSpec
    from pallas_verify.spec import Tolerance as Tolerance
    from pallas_verify.testing import KernelFindingsError as KernelFindingsError
    from pallas_verify.testing import kernel_test as kernel_test

# Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "FINDING_KINDS": "pallas_verify.findings",
    "Finding": "pallas_verify.findings",
    "InvalidArgument": "pallas_verify.errors",
    "InvalidSpec": "pallas_verify.errors",
    "KernelFindingsError": "pallas_verify.testing",
    "KernelSpec": "pallas_verify.spec",
    "PallasVerifyError": "pallas_verify.errors",
    "Report": "pallas_verify.reports.report",
    "Tolerance": "pallas_verify.spec",
    "kernel_test": "pallas_verify.testing",
    "verify": "pallas_verify.engine",
}

__all__ = [
    "FINDING_KINDS",
    "Finding",
    "InvalidArgument",
    "InvalidSpec",
    "KernelFindingsError",
    "KernelSpec",
    "PallasVerifyError",
    "Report",
    "Tolerance",
    "kernel_test",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pallas_verify' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
