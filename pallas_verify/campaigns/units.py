"""A campaign's units of work: what runs in a worker, and what each unit's end means.

Worker side, the entries a ``Work`` names:

- ``run_slice``: a fuzz slice, ``verify`` on one backend with a few examples and its own
  seed. Each finding is sent to the driver (``execution.emit``) the moment its first
  failing example shows it, with a reproducer of that example, so a slice cancelled or
  lost later keeps what it found; its end brings the shrunk findings.
- ``run_spec``: one spec of the conformance matrix on every backend.
- ``campaigns.replay.replay_unit``: one failure-database entry's reproducer.
- ``campaigns.smith.batch.run_unit``: a batch of generated programs (its report is read
  back with ``received``, like the others', by smith's own driver).

A worker may be another process here or a Ray task on another host, so a unit carries
what it needs and sends back what the driver keeps: the report as a dict, the bytes of
its reproducers, and notes (the example database degraded, a key was quarantined).

Driver side, ``Units`` wraps an executor and decodes every unit's end once, into a
typed result (``Reported``, ``Skipped``, ``Invalid``, ``Replayed`` or ``Lost``) or, for
what a unit sends while it runs, ``Found``. One rule decides:

    A failure of the infrastructure is never a finding against a kernel.

The unit's own process dying (cases run in case workers of their own, so this is never
the case's doing: a kill, the out-of-memory killer, a Ray worker lost), its node leaving
the cluster, a database or disk error, the executor failing: the unit is submitted again
(at most ``MAX_ATTEMPTS`` times in all), then ``Lost`` with its cause, for the report's
run section. A unit past its time limit is ``Lost`` at once (what it found was sent as it
happened). An error of the tool itself is ``Lost`` as an internal error. Only what a case
did (raised, hung, aborted, exhausted memory, at a known config with a reproducer) is a
finding, and those come inside ``Reported`` and ``Found``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pallas_verify.execution import Done, Executor, Failure, Update, Work, emit
from pallas_verify.findings import Finding
from pallas_verify.reports.report import Report, finding_dict, finding_from_dict

__all__ = ["LOST_CAUSES", "MAX_ATTEMPTS", "Arrival", "Found", "Invalid", "Lost", "Replayed", "Reported", "Skipped",
           "Units", "judge", "received", "run_slice", "run_spec", "ship", "write_notes"]

#: Attempts a unit gets when the infrastructure fails it (the first included).
MAX_ATTEMPTS = 3

#: Lost.cause -> whether the unit is submitted again (the failure may well not recur).
LOST_CAUSES: Mapping[str, bool] = {
    "worker killed": True,  # the unit's process died: a kill, the OOM killer, a Ray worker lost
    "node lost": True,  # its cluster node left, or its result went with it
    "database error": True,  # a database the unit needs failed
    "disk error": True,  # a file could not be written or read (full, read-only, I/O error)
    "out of memory": True,  # the unit's own process ran out of memory (not a case's)
    "executor error": True,  # the executor could not run or collect it
    "setup error": True,  # the unit could not start there (a spec file or package missing on that host)
    "overran": False,  # past its time limit: what it found was sent as it happened
    "internal error": False,  # pallas-verify itself failed: a bug to report
}
_DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EIO, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.ENOENT}
_REPRODUCER_SUFFIXES = (".py", ".npz")


# -- typed results -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reported:
    """The unit ran: its report (reproducers under the driver's folder) and notes."""

    report: Report
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Skipped:
    """The unit cannot run anywhere here (no node offers its chip, too few devices)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Invalid:
    """The spec is invalid (its strategies misbehave): the user's to fix, not a finding."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Replayed:
    """A replay's verdict: a ``campaigns.replay.REPLAY_VERDICTS`` value."""

    verdict: str


@dataclasses.dataclass(frozen=True)
class Lost:
    """The infrastructure failed the unit ``attempts`` times; never a finding."""

    cause: str
    message: str
    attempts: int = 1

    @property
    def retry(self) -> bool:
        return LOST_CAUSES[self.cause]


@dataclasses.dataclass(frozen=True)
class Found:
    """A finding a running unit sent when its first failing example showed it."""

    finding: Finding


Result = Reported | Skipped | Invalid | Replayed | Lost | Found


@dataclasses.dataclass(frozen=True)
class Arrival:
    """One decoded result of one unit, as it arrived."""

    work: Work
    result: Result
    node: str = ""
    seconds: float = 0.0


# -- worker side ---------------------------------------------------------------------------


def _shipped(finding: Finding) -> dict[str, Any]:
    """A finding and the bytes of its reproducer, as plain data."""
    files = {}
    if finding.reproducer and Path(finding.reproducer).is_file():
        for suffix in _REPRODUCER_SUFFIXES:
            path = Path(finding.reproducer).with_suffix(suffix)
            if path.is_file():
                files[path.name] = path.read_bytes()
    return {"finding": finding_dict(finding), "files": files}


def ship(report: Report, out_dir: Path, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report as a dict plus the bytes of its reproducers (the findings', and the
    upstream limitations' plain-jax ones with the kernel module beside) and the notes;
    removes ``out_dir``."""
    files: dict[str, bytes] = {}
    for finding in report.findings:
        files.update(_shipped(finding)["files"])
    for upstream in _upstream(report.kernels):
        script = Path(upstream.get("reproducer") or "")
        beside = [script.with_suffix(s) for s in _REPRODUCER_SUFFIXES]  # reports.upstream writes these
        for path in (*beside, script.with_name(f"{script.stem}-kernel.py")):
            if path.name and path.is_file():
                files[path.name] = path.read_bytes()
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"report": report.to_dict(), "files": files, "notes": list(notes)}


def _upstream(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The upstream limitations the kernels of a report met (``reports.upstream``)."""
    return [u for kernel in kernels for u in kernel.get("upstream", ())]


def run_slice(work: Work) -> dict[str, Any]:
    """A fuzz slice: ``verify`` on one backend with a few examples and its own seed; each
    finding is emitted as soon as it is seen."""
    from pallas_verify._jax_compat import compile_cache
    from pallas_verify.campaigns.exampledb import example_database
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    compile_cache.enable(trim=True)  # its references' compiles (its case workers turn it on for theirs)
    p, notes = work.params, []
    out = Path(tempfile.mkdtemp(prefix="pv-slice-"))
    database = example_database(p["database"], notes)
    report = verify(load_spec(work.spec_ref), list(work.backends), work.max_examples, work.seed, out_dir=out,
                    timeout_s=p["timeout_s"], shrink_budget_s=p["shrink_s"], database=database, static=p["static"],
                    on_finding=lambda finding: emit(_shipped(finding)))
    return ship(report, out, notes)


def run_spec(work: Work) -> dict[str, Any]:
    """One spec of the conformance matrix on every backend of the unit."""
    from pallas_verify._jax_compat import compile_cache
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    compile_cache.enable(trim=True)
    spec = load_spec(work.spec_ref)
    out = Path(tempfile.mkdtemp(prefix="pv-conformance-"))
    report = verify(spec, list(work.backends), work.max_examples, work.seed, profile=work.params["profile"], out_dir=out,
                    on_finding=lambda finding: emit(_shipped(finding)))
    return ship(report, out)


# -- driver side ---------------------------------------------------------------------------


def judge(failure: Failure) -> Lost | Skipped | Invalid:
    """The one rule: what a unit that did not return means (see the module docstring)."""
    if failure.cause == "unplaceable":
        return Skipped(failure.message)
    if failure.cause == "died":
        return Lost("worker killed", failure.message)
    if failure.cause == "node":
        return Lost("node lost", failure.message)
    if failure.cause == "overran":
        return Lost("overran", failure.message)
    if failure.cause == "executor":
        return Lost("executor error", failure.message)
    names = set(failure.exception)
    if "pallas_verify.errors.InvalidSpec" in names:
        return Invalid(failure.message.partition(": ")[2] or failure.message)
    if names & {"pallas_verify.errors.InvalidArgument", "ImportError"}:
        return Lost("setup error", failure.message)
    if "MemoryError" in names:
        return Lost("out of memory", failure.message)
    if names & {"ConnectionError", "TimeoutError", "redis.exceptions.RedisError"}:
        return Lost("database error", failure.message)
    if "OSError" in names and failure.errno in _DISK_ERRNOS:
        return Lost("disk error", failure.message)
    return Lost("internal error", f"{failure.message}\n{failure.traceback}".strip())


class Units:
    """An executor's units, each end decoded once by ``judge``; infrastructure failures
    retried up to ``MAX_ATTEMPTS`` attempts. Reproducers arrive under ``into``
    (``into/u<uid>/`` per unit, or ``into`` itself when ``flat``)."""

    def __init__(self, executor: Executor, into: Path, *, flat: bool = False) -> None:
        self.executor, self.into, self.flat = executor, Path(into), flat
        self.attempts: dict[int, int] = {}
        self.retried: list[dict[str, Any]] = []  # every retry: unit, cause, message, attempt
        self.write_errors: list[str] = []  # what the driver could not write or read, and why

    def submit(self, work: Work) -> None:
        self.attempts.setdefault(work.uid, 1)
        self.executor.submit(work)

    def free(self) -> int:
        return self.executor.free()

    def accepts(self, hardware: str | None) -> bool:
        return self.executor.accepts(hardware)

    def running(self) -> list[Work]:
        return self.executor.running()

    def cancel(self) -> list[Work]:
        return self.executor.cancel()

    def tidy(self, report: Report) -> None:
        """Remove the units' folders under ``into`` but those a finding of ``report`` still
        points into (its copy elsewhere could not be written); ``into`` itself once empty.
        Nothing when the units write ``flat`` (into a folder that is not theirs alone)."""
        if self.flat:
            return
        keep = {Path(f.reproducer).parent for f in report.findings if f.reproducer}
        for folder in sorted(self.into.iterdir()) if self.into.is_dir() else ():
            if folder not in keep and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
        if self.into.is_dir() and not any(self.into.iterdir()):
            self.into.rmdir()

    def poll(self, timeout_s: float) -> list[Arrival]:
        """What arrived since the last call, decoded; lost units already submitted again."""
        out = []
        for item in self.executor.poll(timeout_s):
            if isinstance(item, Update):
                try:
                    out.append(Arrival(item.work, Found(self._finding(item.work, item.value)), item.node))
                except (KeyError, TypeError, ValueError) as exc:  # the tool's error: said, never fatal
                    self.write_errors.append(f"an update of {item.work.tag} that could not be read ({exc!r})")
                continue
            result = self._decode(item)
            attempt = self.attempts.get(item.work.uid, 1)
            if isinstance(result, Lost) and result.retry and attempt < MAX_ATTEMPTS:
                self.retried.append({"unit": item.work.tag, "cause": result.cause, "message": result.message,
                                     "attempt": attempt, "node": item.node})
                self.attempts[item.work.uid] = attempt + 1
                self.executor.submit(item.work)
                continue
            if isinstance(result, Lost):
                result = dataclasses.replace(result, attempts=attempt)
            self.attempts.pop(item.work.uid, None)
            out.append(Arrival(item.work, result, item.node, item.seconds))
        return out

    def _decode(self, done: Done) -> Result:
        if done.failure is not None:
            return judge(done.failure)
        value = done.value if isinstance(done.value, Mapping) else {}
        if "verdict" in value:
            return Replayed(str(value["verdict"]))
        if "report" not in value:
            return Lost("internal error", f"the unit returned {type(done.value).__name__}, not a report")
        try:
            report = received(value, self._folder(done.work), self.write_errors, done.work.tag)
        except (KeyError, TypeError, ValueError) as exc:
            return Lost("internal error", f"the unit's report could not be read: {exc!r}")
        return Reported(report, tuple(value.get("notes", ())))

    def _finding(self, work: Work, value: Mapping[str, Any]) -> Finding:
        files = _write_files(self._folder(work), value.get("files", {}), self.write_errors, work.tag)
        return _placed(finding_from_dict(value["finding"]), files)

    def _folder(self, work: Work) -> Path:
        return self.into if self.flat else self.into / f"u{work.uid}"


# -- driver side ---------------------------------------------------------------------------


def received(value: Mapping[str, Any], folder: Path, errors: list[str], tag: str) -> Report:
    """The Report a unit shipped (:func:`ship`), its reproducers written under ``folder``
    and its findings and upstream limitations pointing at them there; a file that could
    not be written is named in ``errors`` and its reproducer is None."""
    report = Report.from_dict(value["report"])
    files = _write_files(folder, value.get("files", {}), errors, tag)
    report.findings = [_placed(f, files) for f in report.findings]
    for upstream in _upstream(report.kernels):  # the plain-jax reproducers, as written here
        name = Path(upstream.get("reproducer") or "").name
        upstream["reproducer"] = str(files[name]) if name in files else None
    return report


def _write_files(folder: Path, files: Mapping[str, bytes], errors: list[str], tag: str) -> dict[str, Path]:
    """Write a unit's reproducer files on this host; those written, by name."""
    written = {}
    for name, data in files.items():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            written[name] = (folder / name).resolve()
        except OSError as exc:
            with contextlib.suppress(OSError):
                (folder / name).unlink(missing_ok=True)
            errors.append(f"reproducer {name} of {tag}: {exc.strerror or exc}")
    return written


def _placed(finding: Finding, files: Mapping[str, Path]) -> Finding:
    """The finding with its reproducer at its path on this host (None if not written)."""
    if not finding.reproducer:
        return finding
    name = Path(finding.reproducer).name
    here = files.get(name) if Path(name).with_suffix(".npz").name in files else None
    return dataclasses.replace(finding, reproducer=str(here) if here else None)


def write_notes(errors: list[str]) -> list[str]:
    """The run section's note for what the driver could not write: one line, with a count."""
    if not errors:
        return []
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return [f"could not write or read on this host: {errors[0]}{more}"]
