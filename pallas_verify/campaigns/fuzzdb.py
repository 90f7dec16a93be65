"""The failure database of nightly fuzzing, finding signatures, and replays.

A finding's signature (kind, kernel, backend, transform) de-duplicates findings across
examples, slices and nights: one finding per kind per cell, as ``verify`` reports them.
Message text is left out of it (the same bug shows other numbers, elements and shapes in
each example). The database is a directory: per finding ``<stem>.json`` (the finding),
``<stem>.py`` and ``<stem>.npz`` (its reproducer), each written atomically, so a full disk
leaves the previous version or nothing, never half a file. Replaying runs a reproducer's
case in-process.

An entry never poisons a night: one that cannot be read (corrupt JSON, not a finding) is
moved to ``quarantine/`` with a ``.note`` saying why; one whose replay cannot run is kept
(nothing is known about it) but retired to ``quarantine/`` after ``RETIRE_AFTER_NIGHTS``
nights in a row that could not run it, with a line in that night's report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from pallas_verify.findings import Finding
from pallas_verify.reports.report import Report, finding_dict, finding_from_dict
from pallas_verify.reports.reproduce import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES, file_stem

__all__ = ["REPLAY_VERDICTS", "RETIRE_AFTER_NIGHTS", "FailureDatabase", "replay_report", "replay_script", "signature"]

# A reproducer's exit status -> what a replay says of its finding (anything else: cannot run).
REPLAY_VERDICTS = {EXIT_REPRODUCES: "still reproduces", EXIT_FIXED: "fixed", EXIT_CANNOT_RUN: "cannot run"}

#: An entry whose replay could not run on this many nights in a row is retired.
RETIRE_AFTER_NIGHTS = 3
_SUFFIXES = (".json", ".py", ".npz")


def signature(finding: Finding) -> str:
    """What de-duplicates findings: kind, kernel, backend and transform (no message text)."""
    return "|".join((finding.kind, finding.kernel, finding.backend, finding.transform or ""))


def replay_script(script: str | Path) -> int:
    """Run a reproducer script's case in this process; its exit status (``reproduce``):
    EXIT_REPRODUCES, EXIT_FIXED, or EXIT_CANNOT_RUN when the script or its case cannot run."""
    import runpy

    from pallas_verify.reports.reproduce import EXIT_CANNOT_RUN, reproduce

    try:
        names = runpy.run_path(str(script), run_name="pallas_verify_replay")
        case = {"backend": names["BACKEND"], "kind": names["KIND"], "config": names["CONFIG"],
                "mode": names["MODE"], "inputs": names["INPUTS"], "transform": names.get("TRANSFORM"),
                "others": names.get("OTHERS")}
        spec = names["SPEC"]
    except Exception as exc:
        print(f"cannot run this case: reproducer {str(script)!r} does not load: {type(exc).__name__}: {exc}")
        return EXIT_CANNOT_RUN
    return reproduce(spec, **case)


@dataclasses.dataclass
class FailureDatabase:
    """Findings of earlier runs: ``<stem>.json`` (the finding) beside its reproducer."""

    root: Path

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "quarantine"

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*.json")) if self.root.is_dir() else []

    def add(self, finding: Finding, sig: str) -> Finding:
        """Keep ``finding`` (replacing the entry of the same signature); the finding with its
        reproducer in the database. OSError when the disk refuses (nothing half-written)."""
        stem = file_stem(finding.kernel, finding.kind, finding.backend, hashlib.sha1(sig.encode()).hexdigest()[:8])
        self.root.mkdir(parents=True, exist_ok=True)
        if finding.reproducer and Path(finding.reproducer).is_file():
            old = Path(finding.reproducer)
            _write(self.root / f"{stem}.npz", old.with_suffix(".npz").read_bytes())
            _write(self.root / f"{stem}.py", old.read_text().replace(old.stem, stem).encode())
            finding = dataclasses.replace(finding, reproducer=str((self.root / f"{stem}.py").resolve()))
        _write(self.root / f"{stem}.json", (json.dumps(finding_dict(finding), indent=1) + "\n").encode())
        return finding

    def read(self, entry: Path) -> tuple[Finding | None, str]:
        """The finding an entry keeps, or (None, why it cannot be read)."""
        try:
            return finding_from_dict(json.loads(entry.read_text())), ""
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    def finding(self, entry: Path) -> Finding:
        """The finding an entry keeps (ValueError when it cannot be read)."""
        found, why = self.read(entry)
        if found is None:
            raise ValueError(f"failure database entry {str(entry)!r} cannot be read: {why}")
        return found

    def drop(self, entry: Path) -> None:
        for suffix in _SUFFIXES:
            entry.with_suffix(suffix).unlink(missing_ok=True)

    def quarantine(self, entry: Path, why: str) -> Path:
        """Move an entry's files to ``quarantine/`` with a ``.note`` saying why; the note's path."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        for suffix in _SUFFIXES:
            if entry.with_suffix(suffix).exists():
                os.replace(entry.with_suffix(suffix), self.quarantine_dir / f"{entry.stem}{suffix}")
        note = self.quarantine_dir / f"{entry.stem}.note"
        _write(note, f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {why}\n".encode())
        return note

    def could_not_run(self, entry: Path, why: str) -> str | None:
        """Count one more night whose replay of ``entry`` could not run; after
        ``RETIRE_AFTER_NIGHTS`` in a row, retire it: the line for the report, else None."""
        try:
            data = json.loads(entry.read_text())
            nights = int(data.get("cannot_run_nights", 0)) + 1
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            return self._retire(entry, f"unreadable ({type(exc).__name__}: {exc})")
        if nights >= RETIRE_AFTER_NIGHTS:
            return self._retire(entry, f"its replay could not run on {nights} nights in a row (last: {why})")
        _write(entry, (json.dumps({**data, "cannot_run_nights": nights}, indent=1) + "\n").encode())
        return None

    def ran(self, entry: Path) -> None:
        """The replay of ``entry`` ran: its count of nights that could not run starts over."""
        try:
            data = json.loads(entry.read_text())
            if data.pop("cannot_run_nights", 0):
                _write(entry, (json.dumps(data, indent=1) + "\n").encode())
        except (OSError, ValueError, TypeError, AttributeError):
            pass

    def _retire(self, entry: Path, why: str) -> str:
        note = self.quarantine(entry, f"retired: {why}")
        return f"failure database: retired {entry.name} to {note.parent}: {why}"


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a reader sees the old file or the new one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replay_report(path: str | Path) -> int:
    """Re-run every finding of a JSON report through its reproducer and say which still
    reproduce. Exit status: 1 if any does; else 3 if any could not be run (no reproducer,
    or its case cannot run here: never reported as fixed); else 0 (every one fixed)."""
    from pallas_verify.errors import InvalidArgument

    try:
        report = Report.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(f"report={str(path)!r} is not a readable pallas-verify JSON report: {exc}") from None
    verdicts = [_replay_one(f) for f in report.findings]
    for finding, verdict in zip(report.findings, verdicts, strict=True):
        print(f"{verdict.upper():<17} {finding.kind} in {finding.kernel} on {finding.backend}")
    still = verdicts.count("still reproduces")
    print(f"{still} of {len(verdicts)} findings still reproduce")
    if still:
        return 1
    return EXIT_CANNOT_RUN if "cannot run" in verdicts else 0


def _replay_one(finding: Finding) -> str:
    if not finding.reproducer or not Path(finding.reproducer).is_file():
        print(f"{finding.kind} in {finding.kernel}: no reproducer at {finding.reproducer!r}", file=sys.stderr)
        return "cannot run"
    try:
        status = replay_script(finding.reproducer)
    except Exception as exc:
        print(f"{finding.reproducer}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return "cannot run"
    return REPLAY_VERDICTS.get(status, "cannot run")
