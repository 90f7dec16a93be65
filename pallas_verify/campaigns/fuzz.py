"""Nightly fuzzing: a time budget spread round-robin over kernels x backends.

The budget is cut into slices: one slice is ``verify(spec, [backend])`` with a few
examples and a fresh seed, one unit of work for an Executor (worker processes here, or
Ray tasks on a cluster; each worker loads specs by reference and keeps them). Cells are
visited round-robin, in a seeded shuffled order per round, until the budget is spent or
SIGINT/SIGTERM arrives; outstanding units are then cancelled and the report of what
finished is written atomically in every format, by this process alone.

Findings are de-duplicated by signature and each new one is kept in the failure database
under ``OUT/db`` (``fuzzdb``); the next run replays the database first and drops the
entries that no longer reproduce.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from pallas_verify.campaigns.budget import parse_budget
from pallas_verify.campaigns.fuzzdb import FailureDatabase, signature
from pallas_verify.campaigns.plan import Cell, FuzzOptions, plan
from pallas_verify.campaigns.progress import Progress, per_backend
from pallas_verify.execution import Done, Executor, Work
from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report, cell_key

__all__ = ["FuzzOptions", "fuzz", "parse_budget"]


@dataclasses.dataclass
class _Run:
    """State of one fuzzing run."""

    options: FuzzOptions
    report: Report
    cells: list[Cell]
    progress: Progress
    db: FailureDatabase
    seed: int
    stop: bool = False
    slices: int = 0
    examples: int = 0
    done: dict[tuple[str, str], BackendResult] = dataclasses.field(default_factory=dict)
    retired: set[Cell] = dataclasses.field(default_factory=set)
    signatures: set[str] = dataclasses.field(default_factory=set)
    units: dict[int, Cell] = dataclasses.field(default_factory=dict)

    def order(self) -> Iterator[Cell]:
        """Cells round-robin, each round shuffled by the seed; ends when every cell retired."""
        for round_no in range(sys.maxsize):
            batch = [c for c in self.cells if c not in self.retired]
            if not batch:
                return
            random.Random(self.seed + round_no).shuffle(batch)
            for cell in batch:
                if cell not in self.retired:
                    yield cell

    def more_slices(self) -> bool:
        return self.options.max_slices is None or self.slices < self.options.max_slices

    def slice_unit(self, cell: Cell, remaining: float) -> Work:
        self.slices += 1
        first_backend = next(c.backend for c in self.cells if c.kernel == cell.kernel)
        work = Work(entry="pallas_verify.execution.units:run_slice", kind="slice", spec_ref=cell.ref, backends=(cell.backend,),
                    seed=(self.seed + self.slices) % 2**32, max_examples=self.options.slice_examples,
                    hardware=cell.hardware, tag=f"{cell.kernel} on {cell.backend}",
                    limit_s=self.options.timeout_s * (self.options.slice_examples + 2) + 120.0,
                    params={"timeout_s": self.options.timeout_s, "static": cell.backend == first_backend,
                            "shrink_s": min(self.options.shrink_budget_s, max(5.0, min(60.0, remaining / 2))),
                            "database": self.database})
        self.units[work.uid] = cell
        return work

    @property
    def database(self) -> str:
        return self.options.db or str(self.options.out_dir / "hypothesis")

    def absorb(self, done: Done) -> None:
        """Fold one finished unit's outcome into the run (as soon as it arrives)."""
        if done.work.kind == "replay":
            return self._replayed(done)
        cell = self.units.pop(done.work.uid)
        result = done.result
        if "skipped" in result:
            self.retired.add(cell)
            self.done[(cell.kernel, cell.backend)] = BackendResult(
                kernel=cell.kernel, backend=cell.backend, status="skipped", reason=result["skipped"], node=done.node)
            return None
        if "error" in result:
            kind = result.get("kind", "exception")
            message = result["error"] if kind != "exception" else f"verify raised {result['error']}"
            self._new(Finding(kind=kind, kernel=cell.kernel, backend=cell.backend, message=message,
                              config={}, evidence={"traceback": result["traceback"], "node": done.node}))
            self._cell_result(cell, BackendResult(kernel=cell.kernel, backend=cell.backend, status="fail",
                                                  reason=kind, node=done.node))
            self.retired.add(cell)
            return None
        from pallas_verify.execution.units import receive_reproducers

        part = receive_reproducers(result, self.options.out_dir / "tmp" / f"u{done.work.uid}")
        for r in part.results:
            self.examples += r.examples
            self._cell_result(cell, dataclasses.replace(r, node=done.node))
        for f in part.findings:
            self._new(f)
        return None

    def _cell_result(self, cell: Cell, r: BackendResult) -> None:
        old = self.done.get((r.kernel, cell_key(r)))
        if r.status in ("unsupported", "skipped"):
            self.retired.add(cell)
        elif old is not None and old.status in ("pass", "fail"):
            r = old.combined(r)
        self.done[(r.kernel, cell_key(r))] = r

    def _new(self, finding: Finding, *, replayed: bool = False) -> None:
        sig = signature(finding)
        if sig in self.signatures:
            return
        self.signatures.add(sig)
        if not replayed:
            finding = self.db.add(finding, sig)
        self.report.findings.append(finding)
        how = "still reproduces" if replayed else f"after {finding.elapsed_s:.1f} s"
        self.progress.note(f"[{finding.kind}] {finding.kernel} on {finding.backend} ({how}): "
                           f"{finding.message.splitlines()[0][:160]}")

    def replay_units(self) -> list[Work]:
        units = []
        for entry in self.db.entries():
            files = {p.name: p.read_bytes() for p in (entry.with_suffix(".py"), entry.with_suffix(".npz")) if p.is_file()}
            units.append(Work(entry="pallas_verify.execution.units:replay_unit", kind="replay", tag=str(entry),
                              limit_s=self.options.timeout_s + 120.0,
                              params={"script": entry.with_suffix(".py").name, "files": files}))
        return units

    def _replayed(self, done: Done) -> None:
        entry, result = Path(done.work.tag), done.result
        if "error" in result or "skipped" in result or result["verdict"] == "cannot run":  # kept: nothing is known
            why = result.get("error") or result.get("skipped") or "its case cannot run here (see the worker's output)"
            self.progress.note(f"replay of {entry.name} could not run: {why}")
            return
        finding = self.db.finding(entry)
        if result["verdict"] == "still reproduces":
            evidence = {**finding.evidence, "replayed_from": str(entry)}
            self._new(dataclasses.replace(finding, evidence=evidence), replayed=True)
            self._cell_result(Cell(ref="", kernel=finding.kernel, backend=finding.backend), BackendResult(
                kernel=finding.kernel, backend=finding.backend, status="fail", reason=finding.kind, node=done.node))
        else:
            self.db.drop(entry)
            self.progress.note(f"fixed: {finding.kind} in {finding.kernel} on {finding.backend} no longer reproduces")

    def show(self, elapsed: float) -> None:
        keys = [(c.kernel, c.backend) for c in self.cells]
        running = {(c.kernel, c.backend) for c in self.units.values()}
        self.progress.show(elapsed=elapsed, cells=per_backend(keys, self.reached(), running),
                           examples=self.examples, findings=len(self.report.findings))

    def reached(self) -> set[tuple[str, str]]:
        """(kernel, backend) of every cell that finished a unit."""
        return {(r.kernel, r.backend) for r in self.done.values()}

    def finish(self, seconds: float) -> Report:
        planned = {(r.kernel, cell_key(r)) for r in self.report.results}
        self.report.results += [r for key, r in self.done.items() if key not in planned]
        never = [c for c in self.cells if (c.kernel, c.backend) not in self.reached()]
        why = "interrupted before it ran" if self.stop else "not reached within the budget"
        self.report.results += [BackendResult(kernel=c.kernel, backend=c.backend, status="skipped",
                                              reason=why) for c in never]
        self.report.seconds = seconds
        self.report.interrupted = self.stop
        shutil.rmtree(self.options.out_dir / "tmp", ignore_errors=True)
        return self.report


