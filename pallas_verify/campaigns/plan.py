"""What a fuzz campaign covers: its options, the specs it loads, and its cells (kernel x
backend), each runnable or recorded as skipped/unsupported with the reason."""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.report import BackendResult, Report, kernel_entry

if TYPE_CHECKING:
    from pallas_verify.execution import Executor

__all__ = ["Cell", "FuzzOptions", "catalog_modules", "fuzz_specs", "plan"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class FuzzOptions:
    """What to fuzz and for how long.

    Attributes:
      targets: spec references (FILE.py, FILE.py::NAME, MODULE, MODULE:NAME); default
        () = the bundled catalog and upstream wrappers.
      kernels: fnmatch pattern over spec names; default "*".
      backends: backend names; default None = every available backend.
      budget_s: wall-time budget in seconds; default 1800.
      out_dir: reports, reproducers and the failure database; default "pv-fuzz".
      workers: units in flight (worker processes, or Ray tasks); default 2. None: the
        executor's own (the Ray cluster's CPU count; 1 locally).
      seed: base seed; slice i searches with seed + i. None (default): a fresh one.
      slice_examples: examples per slice; default 5.
      timeout_s: per-case time limit; default 120.
      executor: an ``execution.EXECUTORS`` key; default "local".
      ray_address: the Ray cluster to join; None: start a private local one.
      db: Hypothesis's example database, a directory or ``redis://HOST:PORT/N``;
        None (default): ``out_dir/hypothesis``.
      hardware: an ``execution.placement.HARDWARE_POLICIES`` key; default "auto".
      max_slices: stop after this many slices (the budget still caps the run); default
        None: only the budget stops it. Same seed and max_slices: the same slices.
      shrink_budget_s: most seconds a slice spends shrinking a failure; default 60 (less
        when the budget left is short).
    """

    targets: tuple[str, ...] = ()
    kernels: str = "*"
    backends: tuple[str, ...] | None = None
    budget_s: float = 1800.0
    out_dir: Path = Path("pv-fuzz")
    workers: int | None = 2
    seed: int | None = None
    slice_examples: int = 5
    timeout_s: float = 120.0
    executor: str = "local"
    ray_address: str | None = None
    db: str | None = None
    hardware: str = "auto"
    max_slices: int | None = None
    shrink_budget_s: float = 60.0

    def __post_init__(self) -> None:
        for field in ("workers", "slice_examples", "max_slices"):
            value = getattr(self, field)
            if value is None and field in ("workers", "max_slices"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{field}={value!r} must be a positive integer.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """One kernel x backend cell a fuzz run visits, and the hardware it was placed on."""

    ref: str
    kernel: str
    backend: str
    hardware: str | None = None


def fuzz_specs(options: FuzzOptions) -> list[tuple[str, Any]]:
    """(reference, spec) of every spec to fuzz, filtered by the kernels pattern."""
    from pallas_verify import loader

    refs = list(options.targets) or catalog_modules()
    found, seen = [], set()
    for ref in refs:
        for spec in loader.load_specs(ref):
            if fnmatch.fnmatchcase(spec.name, options.kernels) and spec.name not in seen:
                seen.add(spec.name)
                found.append((loader.spec_ref(spec), spec))
    if not found:
        raise InvalidArgument(f"kernels={options.kernels!r} matches no KernelSpec in {refs}.")
    return found


def catalog_modules() -> list[str]:
    """The modules of the bundled catalog and of the upstream wrappers."""
    import importlib

    modules = []
    for package in ("reference_kernels", "reference_kernels.upstream"):
        names = getattr(importlib.import_module(package), "MODULES", ())
        modules += [f"{package}.{name}" for name in names]
    if not modules:
        raise InvalidArgument("the bundled catalog lists no modules; name spec files or modules to fuzz.")
    return modules


def plan(options: FuzzOptions, report: Report, executor: Executor) -> list[Cell]:
    """Runnable cells; the others get their skipped/unsupported results in ``report``."""
    from pallas_verify.backends import registry
    from pallas_verify.execution.placement import choose_hardware

    chosen = registry.resolve(options.backends)
    if options.backends is None:
        chosen = [b for b in chosen if b.available() is None]
    report.backends = [b.name for b in chosen]
    placed = {b.name: choose_hardware(b.name, options.hardware, executor.offers) for b in chosen}
    cells = []
    for ref, spec in fuzz_specs(options):
        report.kernels.append(kernel_entry(spec))
        for backend in chosen:
            hardware, missing = placed[backend.name]
            skip = registry.skip_reason(spec, backend) or (registry.Skip("skipped", missing) if missing else None)
            if skip is None:
                cells.append(Cell(ref=ref, kernel=spec.name, backend=backend.name, hardware=hardware))
            else:
                report.results.append(BackendResult(kernel=spec.name, backend=backend.name, status=skip.status,
                                                    reason=skip.reason))
    return cells
