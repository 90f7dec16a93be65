"""Nightly fuzzing: a time budget spread round-robin over kernels x backends.

The budget is cut into slices: one slice is ``verify(spec, [backend])`` with a few
examples and a fresh seed, run in one of N worker processes (each loads specs by
reference and keeps them). Cells are visited round-robin, in a seeded shuffled order per
round, until the budget is spent or SIGINT/SIGTERM arrives; the report is then written
atomically in every format.

Findings are de-duplicated by signature and each new one is kept in the failure database
under ``OUT/db`` (``fuzzdb``); the next run replays the database first and drops the
entries that no longer reproduce.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import multiprocessing
import random
import re
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, TextIO

from pallas_verify.errors import InvalidArgument
from pallas_verify.findings import Finding
from pallas_verify.fuzzdb import REPLAY_VERDICTS, FailureDatabase, replay_script, signature
from pallas_verify.report import BackendResult, Report

__all__ = ["FuzzOptions", "fuzz", "parse_budget"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_budget(text: str) -> float:
    """Seconds in ``"90s"``, ``"30m"``, ``"1h30m"`` or a bare number of seconds."""
    parts = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)\s*([smh])\s*)+", text or "")
    if re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", text or ""):
        seconds = float(text)
    elif parts:
        seconds = sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)\s*([smh])", text))
    else:
        raise InvalidArgument(f"budget={text!r} is not a duration; write e.g. 90s, 30m or 1h30m.")
    if seconds <= 0:
        raise InvalidArgument(f"budget={text!r} must be more than zero seconds.")
    return seconds


@dataclasses.dataclass(frozen=True, kw_only=True)
class FuzzOptions:
    """What to fuzz and for how long.

    Attributes:
      targets: spec references (FILE.py, FILE.py::NAME, MODULE, MODULE:NAME); default
        () = the bundled catalog and upstream wrappers.
      kernels: fnmatch pattern over spec names; default "*".
      backends: backend names; default None = every available backend.
      budget_s: wall-time budget in seconds; default 1800.
      out_dir: reports, reproducers and the failure database; default "pv-fuzz".
      workers: worker processes; default 2.
      seed: base seed; slice i searches with seed + i. None (default): a fresh one.
      slice_examples: examples per slice; default 5.
      timeout_s: per-case time limit; default 120.
      shrink_budget_s: most seconds a slice spends shrinking a failure; default 60 (less
        when the budget left is short).
    """

    targets: tuple[str, ...] = ()
    kernels: str = "*"
    backends: tuple[str, ...] | None = None
    budget_s: float = 1800.0
    out_dir: Path = Path("pv-fuzz")
    workers: int = 2
    seed: int | None = None
    slice_examples: int = 5
    timeout_s: float = 120.0
    shrink_budget_s: float = 60.0

    def __post_init__(self) -> None:
        for field in ("workers", "slice_examples"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{field}={value!r} must be a positive integer.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Cell:
    ref: str
    kernel: str
    backend: str


# -- worker side ---------------------------------------------------------------------------


def _serve(conn: Connection) -> None:
    """A worker process: run tasks until the parent closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    from pallas_verify._env import configure

    configure()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result = _run_task(task)
        except Exception as exc:
            result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
        conn.send(result)


def _run_task(task: dict[str, Any]) -> dict[str, Any]:
    if task["kind"] == "replay":
        return {"verdict": REPLAY_VERDICTS.get(replay_script(task["script"]), "cannot run")}
    from hypothesis.database import DirectoryBasedExampleDatabase

    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    report = verify(load_spec(task["ref"]), [task["backend"]], task["max_examples"], task["seed"],
                    out_dir=task["out_dir"], timeout_s=task["timeout_s"], shrink_budget_s=task["shrink_s"],
                    database=DirectoryBasedExampleDatabase(task["database"]), static=task["static"])
    return {"report": report.to_dict()}


