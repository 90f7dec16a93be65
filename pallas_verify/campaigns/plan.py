"""What a fuzz campaign covers: its options, the specs it loads, and its cells (kernel x
backend), each runnable or recorded as skipped/unsupported with the reason."""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pallas_verify.errors import InvalidArgument, check_positive_int
from pallas_verify.registered import GROUP, registered_specs
from pallas_verify.reports.report import BackendResult, Report, kernel_entry

if TYPE_CHECKING:
    from pallas_verify.execution import Executor

__all__ = ["IMPORT_LIMIT_S", "Cell", "FuzzOptions", "fuzz_specs", "plan"]

#: The most seconds a spec file may take to import (and never more than the budget).
IMPORT_LIMIT_S = 300.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class FuzzOptions:
    """What to fuzz and for how long.

    Attributes:
      targets: spec references (FILE.py, FILE.py::NAME, MODULE, MODULE:NAME); default
        () = every module registered under the ``pallas_verify.kernels`` entry points
        (``registered``; this project's catalog, upstream wrappers and corpus among them).
      kernels: fnmatch pattern over spec names; default "*".
      backends: backend names; default None = every available backend.
      budget_s: wall-time budget of the search in seconds (importing the spec files and
        planning come before it; each import gets at most min(budget_s, IMPORT_LIMIT_S));
        default 1800.
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
            check_positive_int(field, getattr(self, field), optional=field != "slice_examples")
        for field, least in (("budget_s", 0.0), ("timeout_s", 0.0), ("shrink_budget_s", None)):
            value = getattr(self, field)
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or (value <= least if least is not None else value < 0):
                what = "more than 0" if least is not None else "0 or more"
                raise InvalidArgument(f"{field}={value!r} must be a finite number of seconds, {what}.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """One kernel x backend cell a fuzz run visits, and the hardware it was placed on."""

    ref: str
    kernel: str
    backend: str
    hardware: str | None = None


def fuzz_specs(options: FuzzOptions, invalid: list[dict[str, str]]) -> list[tuple[str, Any]]:
    """(reference, spec) of every spec to fuzz, filtered by the kernels pattern.

    Each target named (a user's spec file or module) is imported in a worker process
    first (``execution.imports``): one that exits, aborts, hangs or raises at import is
    listed in ``invalid`` (``{"target", "reason"}``) and the others still run. Without
    targets, the registered modules are imported here (``registered``); an entry point or
    module that cannot be loaded is listed in ``invalid`` the same way.
    """
    from pallas_verify import loader
    from pallas_verify.execution.isolation import Worker

    if options.targets:
        probe = Worker()
        try:
            loaded = [s for ref in options.targets
                      for s in _load(ref, probe, min(options.budget_s, IMPORT_LIMIT_S), invalid)]
        finally:
            probe.close()
        where = list(options.targets)
    else:
        loaded = [spec for _, spec in registered_specs(invalid)]
        where = [f"the modules registered under {GROUP!r}"]
    found, seen = [], set()
    for spec in loaded:
        if fnmatch.fnmatchcase(spec.name, options.kernels) and spec.name not in seen:
            seen.add(spec.name)
            found.append((loader.spec_ref(spec), spec))
    if not found:
        if invalid:
            raise InvalidArgument("\n".join(i["reason"] for i in invalid))
        raise InvalidArgument(f"kernels={options.kernels!r} matches no KernelSpec in {', '.join(where)}.")
    return found


def _load(ref: str, probe: Any, limit_s: float, invalid: list[dict[str, str]]) -> list[Any]:
    """The specs ``ref`` holds, imported in ``probe`` first; a failure listed in
    ``invalid`` instead of raised."""
    from pallas_verify import loader
    from pallas_verify.errors import InvalidSpec
    from pallas_verify.execution.imports import check_import

    why = check_import(ref, limit_s=limit_s, worker=probe)
    if why is None:
        try:
            return loader.load_specs(ref)
        except (InvalidArgument, InvalidSpec) as exc:
            why = str(exc)
    invalid.append({"target": ref, "reason": why})
    return []


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
    for ref, spec in fuzz_specs(options, report.invalid):
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
