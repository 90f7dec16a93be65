"""A fuzz run's replays of its failure database, taking turns with the cells.

Each entry of ``OUT/db`` becomes one ``replay_unit``. Replays take turns with the fuzz
slices (a replay, then a cell, ...), so a database of many entries cannot spend the
budget before any cell runs. What each verdict does:

- still reproduces: the finding is in tonight's report again (``replayed_from``);
- fixed: the entry is dropped;
- cannot run: the entry is kept (nothing is known about it), and retired to
  ``db/quarantine/`` after ``fuzzdb.RETIRE_AFTER_NIGHTS`` such nights in a row, with a
  line in the report;
- an entry that cannot even be read is quarantined at once; a replay lost to the
  infrastructure counts for nothing against its entry.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pallas_verify.campaigns.plan import Cell
from pallas_verify.campaigns.units import Arrival, Found, Lost, Replayed, Units
from pallas_verify.execution import Work
from pallas_verify.reports.report import BackendResult

__all__ = ["Replays"]


class Replays:
    """The replay units of ``run``'s failure database, submitted through ``units``."""

    def __init__(self, run: Any, units: Units) -> None:
        self.run, self.units = run, units
        self.entry_of: dict[int, Path] = {}
        self.queue: list[Work] = []
        self.turn = True  # a replay goes next (else a cell)
        for entry in run.db.entries():
            finding, why = run.db.read(entry)
            if finding is None:
                note = run.db.quarantine(entry, f"cannot be read: {why}")
                run.note(f"failure database: moved {entry.name} aside to {note.parent} (cannot be read: {why})")
                continue
            files = {p.name: p.read_bytes() for p in (entry.with_suffix(".py"), entry.with_suffix(".npz"))
                     if p.is_file()}
            work = Work(entry="pallas_verify.campaigns.units:replay_unit", kind="replay", tag=f"replay of {entry.name}",
                        limit_s=run.options.timeout_s + 120.0, params={"script": entry.with_suffix(".py").name,
                                                                      "files": files})
            self.entry_of[work.uid] = entry
            self.queue.append(work)

    def submit_one(self, *, force: bool = False) -> bool:
        """Submit the next replay if it is its turn (or ``force``) and there is room."""
        if not self.queue or self.units.free() <= 0 or not (self.turn or force):
            return False
        self.units.submit(self.queue.pop(0))
        self.turn = False
        return True

    def absorb(self, arrival: Arrival) -> None:
        """One replay's end."""
        if isinstance(arrival.result, Found):  # replays send nothing while they run
            return
        entry, result, run = self.entry_of.pop(arrival.work.uid, None), arrival.result, self.run
        if entry is None:
            return
        run.finished += 1
        if isinstance(result, Lost):
            run.lost.append({"unit": arrival.work.tag, "cause": result.cause, "message": result.message,
                             "attempts": result.attempts, "node": arrival.node})
            run.progress.note(f"lost unit: {arrival.work.tag} ({result.cause}): {result.message.splitlines()[0][:160]}")
            return
        verdict = result.verdict if isinstance(result, Replayed) else "cannot run"
        why = getattr(result, "reason", None) or "its case cannot run here (see the reproducer's output)"
        if verdict == "cannot run":
            line = run.db.could_not_run(entry, why)
            if line is not None:
                run.note(line)
            else:
                run.progress.note(f"replay of {entry.name} could not run: {why}")
            return
        finding, unreadable = run.db.read(entry)
        if finding is None:
            run.db.quarantine(entry, f"cannot be read: {unreadable}")
            return
        if verdict == "still reproduces":
            run.db.ran(entry)
            evidence = {**finding.evidence, "replayed_from": str(entry)}
            run.keep(dataclasses.replace(finding, evidence=evidence), replayed=True)
            run._cell_result(Cell(ref="", kernel=finding.kernel, backend=finding.backend), BackendResult(
                kernel=finding.kernel, backend=finding.backend, status="fail", reason=finding.kind, node=arrival.node))
        else:
            run.db.drop(entry)
            run.progress.note(f"fixed: {finding.kind} in {finding.kernel} on {finding.backend} no longer reproduces")