@dataclasses.dataclass
class _Slot:
    """One worker process and the task it is running."""

    process: Any
    conn: Connection
    task: dict[str, Any] | None = None
    started: float = 0.0

    @classmethod
    def start(cls) -> _Slot:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child,), daemon=True)
        process.start()
        child.close()
        return cls(process=process, conn=parent)

    def kill(self) -> None:
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)


# -- planning ------------------------------------------------------------------------------


def _load(options: FuzzOptions) -> list[tuple[str, Any]]:
    """(reference, spec) of every spec to fuzz, filtered by the kernels pattern."""
    from pallas_verify.loader import load_specs, spec_ref

    refs = list(options.targets) or _catalog_modules()
    found, seen = [], set()
    for ref in refs:
        for spec in load_specs(ref):
            if fnmatch.fnmatchcase(spec.name, options.kernels) and spec.name not in seen:
                seen.add(spec.name)
                found.append((spec_ref(spec), spec))
    if not found:
        raise InvalidArgument(f"kernels={options.kernels!r} matches no KernelSpec in {refs}.")
    return found


def _catalog_modules() -> list[str]:
    import importlib

    modules = []
    for package in ("reference_kernels", "reference_kernels.upstream"):
        names = getattr(importlib.import_module(package), "MODULES", ())
        modules += [f"{package}.{name}" for name in names]
    if not modules:
        raise InvalidArgument("the bundled catalog lists no modules; name spec files or modules to fuzz.")
    return modules


def _plan(options: FuzzOptions, report: Report) -> list[_Cell]:
    """Runnable cells; the others get their skipped/unsupported result in ``report``."""
    from pallas_verify.backends import registry

    chosen = registry.resolve(options.backends)
    if options.backends is None:
        chosen = [b for b in chosen if b.available() is None]
    report.backends = [b.name for b in chosen]
    cells = []
    for ref, spec in _load(options):
        report.kernels.append({"name": spec.name, "features": list(spec.features), "platforms": list(spec.platforms)})
        for backend in chosen:
            reason, status = backend.available(), "skipped"
            if reason is None and not backend.platforms & set(spec.platforms):
                reason = f"{backend.name} serves {sorted(backend.platforms)}; the kernel targets {list(spec.platforms)}"
            if reason is None and spec.unsupported_reason(backend.name):
                reason, status = spec.unsupported_reason(backend.name), "unsupported"
            if reason is None:
                cells.append(_Cell(ref=ref, kernel=spec.name, backend=backend.name))
            else:
                report.results.append(BackendResult(kernel=spec.name, backend=backend.name, status=status, reason=reason))
    return cells


# -- progress ------------------------------------------------------------------------------


@dataclasses.dataclass
class _Progress:
    """A one-line progress bar on a terminal; a plain line every 10 s otherwise."""

    stream: TextIO
    budget_s: float
    last: float = 0.0
    width: int = 0

    def show(self, *, elapsed: float, cells: str, examples: int, findings: int) -> None:
        tty = getattr(self.stream, "isatty", lambda: False)()
        now = time.monotonic()
        if now - self.last < (0.25 if tty else 10.0):
            return
        self.last = now
        share = min(1.0, elapsed / self.budget_s)
        left = max(0.0, self.budget_s - elapsed)
        text = (f"{share:4.0%} | cells {cells} | {examples} examples | {findings} findings | "
                f"{int(left // 60):02d}:{int(left % 60):02d} left")
        if tty:
            bar = "#" * round(share * 20)
            line = f"[{bar:<20}] {text}"
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, line: str) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last = 0.0


# -- the run -------------------------------------------------------------------------------


