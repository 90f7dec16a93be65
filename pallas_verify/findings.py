"""Finding kinds (stable strings) and the Finding record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, get_args

__all__ = ["DIVERGENCE_ROW", "FINDING_KINDS", "INPUT_BLIND", "KERNEL_ROWS", "KINDS", "OUTPUT_KINDS", "SANITIZER_KINDS",
           "STATIC_ROW", "Finding", "Kind", "KindFacts", "one_per_reference_failure", "row_for", "row_of"]

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


@dataclasses.dataclass(frozen=True)
class KindFacts:
    """What a finding kind is, for everything that treats kinds differently.

    Attributes:
      found_by: the check that finds it (docs/report-json.md's "found by" column).
      summary: what it means, in a phrase (the start of that table's "meaning").
      input_blind: the same failure whatever the inputs (an error of the kernel's code or of
        a compiler): a search whose every example fails it the same way stops early.
      sanitizer: raised by an interpreter's own checks: never attributed to JAX.
      on_outputs: judged on the kernel's outputs (against the reference, or another backend's).
    """

    found_by: str
    summary: str
    input_blind: bool = False
    sanitizer: bool = False
    on_outputs: bool = False


#: Every finding kind, in FINDING_KINDS order; the per-kind sets below derive from it.
KINDS: dict[str, KindFacts] = {
    "mismatch": KindFacts("a run", "outputs differ from the reference beyond the tolerance", on_outputs=True),
    "race": KindFacts("static, TPU interpret race detector", "an output block written from points of a parallel "
                      "axis, or a data race between cores/DMAs", sanitizer=True),
    "out_of_bounds": KindFacts("static, a run", "a block index or an access outside its array", sanitizer=True),
    "uninitialized_read": KindFacts("static, nan-vs-zero rerun", "an output block no grid point writes, or a read of "
                                    "memory never written", sanitizer=True),
    "dma_ordering": KindFacts("eager-vs-on-wait rerun", "the result depends on when DMAs complete", sanitizer=True),
    "grid_order": KindFacts("seed/core-count rerun", "the result depends on the order of the parallel grid"),
    "shape_invariance": KindFacts("grown-array rerun (`interpret`, `tpu_interpret`)", "the same rows give different "
                                  "bits inside an array twice as long"),
    "revisit": KindFacts("static, TPU interpret", "an output block visited at non-consecutive grid points",
                         sanitizer=True),
    "semaphore_leak": KindFacts("TPU interpret", "a semaphore left non-zero at kernel exit", sanitizer=True),
    "input_mutation": KindFacts("static", "the kernel writes an un-aliased pl.ANY/HBM input"),
    "alias_hazard": KindFacts("static", "an aliased input read at a step after its elements were written back "
                              "through the output"),
    "backend_divergence": KindFacts("two backends", "both match the reference but differ bitwise", on_outputs=True),
    "side_effect": KindFacts("`mosaic_tpu:<chip>`", "a kernel with side effects XLA cannot see"),
    "compile_error": KindFacts("static (Mosaic TPU's block-shape rules, for kernels that target TPU), a compiler",
                               "lowering or compiling failed, or would on a TPU", input_blind=True),
    "crash": KindFacts("a worker", "the process running the case died", input_blind=True),
    "timeout": KindFacts("a worker", "the case did not finish", input_blind=True),
    "deadlock": KindFacts("TPU interpret", "every core waits on a semaphore no signal or DMA in flight can complete",
                          sanitizer=True),
    "exception": KindFacts("a run", "any other error the kernel raised", input_blind=True),
}
#: Kinds a search stops early on when every example fails them the same way.
INPUT_BLIND: frozenset[str] = frozenset(k for k, f in KINDS.items() if f.input_blind)
#: Kinds the interpreters' own checks raise: never attributed upstream.
SANITIZER_KINDS: frozenset[str] = frozenset(k for k, f in KINDS.items() if f.sanitizer)
#: Kinds judged on the kernel's outputs.
OUTPUT_KINDS: frozenset[str] = frozenset(k for k, f in KINDS.items() if f.on_outputs)

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
