"""Nights: what a fuzz run says of each finding against the runs before it over the same
failure database, and each kernel's history.

Every fuzz run over ``OUT/db`` is a night, numbered from 1; the database's
``history/nights.json`` keeps a record per night (the last ``HISTORY_NIGHTS``): when it
began, its seed, and per kernel its cells that passed, failed or did not run, its examples
and its findings. A finding's status tonight, by its signature (``fuzzdb.signature``):

- ``new``: no entry of the database had it when the night began;
- ``still failing``: one had, and tonight's search found it again or its replay reproduced;
- ``fixed``: one had, its replay ran clean, and tonight's search did not find it again (the
  entry is dropped);
- ``unchecked``: one had, and nothing tonight said either way: its replay could not run,
  was lost, or the run ended before it (the entry is kept).

Each entry of the database says when its finding was first seen and the last night it
showed (``first_seen``, ``last_seen``: ``{"night": N, "at": TIME}``, UTC). The report's
``run.nights`` (docs/report-json.md) holds the statuses, those nights and each kernel's
last ``SHOWN_NIGHTS`` nights. A history that cannot be read never stops a night: it is
moved aside to the database's ``quarantine/`` with a note in the report, and the nights
are counted from 1 again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pallas_verify.campaigns.fuzzdb import FailureDatabase, Stamp, signature, write_file
from pallas_verify.findings import Finding
from pallas_verify.reports.nights_html import status_counts
from pallas_verify.reports.report import Report

__all__ = ["HISTORY_NIGHTS", "SHOWN_NIGHTS", "STATUSES", "Known", "Night"]

#: A finding's status tonight (the module's docstring), in the order the report lists them.
STATUSES = ("new", "still failing", "fixed", "unchecked")
#: Nights the database's history keeps.
HISTORY_NIGHTS = 90
#: Nights the report's history shows per kernel, tonight's included.
SHOWN_NIGHTS = 14
_UNRUN = ("skipped", "unsupported")  # cells a night could not run: not counted


@dataclasses.dataclass(frozen=True)
class Known:
    """An entry of the failure database when the night began: its file's name, its finding,
    and the nights it was first and last seen (None where the entry does not say)."""

    entry: str
    finding: Finding
    first: Stamp | None
    last: Stamp | None


class Night:
    """Tonight over ``db``: begun when made (``now``, seconds since the epoch; default now)."""

    def __init__(self, db: FailureDatabase, *, now: float | None = None) -> None:
        self.db = db
        self.notes: list[str] = []  # for the report's run section
        self.history = self._read()
        self.number = int(self.history[-1]["night"]) + 1 if self.history else 1
        self.at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
        self.known: dict[str, Known] = {}
        for entry in db.entries():
            finding, _ = db.read(entry)
            if finding is not None:
                self.known[signature(finding)] = Known(entry.name, finding, *db.stamps(entry))
        self.fixed: set[str] = set()
        self.why: dict[str, str] = {}  # signature -> why its replay said nothing

    @property
    def stamp(self) -> Stamp:
        """Tonight: ``{"night": N, "at": TIME}``."""
        return {"night": self.number, "at": self.at}

    def seen(self, sig: str) -> tuple[Stamp | None, Stamp]:
        """When the finding of signature ``sig``, seen tonight, was first seen (its entry's
        night, tonight for a new one), and tonight."""
        known = self.known.get(sig)
        return (known.first if known is not None else self.stamp), self.stamp

    def replayed(self, entry: Path, verdict: str, why: str = "") -> None:
        """What the replay of ``entry`` said: ``fixed``, ``still reproduces``, or nothing
        (it could not run, or was lost: ``why``)."""
        sig = next((s for s, k in self.known.items() if k.entry == entry.name), None)
        if sig is None:
            return
        if verdict == "fixed":
            self.fixed.add(sig)
        elif verdict != "still reproduces":
            self.why[sig] = why or verdict

    # -- the report ------------------------------------------------------------------------

    def section(self, report: Report, *, final: bool) -> dict[str, Any]:
        """The report's ``run.nights``: tonight, each finding's status, each kernel's history."""
        tonight = {signature(f): i for i, f in enumerate(report.findings)}
        rows = []
        for sig, i in tonight.items():
            first, last = self.seen(sig)
            rows.append(_row(report.findings[i], "still failing" if sig in self.known else "new", first, last, i))
        for sig, known in self.known.items():
            if sig in tonight:
                continue
            if sig in self.fixed:
                rows.append(_row(known.finding, "fixed", known.first, known.last))
                continue
            why = self.why.get(sig, "the run ended before its replay" if final else "its replay has not ended yet")
            rows.append(_row(known.finding, "unchecked", known.first, known.last, why=why))
        rows.sort(key=lambda r: STATUSES.index(r["status"]))
        return {"night": self.number, "at": self.at, "db": str(self.db.root.resolve()),
                "counts": {s: sum(r["status"] == s for r in rows) for s in STATUSES}, "findings": rows,
                "history": self._history(report, final)}

    def line(self, section: Mapping[str, Any]) -> str:
        """The terminal's line: ``night 2 of OUT/db: 1 new, 1 still failing, 1 fixed``."""
        return f"night {self.number} of {self.db.root.resolve()}: {status_counts(section['counts'])}"

    def record(self, report: Report, *, final: bool) -> dict[str, Any]:
        """Tonight's record in the history: per kernel its cells that passed, failed or did
        not run (skipped and n/a cells are not counted), its examples and findings."""
        kernels: dict[str, dict[str, int]] = {}

        def of(kernel: str) -> dict[str, int]:
            return kernels.setdefault(kernel, {"pass": 0, "fail": 0, "not_run": 0, "examples": 0, "findings": 0})

        for r in report.results:
            if r.status not in _UNRUN:
                of(r.kernel)[r.status if r.status in ("pass", "fail") else "not_run"] += 1
                of(r.kernel)["examples"] += r.examples
        for f in report.findings:
            of(f.kernel)["findings"] += 1
        return {"night": self.number, "at": self.at, "seed": report.seed,
                "finished": final and not report.interrupted, "kernels": kernels}

    def _history(self, report: Report, final: bool) -> dict[str, Any]:
        nights = [*self.history[-(SHOWN_NIGHTS - 1):], self.record(report, final=final)]
        names = list(dict.fromkeys([*(k["name"] for k in report.kernels), *(r.kernel for r in report.results)]))
        return {"nights": [{"night": n["night"], "at": n["at"]} for n in nights],
                "kernels": {name: [n["kernels"].get(name) for n in nights] for name in names}}

    # -- the history file ------------------------------------------------------------------

    def end(self, report: Report) -> list[str]:
        """Add tonight's record to the history; the notes for the report's run section (none,
        or why it could not be written)."""
        records = [*self.history, self.record(report, final=True)][-HISTORY_NIGHTS:]
        path = self.db.history_path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, (json.dumps({"version": 1, "nights": records}, indent=1) + "\n").encode())
        except OSError as exc:
            return [f"failure database {self.db.root}: cannot write its history ({exc.strerror or exc}); "
                    f"night {self.number} is not recorded there"]
        return []

    def _read(self) -> list[dict[str, Any]]:
        """The nights before tonight, oldest first; a history that cannot be read is moved aside."""
        path = self.db.history_path
        if not path.is_file():
            return []
        try:
            data = json.loads(path.read_text())
            problem = _not_a_history(data)
        except (OSError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            return list(data["nights"])
        self.db.quarantine_dir.mkdir(parents=True, exist_ok=True)
        aside = self.db.quarantine_dir / f"nights-{time.strftime('%Y%m%d-%H%M%S')}.json"
        try:
            os.replace(path, aside)
        except OSError as exc:
            aside = Path(f"nowhere ({exc.strerror or exc})")
        self.notes.append(f"failure database: its history {path} cannot be read ({problem}); moved aside to {aside}; "
                          "the nights are counted from 1 again")
        return []


def _row(finding: Finding, status: str, first: Stamp | None, last: Stamp | None, index: int | None = None,
         why: str = "") -> dict[str, Any]:
    return {"signature": signature(finding), "kind": finding.kind, "kernel": finding.kernel,
            "backend": finding.backend, "transform": finding.transform, "status": status, "first_seen": first,
            "last_seen": last, "finding": index, "why": why}


def _not_a_history(data: Any) -> str | None:
    """What keeps ``data`` from being a history of nights, or None."""
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("nights"), list):
        return "not an object with 'version' 1 and a 'nights' list"
    for record in data["nights"]:
        if not (isinstance(record, dict) and isinstance(record.get("night"), int) and isinstance(record.get("at"), str)
                and isinstance(record.get("kernels"), dict)):
            return f"a night that is not an object with 'night', 'at' and 'kernels': {str(record)[:80]}"
    return None