def fuzz(options: FuzzOptions, *, stream: TextIO = sys.stderr) -> Report:
    """Fuzz for ``options.budget_s`` seconds; write and return the report."""
    from pallas_verify import execution
    from pallas_verify.execution.units import check_database
    from pallas_verify.reports.render import write_reports

    started = time.monotonic()
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    report = Report(seed=seed, profile="dev", executor=options.executor)
    if options.db is not None:
        check_database(options.db)
    with execution.make(options.executor, workers=options.workers, address=options.ray_address) as executor:
        cells = plan(options, report, executor)
        run = _Run(options=options, report=report, cells=cells, progress=Progress(stream, options.budget_s),
                   db=FailureDatabase(options.out_dir / "db"), seed=seed)
        stream.write(f"pallas-verify fuzz: seed={seed}, {len(cells)} cells, executor {options.executor} with "
                     f"{executor.slots()} slots, budget {options.budget_s:.0f} s, "
                     f"{len(run.db.entries())} known findings to replay\n")
        with _StopOnSignal(run):
            _loop(run, executor, started)
        if executor.retried:
            run.progress.note(f"{executor.retried} units ran again on another node after theirs left the cluster")
    run.finish(time.monotonic() - started)
    paths = write_reports(report, options.out_dir)
    run.progress.note(f"{len(report.findings)} findings in {report.seconds:.0f} s"
                      f"{' (interrupted)' if run.stop else ''}; report: {paths['html']}")
    return report