@dataclasses.dataclass
class _Run:
    """State of one fuzzing run."""

    options: FuzzOptions
    report: Report
    cells: list[_Cell]
    progress: _Progress
    db: FailureDatabase
    seed: int
    stop: bool = False
    slices: int = 0
    examples: int = 0
    visited: int = 0
    round: int = 0
    done: dict[tuple[str, str], BackendResult] = dataclasses.field(default_factory=dict)
    retired: set[_Cell] = dataclasses.field(default_factory=set)
    signatures: set[str] = dataclasses.field(default_factory=set)

    def order(self) -> Iterator[_Cell]:
        """Cells round-robin, each round shuffled by the seed; ends when every cell retired."""
        for round_no in range(sys.maxsize):
            batch = [c for c in self.cells if c not in self.retired]
            if not batch:
                return
            random.Random(self.seed + round_no).shuffle(batch)
            for i, cell in enumerate(batch):
                self.visited, self.round = i + 1, round_no + 1
                if cell not in self.retired:
                    yield cell

    def slice_task(self, cell: _Cell, remaining: float) -> dict[str, Any]:
        self.slices += 1
        out = self.options.out_dir
        first_backend = next(c.backend for c in self.cells if c.kernel == cell.kernel)
        return {"kind": "slice", "ref": cell.ref, "backend": cell.backend, "cell": cell,
                "max_examples": self.options.slice_examples, "seed": (self.seed + self.slices) % 2**32,
                "static": cell.backend == first_backend, "timeout_s": self.options.timeout_s,
                "shrink_s": min(self.options.shrink_budget_s, max(5.0, min(60.0, remaining / 2))), "out_dir": str(out / "tmp" / f"s{self.slices}"),
                "database": str(out / "hypothesis")}

    def absorb(self, task: dict[str, Any], result: dict[str, Any]) -> None:
        """Fold one finished task's result into the run."""
        if task["kind"] == "replay":
            return self._replayed(task, result)
        cell: _Cell = task["cell"]
        if "error" in result:
            kind = result.get("kind", "exception")
            message = result["error"] if "kind" in result else f"verify raised {result['error']}"
            self._new(Finding(kind=kind, kernel=cell.kernel, backend=cell.backend, message=message,
                              config={}, evidence={"traceback": result["traceback"]}))
            self.retired.add(cell)
            return None
        part = Report.from_dict(result["report"])
        for r in part.results:
            self.examples += r.examples
            self._cell_result(cell, r)
        for f in part.findings:
            self._new(f)
        shutil.rmtree(task["out_dir"], ignore_errors=True)
        return None

    def _cell_result(self, cell: _Cell, r: BackendResult) -> None:
        old = self.done.get((r.kernel, r.backend))
        if r.status in ("unsupported", "skipped"):
            self.retired.add(cell)
        elif old is not None and old.status in ("pass", "fail"):
            status = "fail" if "fail" in (old.status, r.status) else "pass"
            reasons = sorted(set(filter(None, (old.reason + ", " + r.reason).split(", "))))
            r = dataclasses.replace(r, status=status, reason=", ".join(reasons), examples=old.examples + r.examples,
                                    shrink_steps=old.shrink_steps + r.shrink_steps, seconds=old.seconds + r.seconds)
        self.done[(r.kernel, r.backend)] = r

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

    def _replayed(self, task: dict[str, Any], result: dict[str, Any]) -> None:
        entry = Path(task["entry"])
        if "error" in result or result["verdict"] == "cannot run":  # kept: nothing is known about it
            why = result.get("error", "its case cannot run here (see the worker's output)")
            self.progress.note(f"replay of {entry.name} could not run: {why}")
            return
        data = json.loads(entry.read_text())
        finding = Finding(**{k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(Finding)}})
        if result["verdict"] == "still reproduces":
            evidence = {**finding.evidence, "replayed_from": str(entry)}
            self._new(dataclasses.replace(finding, evidence=evidence), replayed=True)
            self._cell_result(_Cell(ref="", kernel=finding.kernel, backend=finding.backend), BackendResult(
                kernel=finding.kernel, backend=finding.backend, status="fail", reason=finding.kind))
        else:
            self.db.drop(entry)
            self.progress.note(f"fixed: {finding.kind} in {finding.kernel} on {finding.backend} no longer reproduces")

    def finish(self, seconds: float) -> Report:
        planned = {(r.kernel, r.backend) for r in self.report.results}
        self.report.results += [r for key, r in self.done.items() if key not in planned]
        never = [c for c in self.cells if (c.kernel, c.backend) not in self.done]
        self.report.results += [BackendResult(kernel=c.kernel, backend=c.backend, status="skipped",
                                              reason="not reached within the budget") for c in never]
        self.report.seconds = seconds
        self.report.interrupted = self.stop
        shutil.rmtree(self.options.out_dir / "tmp", ignore_errors=True)
        return self.report


