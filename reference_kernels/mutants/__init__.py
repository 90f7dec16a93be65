"""Known-buggy twins of correct kernels, each naming the findings it must cause.

Every mutant module defines ``MUTANTS``: a list of :class:`Mutant`. A mutant carries the
buggy KernelSpec, its correct twin (a KernelSpec that must be clean on every backend), and
the finding kinds of which at least one must be reported for the buggy spec.
"""

from __future__ import annotations

import dataclasses
import importlib

from pallas_verify.findings import FINDING_KINDS
from pallas_verify.spec import KernelSpec

__all__ = ["COMPILE_MODULES", "GPU_MODULES", "MODULES", "Mutant", "compile_mutants", "gpu_mutants", "mutants"]

#: The modules of this package that define ``MUTANTS``, in catalog order: TPU-style
#: kernels (pallas_call), found on the interpreters and TPU interpret mode.
MODULES: tuple[str, ...] = ("grid", "accumulate", "memory", "dma", "backward", "tiles", "hazards", "precision", "masks",
                            "shapes", "recurrence")
#: Mosaic GPU kernels (plgpu.kernel), found on gpu_interpret.
GPU_MODULES: tuple[str, ...] = ("mosaic_gpu",)
#: Mosaic TPU kernels whose bug only a compile shows, found on the mosaic_tpu backends.
COMPILE_MODULES: tuple[str, ...] = ("effects",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mutant:
    """A planted bug and its correct twin.

    Attributes:
      spec: the buggy kernel; its name is the mutant's name.
      twin: the correct kernel it was derived from (same inputs, same reference).
      expects: finding kinds, at least one of which a verifier must report for ``spec``.
      bug: one sentence saying what is wrong, as a reviewer would put it.
      exposed_by: the interpret mode knobs (plain data) under which the raw signal shows
        (tpu_interpret's, or gpu_interpret's for ``GPU_MODULES``); ``{}`` when any mode shows it.
      verdicts: its expected verdict per backend in the conformance matrix (sanitizer
        conformance, ``campaigns.sanitizer``): the kinds of which the backend must report
        at least one; a backend not named must report nothing. ``{}``: the mutant is not
        a row of the matrix.
    """

    spec: KernelSpec
    twin: KernelSpec
    expects: tuple[str, ...]
    bug: str
    exposed_by: dict[str, object] = dataclasses.field(default_factory=dict)
    verdicts: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.expects:
            raise ValueError(f"Mutant {self.spec.name!r}: expects=() must name a finding kind.")
        for kind in self.expects:
            if kind not in FINDING_KINDS:
                raise ValueError(
                    f"Mutant {self.spec.name!r}: expects item {kind!r} is not one of "
                    f"{FINDING_KINDS}."
                )
        for backend, kinds in self.verdicts.items():
            if not kinds or not set(kinds) <= set(FINDING_KINDS):
                raise ValueError(f"Mutant {self.spec.name!r}: verdicts[{backend!r}]={kinds!r} must name finding "
                                 f"kinds, from {FINDING_KINDS}.")

    @property
    def name(self) -> str:
        return self.spec.name


def mutants() -> list[Mutant]:
    """Every mutant of the TPU-style catalog (``MODULES``), in module order."""
    return _of(MODULES)


def gpu_mutants() -> list[Mutant]:
    """Every Mosaic GPU mutant (``GPU_MODULES``), in module order."""
    return _of(GPU_MODULES)


def compile_mutants() -> list[Mutant]:
    """Every mutant found by compiling (``COMPILE_MODULES``), in module order."""
    return _of(COMPILE_MODULES)


def _of(modules: tuple[str, ...]) -> list[Mutant]:
    found: list[Mutant] = []
    for module in modules:
        found.extend(importlib.import_module(f"{__name__}.{module}").MUTANTS)
    return found
