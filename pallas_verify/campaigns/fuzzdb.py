"""The failure database of nightly fuzzing, finding signatures, and replays.

A finding's signature (kind, kernel, backend, transform, and its message with numbers and
addresses replaced by ``#``) de-duplicates findings across examples, slices and nights.
The database is a directory: per finding ``<stem>.json`` (the finding), ``<stem>.py`` and
``<stem>.npz`` (its reproducer). Replaying runs a reproducer's case in-process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

from pallas_verify.findings import Finding
from pallas_verify.reports.report import Report, finding_dict, finding_from_dict
from pallas_verify.reports.reproduce import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES, file_stem

__all__ = ["REPLAY_VERDICTS", "FailureDatabase", "replay_report", "replay_script", "signature"]

# A reproducer's exit status -> what a replay says of its finding (anything else: cannot run).
REPLAY_VERDICTS = {EXIT_REPRODUCES: "still reproduces", EXIT_FIXED: "fixed", EXIT_CANNOT_RUN: "cannot run"}

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def signature(finding: Finding) -> str:
    """What de-duplicates findings: kind, kernel, backend and the message without numbers."""
    message = _NUMBERS.sub("#", finding.message)
    return "|".join((finding.kind, finding.kernel, finding.backend, finding.transform or "", message))


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

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*.json")) if self.root.is_dir() else []

    def add(self, finding: Finding, sig: str) -> Finding:
        stem = file_stem(finding.kernel, finding.kind, finding.backend, hashlib.sha1(sig.encode()).hexdigest()[:8])
        self.root.mkdir(parents=True, exist_ok=True)
        if finding.reproducer and Path(finding.reproducer).is_file():
            old = Path(finding.reproducer)
            shutil.copyfile(old.with_suffix(".npz"), self.root / f"{stem}.npz")
            text = old.read_text().replace(old.stem, stem)
            (self.root / f"{stem}.py").write_text(text)
            finding = dataclasses.replace(finding, reproducer=str((self.root / f"{stem}.py").resolve()))
        (self.root / f"{stem}.json").write_text(json.dumps(finding_dict(finding), indent=1) + "\n")
        return finding

    def finding(self, entry: Path) -> Finding:
        """The finding an entry keeps."""
        return finding_from_dict(json.loads(entry.read_text()))

    def drop(self, entry: Path) -> None:
        for suffix in (".json", ".py", ".npz"):
            entry.with_suffix(suffix).unlink(missing_ok=True)


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