class _StopOnSignal:
    """SIGINT and SIGTERM set ``run.stop`` instead of killing the run."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.old: dict[int, Any] = {}

    def __enter__(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.old[sig] = signal.signal(sig, self._stop)

    def _stop(self, signum: int, frame: Any) -> None:
        self.run.stop = True

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.old.items():
            signal.signal(sig, handler)


def _loop(run: _Run, executor: Executor, started: float) -> None:
    """Hand units to the executor until the budget is spent (plus a grace for running ones);
    then cancel what is still running."""
    budget = run.options.budget_s
    grace = max(5.0, min(60.0, budget * 0.1))
    queue: list[Work] = run.replay_units()
    cells = run.order()
    held: list[Cell] = []
    try:
        while not run.stop:
            elapsed = time.monotonic() - started
            if elapsed < budget:
                _assign(run, executor, queue, cells, held, budget - elapsed)
            if not executor.running() or elapsed > budget + grace:
                break
            for done in executor.poll(0.5):
                if not run.stop:
                    run.absorb(done)
            run.show(elapsed)
    finally:
        for work in executor.cancel():
            run.units.pop(work.uid, None)


def _assign(run: _Run, executor: Executor, queue: list[Work], cells: Iterator[Cell], held: list[Cell],
            remaining: float) -> None:
    """Submit units while the executor has room; a cell whose chip is busy waits its turn."""
    while queue and executor.free() > 0:
        executor.submit(queue.pop(0))
    for cell in list(held):
        if not run.more_slices():
            return
        if cell in run.retired or (executor.free() > 0 and executor.accepts(cell.hardware)):
            held.remove(cell)
            if cell not in run.retired:
                executor.submit(run.slice_unit(cell, remaining))
    for _ in range(len(run.cells)):
        if executor.free() <= 0 or not run.more_slices():
            return
        cell = next(cells, None)
        if cell is None:
            return
        if executor.accepts(cell.hardware):
            executor.submit(run.slice_unit(cell, remaining))
        elif cell not in held:
            held.append(cell)
