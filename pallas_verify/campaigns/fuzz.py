"""Nightly fuzzing: a time budget spread round-robin over kernels x backends.

The budget is cut into slices: one slice is ``verify(spec, [backend])`` with a few
examples and a fresh seed, one unit of work for an Executor (worker processes here, or
Ray tasks on a cluster; each worker loads specs by reference and keeps them). Cells are
visited round-robin, in a seeded shuffled order per round, until the budget is spent or
SIGINT/SIGTERM arrives; outstanding units are then cancelled, with their processes.

What survives what (``campaigns.units`` decides what a unit's end means, once):

- A finding is kept the moment a slice sees it (before shrinking; the shrunk one
  replaces it when the slice ends), so a slice cancelled by the budget or lost to the
  infrastructure keeps what it found.
- A unit lost to the infrastructure is retried, then recorded in the report's run
  section; its cell keeps being searched (a cell whose units are lost
  ``RETIRE_AFTER_LOSSES`` times in a row is retired, with the reason). It is never a
  finding against the kernel.
- The report is rewritten atomically after every unit (``campaigns.output``).
- Cells the run never reached are ``not_reached`` (not ``skipped``) and make the run
  incomplete (exit status 4 when nothing was found).

Findings are de-duplicated by signature and each new one is kept in the failure database
under ``OUT/db`` (``fuzzdb``); the next run replays the database, interleaved with the
cells, and drops the entries that no longer reproduce. Each run is a night: the report
says per finding whether it is new tonight, still failing or fixed, when it was first and
last seen, and per kernel its last nights (``campaigns.nights``).
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from pallas_verify.campaigns.budget import parse_budget
from pallas_verify.campaigns.fuzzdb import FailureDatabase, signature
from pallas_verify.campaigns.nights import Night
from pallas_verify.campaigns.output import CampaignOutput
from pallas_verify.campaigns.plan import Cell, FuzzOptions, plan
from pallas_verify.campaigns.replay import ReplayEnd, Replays
from pallas_verify.campaigns.units import (
    Arrival,
    Found,
    Invalid,
    Lost,
    Reported,
    Skipped,
    Units,
    write_notes,
)
from pallas_verify.choices import run_seed
from pallas_verify.execution import Work
from pallas_verify.findings import KERNEL_ROWS, Finding, row_of
from pallas_verify.reports.progress import Progress, per_backend
from pallas_verify.reports.report import BackendResult, Report, cell_key

__all__ = ["RETIRE_AFTER_LOSSES", "FuzzOptions", "fuzz", "parse_budget"]

#: A cell whose units are lost this many times in a row (after their retries) is retired.
RETIRE_AFTER_LOSSES = 3


@dataclasses.dataclass
class _Run:
    """State of one fuzzing run."""

    options: FuzzOptions
    base: Report  # seed, kernels, backends, the cells planned as skipped/unsupported
    cells: list[Cell]
    progress: Progress
    db: FailureDatabase
    seed: int
    stop: str | None = None  # why the run stopped early: a signal's name
    ended: str = "budget"  # what ended the search: "budget", "slices", "stop", "retired"
    slices: int = 0
    examples: int = 0
    finished: int = 0  # units that ended
    done: dict[tuple[str, str], BackendResult] = dataclasses.field(default_factory=dict)
    retired: dict[Cell, str] = dataclasses.field(default_factory=dict)
    kept: dict[str, Finding] = dataclasses.field(default_factory=dict)  # signature -> finding, in order
    provisional: set[str] = dataclasses.field(default_factory=set)  # signatures not shrunk yet
    cell_of: dict[int, Cell] = dataclasses.field(default_factory=dict)  # running slice uid -> its cell
    losses: dict[Cell, int] = dataclasses.field(default_factory=dict)  # lost in a row
    lost: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    notes: dict[str, list[Any]] = dataclasses.field(default_factory=dict)  # key -> [first text, count]
    night: Night = dataclasses.field(init=False)  # tonight against the nights before (``campaigns.nights``)

    def __post_init__(self) -> None:
        self.night = Night(self.db)
        for note in self.night.notes:
            self.note(note)

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
        work = Work(entry="pallas_verify.campaigns.units:run_slice", kind="slice", spec_ref=cell.ref,
                    backends=(cell.backend,), seed=(self.seed + self.slices) % 2**32,
                    max_examples=self.options.slice_examples, hardware=cell.hardware,
                    tag=f"{cell.kernel} on {cell.backend}",
                    limit_s=self.options.timeout_s * (self.options.slice_examples + 2) + 120.0,
                    params={"timeout_s": self.options.timeout_s, "static": cell.backend == first_backend,
                            "shrink_s": min(self.options.shrink_budget_s, max(5.0, min(60.0, remaining / 2))),
                            "database": self.database})
        self.cell_of[work.uid] = cell
        return work

    @property
    def database(self) -> str:
        return self.options.db or str(self.options.out_dir / "hypothesis")

    # -- what arrives ------------------------------------------------------------------------

    def absorb(self, arrival: Arrival) -> None:
        """Fold one arrival of a slice into the run, as soon as it arrives."""
        cell, result = self.cell_of[arrival.work.uid], arrival.result
        if isinstance(result, Found):  # the cell failed already, whatever becomes of its unit
            found = result.finding
            self.keep(found, provisional=True)
            row = row_of(found)  # the cell's, or the static check's or divergence's own row
            self._cell_result(cell, BackendResult(kernel=cell.kernel, backend=row, status="fail", reason=found.kind,
                                                  transform=None if row in KERNEL_ROWS else found.transform,
                                                  node=arrival.node))
            return
        del self.cell_of[arrival.work.uid]
        self.finished += 1
        if isinstance(result, Skipped):
            self._retire(cell, result.reason, BackendResult(kernel=cell.kernel, backend=cell.backend,
                                                            status="skipped", reason=result.reason, node=arrival.node))
        elif isinstance(result, Invalid):
            self.base.invalid.append({"kernel": cell.kernel, "reason": result.reason})
            self._retire(cell, f"invalid spec: {result.reason}")
        elif isinstance(result, Lost):
            self._lost(cell, result, arrival)
        elif isinstance(result, Reported):
            self.losses.pop(cell, None)
            for note in result.notes:
                self.note(note)
            for r in result.report.results:
                self.examples += r.examples
                self._cell_result(cell, dataclasses.replace(r, node=arrival.node))
            for f in result.report.findings:
                self.keep(f)

    def _lost(self, cell: Cell, lost: Lost, arrival: Arrival) -> None:
        self.lost.append({"unit": arrival.work.tag, "kernel": cell.kernel, "backend": cell.backend,
                          "cause": lost.cause, "message": lost.message, "attempts": lost.attempts,
                          "node": arrival.node})
        self.progress.note(f"lost unit: {arrival.work.tag} ({lost.cause}, {lost.attempts} attempts): "
                           f"{lost.message.splitlines()[0][:160]}; not a finding, the cell is searched on")
        self.losses[cell] = self.losses.get(cell, 0) + 1
        if self.losses[cell] >= RETIRE_AFTER_LOSSES:
            self._retire(cell, f"its units were lost {self.losses[cell]} times in a row ({lost.cause}): "
                               f"{lost.message.splitlines()[0]}")

    def replayed(self, arrival: Arrival, end: ReplayEnd | None) -> None:
        """Fold one replay's end into the run (``Replays.absorb`` says what it means)."""
        if end is None:
            return
        self.finished += 1
        if end.entry is not None:
            self.night.replayed(end.entry, end.verdict, end.why)
        if end.fixed is not None and end.entry is not None and signature(end.fixed) not in self.kept:
            self.db.drop(end.entry)  # (found again tonight, the entry holds tonight's case: kept)
        if end.lost is not None:  # it counts for nothing against its entry
            lost = end.lost
            self.lost.append({"unit": arrival.work.tag, "cause": lost.cause, "message": lost.message,
                              "attempts": lost.attempts, "node": arrival.node})
            self.progress.note(f"lost unit: {arrival.work.tag} ({lost.cause}): {lost.message.splitlines()[0][:160]}")
        if end.note is not None:
            self.note(end.note)
        if end.said is not None:
            self.progress.note(end.said)
        if end.reproduces is not None:
            found = end.reproduces
            self.keep(found, replayed=True)
            self._cell_result(Cell(ref="", kernel=found.kernel, backend=found.backend), BackendResult(
                kernel=found.kernel, backend=row_of(found), status="fail", reason=found.kind, node=arrival.node))

    def _retire(self, cell: Cell, why: str, result: BackendResult | None = None) -> None:
        self.retired[cell] = why
        if result is not None:
            self.done[(cell.kernel, cell_key(result))] = result

    def _cell_result(self, cell: Cell, r: BackendResult) -> None:
        old = self.done.get((r.kernel, cell_key(r)))
        if r.status in ("unsupported", "skipped"):
            self._retire(cell, r.reason)
        elif old is not None and old.status in ("pass", "fail"):
            r = old.combined(r)
        self.done[(r.kernel, cell_key(r))] = r

    def keep(self, finding: Finding, *, provisional: bool = False, replayed: bool = False) -> None:
        """Keep a finding: new, or replacing the provisional one of the same signature."""
        sig = signature(finding)
        if sig in self.kept and not (sig in self.provisional and not provisional):
            return
        new = sig not in self.kept
        if not replayed:
            try:
                finding = self.db.add(finding, sig, seen=self.night.seen(sig))
            except OSError as exc:
                self.note(f"failure database {self.db.root}: cannot write ({exc.strerror or exc}); its findings "
                          "are in the report only")
        self.kept[sig] = finding
        self.provisional.discard(sig)
        if provisional:
            self.provisional.add(sig)
        if new:
            how = "still reproduces" if replayed else f"after {finding.elapsed_s:.1f} s"
            self.progress.note(f"[{finding.kind}] {finding.kernel} on {finding.backend} ({how}): "
                               f"{finding.message.splitlines()[0][:160]}")

    def note(self, text: str) -> None:
        """A note for the run section, printed the first time its kind is seen (the text up
        to its first parenthesis or semicolon: one line per database outage, not per unit)."""
        key = text.split(" (")[0].split(";")[0]
        if key in self.notes:
            self.notes[key][1] += 1
            return
        self.notes[key] = [text, 1]
        self.progress.note(f"note: {text}")

    # -- the report --------------------------------------------------------------------------

    def show(self, elapsed: float) -> None:
        keys = [(c.kernel, c.backend) for c in self.cells]
        running = {(c.kernel, c.backend) for c in self.cell_of.values()}
        self.progress.show(elapsed=elapsed, cells=per_backend(keys, self.reached(), running),
                           examples=self.examples, findings=len(self.kept))

    def reached(self) -> set[tuple[str, str]]:
        """(kernel, backend) of every cell that has a result."""
        return {(r.kernel, r.backend) for r in self.done.values()}

    def assemble(self, seconds: float, *, final: bool, units: Units, running: set[Cell] = frozenset()) -> Report:
        """The report as of now (``final``: the run is over)."""
        base = self.base
        report = Report(kernels=list(base.kernels), backends=list(base.backends), seed=base.seed,
                        profile=base.profile, executor=base.executor, invalid=list(base.invalid),
                        results=list(base.results), findings=list(self.kept.values()), seconds=seconds,
                        interrupted=self.stop is not None)
        planned = {(r.kernel, cell_key(r)) for r in report.results}
        report.results += [r for key, r in self.done.items() if key not in planned]
        for cell in (c for c in self.cells if (c.kernel, c.backend) not in self.reached()):
            status = "interrupted" if final and self.stop and cell not in self.retired else "not_reached"
            report.results.append(BackendResult(kernel=cell.kernel, backend=cell.backend, status=status,
                                                reason=self._why_not(cell, final, cell in running)))
        report.run = {"finished": final, "ended": self.ended if final else "running", "units": self.finished,
                      "slices": self.slices, "retried": units.retried, "lost": self.lost,
                      "notes": [text + (f" [{n} units]" if n > 1 else "") for text, n in self.notes.values()]
                      + write_notes(units.write_errors)}
        report.run["nights"] = self.night.section(report, final=final)
        return report

    def _why_not(self, cell: Cell, final: bool, running: bool) -> str:
        if cell in self.retired:
            return self.retired[cell]
        if not final:
            return "not reached yet"
        end = {"stop": f"stopped by {self.stop}", "budget": "the budget ran out",
               "slices": "the run's slices (max_slices) ran out"}.get(self.ended, "the run ended")
        return f"{end} while its first unit ran" if running else f"{end} before it ran"


