"""Replay: re-running recorded cases, and saying whether their findings still show.

One case (``reproduce``, what every reproducer script calls), a reproducer script
(``replay_script``: its case, in this process), every finding of a JSON report
(``replay_report``, the ``pallas-verify replay`` command), one failure-database entry as a
unit of work (``replay_unit``), and a fuzz run's replays of its failure database
(``Replays``). ``reports.reproducer`` writes the scripts; this module runs them.

A replay says one of three things, by the reproducer's exit status (``exits``):
EXIT_REPRODUCES (1) while the finding (or another finding) shows on the recorded case,
EXIT_FIXED (0) once the case runs clean, and EXIT_CANNOT_RUN (3) when the case cannot be
run here at all: the spec or the inputs do not load, the reference raises, the backend is
not available or cannot run the kernel. A case that could not run is never "fixed".

A fuzz run's replays take turns with its slices (a replay, then a cell, ...), so a
database of many entries cannot spend the budget before any cell runs. What each verdict
does: still reproduces, the finding is in tonight's report again (``replayed_from``);
fixed, the fuzz run drops the entry (unless its search found the finding again tonight:
``campaigns.nights``); cannot run, the entry is kept (nothing is known about it),
and retired to ``db/quarantine/`` after ``fuzzdb.RETIRE_AFTER_NIGHTS`` such nights in a
row, with a line in the report. An entry that cannot even be read is quarantined at once;
a replay lost to the infrastructure counts for nothing against its entry.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pallas_verify.campaigns.fuzzdb import FailureDatabase, Stamp
from pallas_verify.campaigns.units import Arrival, Found, Lost, Replayed
from pallas_verify.errors import InvalidArgument, PallasVerifyError
from pallas_verify.execution import Work
from pallas_verify.exits import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES
from pallas_verify.findings import Finding
from pallas_verify.reports.report import Report

__all__ = ["REPLAY_VERDICTS", "CannotRun", "ReplayEnd", "Replays", "replay_report", "replay_script", "replay_unit", "reproduce"]

# A reproducer's exit status -> what a replay says of its finding (anything else: cannot run).
REPLAY_VERDICTS = {EXIT_REPRODUCES: "still reproduces", EXIT_FIXED: "fixed", EXIT_CANNOT_RUN: "cannot run"}


class CannotRun(PallasVerifyError):
    """A recorded case cannot be re-run here; the message says why."""


def reproduce(
    spec: str | None,
    *,
    backend: str,
    kind: str,
    config: Mapping[str, Any] | None,
    mode: Mapping[str, Any],
    inputs: str | Path,
    transform: str | None = None,
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> int:
    """Re-run one recorded case, print what it shows, and say so in the exit status.

    ``others``: backends (with their modes) that run the case before ``backend``, so a
    ``backend_divergence`` between them is judged again.

    EXIT_REPRODUCES (1): the case still shows a ``kind`` finding on ``backend`` or one of
    ``others`` (or, with it gone, some other finding: the case still fails). EXIT_FIXED (0): the case ran and
    showed nothing. EXIT_CANNOT_RUN (3): the case could not be run here (the spec or the
    inputs do not load, the reference raises: a reference failure's own reproducer exits 3
    until the reference is fixed; the backend is not available or cannot run the kernel),
    so nothing is known about the kernel.
    """
    try:
        findings, name = _rerun(spec, {**(others or {}), backend: mode}, config, inputs, transform)
    except CannotRun as exc:
        print(f"cannot run this case: {exc}")
        return EXIT_CANNOT_RUN
    for f in findings:
        print(f"[{f.kind}] {f.kernel} on {f.backend}: {f.message}")
    if any(f.backend == "reference" for f in findings):  # the kernel cannot be judged on this case
        what = "" if backend == "reference" else f", so {kind} on {backend} cannot be judged"
        print(f"cannot run this case: the reference fails on it{what}; fix the reference or narrow the "
              "spec's configs/inputs.")
        return EXIT_CANNOT_RUN
    if any(f.kind == kind and f.backend in (backend, "static", *(others or {})) for f in findings):
        return EXIT_REPRODUCES
    if findings:
        print(f"{kind} no longer reproduces for {name!r} on {backend}, but the case still fails "
              f"({', '.join(sorted({f.kind for f in findings}))}).")
        return EXIT_REPRODUCES
    print(f"{kind} no longer reproduces for {name!r} on {backend}.")
    return EXIT_FIXED


def _rerun(spec: str | None, runs: Mapping[str, Mapping[str, Any]], config: Mapping[str, Any] | None,
           inputs: str | Path, transform: str | None) -> tuple[list[Finding], str]:
    """The findings of the recorded case on each backend of ``runs`` (backend -> mode, in
    order) and the spec's name; CannotRun when it cannot run."""
    from pallas_verify.loader import load_spec
    from pallas_verify.reports.casefile import load_case
    from pallas_verify.runner import Runner, Unsupported

    if spec is None:
        raise CannotRun("this reproducer has no spec reference: the KernelSpec was not defined at module "
                        "level; define it at module level and run pallas-verify again.")
    try:
        loaded = load_spec(spec)
        args, saved_config = load_case(inputs)
    except Exception as exc:
        raise CannotRun(f"{type(exc).__name__}: {exc}") from None
    config = saved_config if config is None else config
    if config is None:
        raise CannotRun(f"neither the script nor {str(inputs)!r} holds the config of the case.")
    targets = {name: _target(name) for name in runs}
    findings: list[Finding] = []
    try:
        with Runner(loaded) as runner:
            for name, target in targets.items():
                if target is None:
                    findings += runner.static_findings(dict(config), args)
                else:
                    findings += runner.check(dict(config), args, target, dict(runs[name]), transform=transform)
    except Unsupported as exc:
        raise CannotRun(f"backend {name} cannot run kernel {loaded.name!r}: {exc}") from None
    except Exception as exc:
        raise CannotRun(f"running the case raised {type(exc).__name__}: {exc}") from None
    return findings, loaded.name


