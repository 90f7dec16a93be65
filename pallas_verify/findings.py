"""Finding kinds (stable strings) and the Finding record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, get_args

__all__ = ["DIVERGENCE_ROW", "FINDING_KINDS", "KERNEL_ROWS", "STATIC_ROW", "Finding", "Kind", "one_per_reference_failure",
           "row_for", "row_of"]

Kind = Literal[
    "mismatch",
    "race",
    "out_of_bounds",
    "uninitialized_read",
    "dma_ordering",
    "grid_order",
    "shape_invariance",
    "revisit",
    "semaphore_leak",
    "input_mutation",
    "alias_hazard",
    "backend_divergence",
    "side_effect",
    "compile_error",
    "crash",
    "timeout",
    "deadlock",
    "exception",
]
FINDING_KINDS: tuple[str, ...] = get_args(Kind)

#: The rows of a report that are no backend's: the static check of the kernel's grid (its
#: findings have backend "static") and the comparison of the backends with each other
#: (``backend_divergence``). A backend's own cell is judged by its own examples alone.
STATIC_ROW = "static"
DIVERGENCE_ROW = "divergence"
KERNEL_ROWS: tuple[str, ...] = (STATIC_ROW, DIVERGENCE_ROW)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finding:
    """Something wrong that a case showed.

    Attributes:
      kind: one of FINDING_KINDS.
      kernel: the spec's name.
      backend: the backend that showed it (``"static"`` for the grid check before any
        run, ``"reference"`` when the reference itself failed).
      message: what is wrong, in one paragraph a kernel author can act on.
      config: the kernel config of the (minimal) failing example.
      mode: the backend's mode for that example.
      transform: None for the bare kernel, else the transform ("vmap", "grad").
      evidence: extra structured facts (error table, blame map, captured log lines).
      elapsed_s: seconds from the start of ``verify`` for this kernel (earlier searches
        included) to the first example that showed this kind here.
      reproducer: path of the standalone reproducer script, once written.
    """

    kind: Kind
    kernel: str
    backend: str
    message: str
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    mode: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    transform: str | None = None
    evidence: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    elapsed_s: float = 0.0
    reproducer: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"Finding kind={self.kind!r} is not one of {FINDING_KINDS}")


def one_per_reference_failure(findings: list[Finding]) -> list[Finding]:
    """``findings`` with each failure of the reference once: every backend's search meets it
    on the same examples, but it is the reference's, not a backend's."""
    seen: set[tuple[str, str | None, str]] = set()
    kept = []
    for f in findings:
        if f.backend == "reference":
            key = (f.kind, f.transform, f.message)
            if key in seen:
                continue
            seen.add(key)
        kept.append(f)
    return kept


def row_of(finding: Finding) -> str:
    """The row of the report a finding fails: ``DIVERGENCE_ROW`` for a divergence between
    backends, else its backend (``STATIC_ROW`` for the static check's)."""
    return row_for(finding.kind, finding.backend)


def row_for(kind: str, backend: str) -> str:
    """``row_of`` for a finding read back as its kind and backend."""
    return DIVERGENCE_ROW if kind == "backend_divergence" else backend