def fuzz(options: FuzzOptions, *, stream: TextIO | None = None) -> Report:
    """Fuzz for ``options.budget_s`` seconds; write and return the report.

    The output folder is checked and locked first (InvalidArgument when it cannot be
    used, or another campaign holds it); the report is rewritten after every unit.
    """
    from pallas_verify import execution
    from pallas_verify.campaigns.exampledb import check_database
    from pallas_verify.campaigns.stop import StopOnSignal

    stream = stream or sys.stderr
    began = time.monotonic()
    seed = run_seed(options.seed)
    with CampaignOutput(options.out_dir, command="fuzz", stream=stream) as out, StopOnSignal() as stop:
        report = Report(seed=seed, profile="dev", executor=options.executor)
        if options.db is not None:
            check_database(options.db)
        with execution.make(options.executor, workers=options.workers, address=options.ray_address) as executor:
            cells = plan(options, report, executor)
            for bad in report.invalid:
                stream.write(f"pallas-verify: error: {bad['reason']}\n")
            run = _Run(options=options, base=report, cells=cells, progress=Progress(stream, options.budget_s),
                       db=FailureDatabase(options.out_dir / "db"), seed=seed)
            units = Units(executor, options.out_dir / "tmp")
            replays = Replays(run.db, options.timeout_s)
            for note in replays.notes:
                run.note(note)
            stream.write(f"pallas-verify fuzz: seed={seed}, {len(cells)} cells, executor {options.executor} with "
                         f"{executor.slots()} slots, budget {options.budget_s:.0f} s, "
                         f"{len(replays.queue)} known findings to replay\n")
            # The budget is the search's: importing the spec files (each within min(budget,
            # IMPORT_LIMIT_S)) and planning come before it.
            running = _loop(run, units, replays, out, time.monotonic(), stop, began)
        final = run.assemble(time.monotonic() - began, final=True, units=units, running=running)
        final.run["notes"] += run.night.end(final)
        units.tidy(final)
        written = out.write(final)
    where = f"report: {out.paths()['html']}" if written else f"report NOT written ({out.error})"
    run.progress.note(run.night.line(final.run["nights"]))
    run.progress.note(f"{len(final.findings)} findings in {final.seconds:.0f} s"
                      f"{' (interrupted)' if run.stop else ''}; {where}")
    if not written:
        final.run["output_error"] = out.error
    return final


