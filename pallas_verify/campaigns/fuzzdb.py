"""The failure database of nightly fuzzing, finding signatures, and replays.

A finding's signature (kind, kernel, backend, transform) de-duplicates findings across
examples, slices and nights: one finding per kind per cell, as ``verify`` reports them.
Message text is left out of it (the same bug shows other numbers, elements and shapes in
each example). The database is a directory: per finding ``<stem>.json`` (the finding),
``<stem>.py`` and ``<stem>.npz`` (its reproducer, copied as written) and its pictures
(``<stem>.png``, ``<stem>-<output>.png``: ``reports.picture``), each written atomically,
so a full disk leaves the previous version or nothing, never half a file.
``campaigns.replay`` replays the entries. An entry also says when its finding was first
seen and the last night it showed (``first_seen``, ``last_seen``: ``{"night": N, "at":
TIME}``, ``campaigns.nights``); ``history/nights.json`` keeps a record per night.

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
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pallas_verify.findings import Finding
from pallas_verify.reports.report import finding_dict, finding_from_dict
from pallas_verify.reports.reproducer import file_stem

__all__ = ["RETIRE_AFTER_NIGHTS", "FailureDatabase", "Stamp", "signature", "write_file"]

#: When a night ran: ``{"night": N, "at": "2025-06-01T02:00:00Z"}`` (``campaigns.nights``).
Stamp = dict[str, Any]

#: An entry whose replay could not run on this many nights in a row is retired.
RETIRE_AFTER_NIGHTS = 3
_SUFFIXES = (".json", ".py", ".npz")


def signature(finding: Finding) -> str:
    """What de-duplicates findings: kind, kernel, backend and transform (no message text)."""
    return "|".join((finding.kind, finding.kernel, finding.backend, finding.transform or ""))


@dataclasses.dataclass
class FailureDatabase:
    """Findings of earlier runs: ``<stem>.json`` (the finding) beside its reproducer."""

    root: Path

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "quarantine"

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*.json")) if self.root.is_dir() else []

    @property
    def history_path(self) -> Path:
        """The nights' records (``campaigns.nights``), apart from the entries."""
        return self.root / "history" / "nights.json"

    def add(self, finding: Finding, sig: str, *, seen: tuple[Stamp | None, Stamp] | None = None) -> Finding:
        """Keep ``finding`` (replacing the entry of the same signature); the finding with its
        reproducer in the database. ``seen``: the nights it was first and last seen. OSError
        when the disk refuses (nothing half-written)."""
        stem = file_stem(finding.kernel, finding.kind, finding.backend, hashlib.sha1(sig.encode()).hexdigest()[:8])
        self.root.mkdir(parents=True, exist_ok=True)
        if finding.reproducer and Path(finding.reproducer).is_file():
            old = Path(finding.reproducer)
            write_file(self.root / f"{stem}.npz", old.with_suffix(".npz").read_bytes())
            write_file(self.root / f"{stem}.py", old.read_bytes())  # a reproducer names neither itself nor its .npz
            finding = dataclasses.replace(finding, reproducer=str((self.root / f"{stem}.py").resolve()),
                                          evidence=self._pictures(finding.evidence, old.stem, stem))
        stamps = {} if seen is None else {"first_seen": seen[0], "last_seen": seen[1]}
        write_file(self.root / f"{stem}.json", (json.dumps({**finding_dict(finding), **stamps}, indent=1) + "\n").encode())
        return finding

    def _pictures(self, evidence: Mapping[str, Any], old: str, stem: str) -> Mapping[str, Any]:
        """``evidence`` with its pictures (PNGs beside the reproducer) copied as the entry's:
        ``<stem>.png``, ``<stem>-<output>.png``."""
        if not evidence.get("pictures"):
            return evidence
        kept = []
        for picture in map(Path, evidence["pictures"]):
            if picture.is_file() and picture.name.startswith(old):
                copy = self.root / (stem + picture.name[len(old):])
                write_file(copy, picture.read_bytes())
                kept.append(str(copy.resolve()))
        return {**evidence, "pictures": kept}

    def _files(self, entry: Path) -> list[Path]:
        """An entry's files: its finding, its reproducer and inputs, its pictures."""
        return [*(entry.with_suffix(s) for s in _SUFFIXES), *entry.parent.glob(f"{entry.stem}.png"),
                *entry.parent.glob(f"{entry.stem}-*.png")]

    def read(self, entry: Path) -> tuple[Finding | None, str]:
        """The finding an entry keeps, or (None, why it cannot be read)."""
        try:
            return finding_from_dict(json.loads(entry.read_text())), ""
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    def stamps(self, entry: Path) -> tuple[Stamp | None, Stamp | None]:
        """When an entry's finding was first and last seen; None where it does not say (an
        entry of an earlier release, or one that cannot be read)."""
        try:
            data = json.loads(entry.read_text())
        except (OSError, ValueError):
            return None, None
        if not isinstance(data, dict):
            return None, None
        return _stamp(data.get("first_seen")), _stamp(data.get("last_seen"))

    def finding(self, entry: Path) -> Finding:
        """The finding an entry keeps (ValueError when it cannot be read)."""
        found, why = self.read(entry)
        if found is None:
            raise ValueError(f"failure database entry {str(entry)!r} cannot be read: {why}")
        return found

    def drop(self, entry: Path) -> None:
        for path in self._files(entry):
            path.unlink(missing_ok=True)

    def quarantine(self, entry: Path, why: str) -> Path:
        """Move an entry's files to ``quarantine/`` with a ``.note`` saying why; the note's path."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        for path in self._files(entry):
            if path.exists():
                os.replace(path, self.quarantine_dir / path.name)
        note = self.quarantine_dir / f"{entry.stem}.note"
        write_file(note, f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {why}\n".encode())
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
        write_file(entry, (json.dumps({**data, "cannot_run_nights": nights}, indent=1) + "\n").encode())
        return None

    def ran(self, entry: Path, seen: Stamp | None = None) -> None:
        """The replay of ``entry`` ran and reproduced (tonight: ``seen``): its count of nights
        that could not run starts over."""
        try:
            data = json.loads(entry.read_text())
            changed = bool(data.pop("cannot_run_nights", 0)) or (seen is not None and data.get("last_seen") != seen)
            if seen is not None:
                data["last_seen"] = seen
            if changed:
                write_file(entry, (json.dumps(data, indent=1) + "\n").encode())
        except (OSError, ValueError, TypeError, AttributeError):
            pass

    def _retire(self, entry: Path, why: str) -> str:
        note = self.quarantine(entry, f"retired: {why}")
        return f"failure database: retired {entry.name} to {note.parent}: {why}"


def _stamp(value: Any) -> Stamp | None:
    return value if isinstance(value, dict) and isinstance(value.get("night"), int) else None


def write_file(path: Path, data: bytes) -> None:
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