def fuzz(options: FuzzOptions, *, stream: TextIO = sys.stderr) -> Report:
    """Fuzz for ``options.budget_s`` seconds; write and return the report."""
    from pallas_verify.render import write_reports

    started = time.monotonic()
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    report = Report(seed=seed, profile="dev")
    cells = _plan(options, report)
    run = _Run(options=options, report=report, cells=cells, progress=_Progress(stream, options.budget_s),
               db=FailureDatabase(options.out_dir / "db"), seed=seed)
    stream.write(f"pallas-verify fuzz: seed={seed}, {len(cells)} cells, {options.workers} workers, "
                 f"budget {options.budget_s:.0f} s, {len(run.db.entries())} known findings to replay\n")
    with _StopOnSignal(run):
        _loop(run, started)
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


def _loop(run: _Run, started: float) -> None:
    """Hand tasks to idle workers until the budget is spent (plus a grace for running ones)."""
    budget = run.options.budget_s
    grace = max(5.0, min(60.0, budget * 0.1))
    tasks: list[dict[str, Any]] = [{"kind": "replay", "script": str(e.with_suffix(".py")), "entry": str(e)}
                                   for e in run.db.entries()]
    cells = run.order()
    slots = [_Slot.start() for _ in range(run.options.workers)]
    try:
        while not run.stop:
            elapsed = time.monotonic() - started
            if elapsed < budget:
                _assign(run, slots, tasks, cells, budget - elapsed)
            busy = [s for s in slots if s.task is not None]
            if not busy or elapsed > budget + grace:
                break
            _collect(run, slots, busy)
            run.progress.show(elapsed=elapsed, cells=f"{run.visited}/{len(run.cells) - len(run.retired)} (round {run.round})",
                              examples=run.examples, findings=len(run.report.findings))
    finally:
        for slot in slots:
            slot.kill()


def _assign(run: _Run, slots: list[_Slot], tasks: list[dict[str, Any]], cells: Iterator[_Cell],
            remaining: float) -> None:
    for slot in slots:
        if slot.task is not None:
            continue
        task = tasks.pop(0) if tasks else None
        if task is None:
            cell = next(cells, None)
            if cell is None:
                return
            task = run.slice_task(cell, remaining)
        slot.conn.send({k: v for k, v in task.items() if k != "cell"})
        slot.task, slot.started = task, time.monotonic()


def _collect(run: _Run, slots: list[_Slot], busy: Sequence[_Slot]) -> None:
    ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=0.5)
    limit = run.options.timeout_s * (run.options.slice_examples + 2) + 120.0
    for i, slot in enumerate(slots):
        if slot.task is None:
            continue
        task = slot.task
        if slot.conn in ready:
            try:
                result, healthy = slot.conn.recv(), True
            except (EOFError, OSError):
                result, healthy = _lost(slot, "crash", "died"), False
        elif slot.process.sentinel in ready:
            result, healthy = _lost(slot, "crash", "died"), False
        elif time.monotonic() - slot.started > limit:
            result, healthy = _lost(slot, "timeout", f"did not finish the slice within {limit:.0f} s"), False
        else:
            continue
        if healthy:
            slot.task = None
        else:
            slot.kill()
            slots[i] = _Slot.start()
        if not run.stop:
            run.absorb(task, result)


def _lost(slot: _Slot, kind: str, what: str) -> dict[str, Any]:
    code = slot.process.exitcode
    return {"kind": kind, "error": f"the fuzz worker process {what}" + (f" (exit code {code})" if code else ""),
            "traceback": ""}