def _target(backend: str) -> Any:
    """The Backend that re-runs a case of ``backend`` (None: the static check), available here."""
    from pallas_verify.backends import registry

    if backend == "static":
        return None
    try:
        target = registry.get("interpret" if backend == "reference" else backend)
    except Exception as exc:
        raise CannotRun(f"{type(exc).__name__}: {exc}") from None
    reason = target.available()
    if reason is not None:
        raise CannotRun(f"backend {target.name} is not available here: {reason}")
    return target


def replay_script(script: str | Path) -> int:
    """Run a reproducer script's case in this process; its exit status (``reproduce``):
    EXIT_REPRODUCES, EXIT_FIXED, or EXIT_CANNOT_RUN when the script or its case cannot run."""
    import runpy

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


def replay_report(path: str | Path) -> int:
    """Re-run every finding of a JSON report through its reproducer and say which still
    reproduce. Exit status: 1 if any does; else 3 if any could not be run (no reproducer,
    or its case cannot run here: never reported as fixed); else 0 (every one fixed)."""
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


def replay_unit(work: Work) -> dict[str, Any]:
    """Replay one failure-database entry from the files the unit carries."""
    with tempfile.TemporaryDirectory(prefix="pv-replay-") as tmp:
        for name, data in work.params["files"].items():
            (Path(tmp) / name).write_bytes(data)
        return {"verdict": REPLAY_VERDICTS.get(replay_script(Path(tmp) / work.params["script"]), "cannot run")}


@dataclasses.dataclass(frozen=True)
class ReplayEnd:
    """What one replay's end means for the fuzz run (which applies it).

    Attributes:
      entry: the failure-database entry replayed.
      verdict: ``still reproduces``, ``fixed``, ``cannot run`` or ``lost``.
      why: why it could not run or was lost, else "".
      lost: the infrastructure lost the replay (it counts for nothing against its entry).
      note: a line for the report's run section (an entry retired to quarantine).
      said: a progress line only (fixed, or could not run this night).
      reproduces: the entry's finding, which still reproduces: reported tonight again.
      fixed: the entry's finding, whose case ran clean: the run drops the entry unless its
        search found the finding again tonight.
    """

    entry: Path | None = None
    verdict: str = "lost"
    why: str = ""
    lost: Lost | None = None
    note: str | None = None
    said: str | None = None
    reproduces: Finding | None = None
    fixed: Finding | None = None


class Replays:
    """The replay units of a fuzz run's failure database ``db``: the fuzz run submits each
    when ``next`` hands it over and applies what its end means (``absorb``)."""

    def __init__(self, db: FailureDatabase, timeout_s: float) -> None:
        self.db = db
        self.entry_of: dict[int, Path] = {}
        self.queue: list[Work] = []
        self.notes: list[str] = []  # entries that could not be read, moved aside
        self.turn = True  # a replay goes next (else a cell)
        for entry in db.entries():
            finding, why = db.read(entry)
            if finding is None:
                note = db.quarantine(entry, f"cannot be read: {why}")
                self.notes.append(f"failure database: moved {entry.name} aside to {note.parent} (cannot be read: {why})")
                continue
            files = {p.name: p.read_bytes() for p in (entry.with_suffix(".py"), entry.with_suffix(".npz"))
                     if p.is_file()}
            work = Work(entry="pallas_verify.campaigns.replay:replay_unit", kind="replay", tag=f"replay of {entry.name}",
                        limit_s=timeout_s + 120.0, params={"script": entry.with_suffix(".py").name, "files": files})
            self.entry_of[work.uid] = entry
            self.queue.append(work)

    def next(self, *, force: bool = False) -> Work | None:
        """The next replay to submit, if it is its turn (or ``force``); the caller has room for it."""
        if not self.queue or not (self.turn or force):
            return None
        self.turn = False
        return self.queue.pop(0)

    def absorb(self, arrival: Arrival, seen: Stamp | None = None) -> ReplayEnd | None:
        """What one replay's end means (tonight: ``seen``, which an entry that still
        reproduces records as its last night); None for what is not a replay's end."""
        if isinstance(arrival.result, Found):  # replays send nothing while they run
            return None
        entry, result, db = self.entry_of.pop(arrival.work.uid, None), arrival.result, self.db
        if entry is None:
            return None
        if isinstance(result, Lost):
            return ReplayEnd(entry=entry, why=f"its replay was lost ({result.cause})", lost=result)
        verdict = result.verdict if isinstance(result, Replayed) else "cannot run"
        why = getattr(result, "reason", None) or "its case cannot run here (see the reproducer's output)"
        if verdict == "cannot run":
            line = db.could_not_run(entry, why)
            said = None if line is not None else f"replay of {entry.name} could not run: {why}"
            return ReplayEnd(entry=entry, verdict=verdict, why=f"its replay could not run: {why}", note=line, said=said)
        finding, unreadable = db.read(entry)
        if finding is None:
            db.quarantine(entry, f"cannot be read: {unreadable}")
            return ReplayEnd(entry=entry, verdict="cannot run", why=f"its entry cannot be read: {unreadable}")
        if verdict == "still reproduces":
            db.ran(entry, seen)
            return ReplayEnd(entry=entry, verdict=verdict, reproduces=dataclasses.replace(
                finding, evidence={**finding.evidence, "replayed_from": str(entry)}))
        return ReplayEnd(entry=entry, verdict=verdict, fixed=finding,
                         said=f"fixed: {finding.kind} in {finding.kernel} on {finding.backend} no longer reproduces")