def _loop(run: _Run, units: Units, replays: Replays, out: CampaignOutput, started: float, stop: Any,
          began: float | None = None) -> set[Cell]:
    """Hand units out until the budget (from ``started``) is spent (plus a grace for
    running ones), the slices run out, every cell retired, or a stop; then cancel what
    still runs. The cells of the units cancelled. ``began``: when the run began."""
    began = started if began is None else began
    budget = run.options.budget_s
    grace = max(5.0, min(60.0, budget * 0.1))
    cells = run.order()
    held: list[Cell] = []
    try:
        while not stop.requested:
            elapsed = time.monotonic() - started
            if elapsed < budget:
                _assign(run, units, replays, cells, held, budget - elapsed)
            if not units.running():
                run.ended = "budget" if elapsed >= budget else "slices" if not run.more_slices() else "retired"
                break
            if elapsed > budget + grace:
                break
            arrived = units.poll(0.5)
            for arrival in arrived:  # kept even when a stop arrived meanwhile
                if arrival.work.kind == "replay":
                    run.replayed(arrival, replays.absorb(arrival, run.night.stamp))
                else:
                    run.absorb(arrival)
            if arrived:
                out.write(run.assemble(time.monotonic() - began, final=False, units=units))
            run.show(elapsed)
    finally:
        cancelled = units.cancel()
    if stop.requested:  # checked after a poll's arrivals were kept
        run.stop, run.ended = stop.requested, "stop"
    return {run.cell_of.pop(w.uid) for w in cancelled if w.uid in run.cell_of}


def _assign(run: _Run, units: Units, replays: Replays, cells: Iterator[Cell], held: list[Cell],
            remaining: float) -> None:
    """Submit units while the executor has room: replays of the failure database take
    turns with the cells; a cell whose chip is busy waits its turn."""
    _replay(units, replays)
    for cell in list(held):
        if not run.more_slices():
            break
        if cell in run.retired or (units.free() > 0 and units.accepts(cell.hardware)):
            held.remove(cell)
            if cell not in run.retired:
                units.submit(run.slice_unit(cell, remaining))
                replays.turn = True
    for _ in range(len(run.cells)):
        if units.free() <= 0 or not run.more_slices():
            break
        cell = next(cells, None)
        if cell is None:
            break
        if units.accepts(cell.hardware):
            units.submit(run.slice_unit(cell, remaining))
            replays.turn = True
            _replay(units, replays)
        elif cell not in held:
            held.append(cell)
    while _replay(units, replays, force=True):  # room no cell could take
        pass


def _replay(units: Units, replays: Replays, *, force: bool = False) -> bool:
    """Submit the next replay if it is its turn (or ``force``) and there is room."""
    work = replays.next(force=force) if units.free() > 0 else None
    if work is not None:
        units.submit(work)
    return work is not None
