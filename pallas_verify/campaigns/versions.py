"""The JAX-version matrix: one conformance run per JAX release, and what changed between them.

``pallas-verify conformance [TARGETS...] --jax 0.11.2,0.12.0.1`` runs the same conformance
command under each release, oldest first, each in the release's own Python environment
(``campaigns.jaxenvs``) as a command of its own::

    PYTHON -m pallas_verify.cli conformance ARGS... --out OUT/jax-VERSION

(its output in ``OUT/jax-VERSION/conformance.log``), then compares the reports of
consecutive releases with ``reports.compare``: per kernel and cell, "works on 0.11.2,
fails on 0.12.0.1: exception: AttributeError: ...", n/a appearing or gone. A release
whose environment cannot be made or cannot import pallas-verify is recorded so, and the
others still run. ``OUT/versions.json`` (the source of truth) and ``versions.md`` hold
every release's run and the comparisons; ``versions.html`` draws the kernel x release
table with what changed between releases outlined (``reports.versions_html``).

Conformance takes no ``--seed``: its default profile (``ci``) is derandomized, so every
release draws the same examples; another profile draws fresh ones per release.

The exit status (``Matrix.status``): 2 when every release's run exited 2 (the command
itself is wrong, e.g. ``--kernels`` matches nothing); else 1 when a release's run found
something (or had an invalid spec) or the verdicts differ between releases; else 130
when a signal stopped it, 4 when a release has no report or a cell is not comparable
(not reached, skipped on one release), 0 when every release ran clean with the same
verdicts.

A release's command is a ``subprocess.Popen`` of its own interpreter, not a worker of
``execution`` (those run this interpreter's entry points): it leads its own process
group, hears SIGINT and SIGTERM from this process (once: it stops cleanly and writes its
report), and is killed with its tree if this process is stopped again or fails.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import json
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pallas_verify.campaigns.jaxenvs import NoEnvironment, find_env, probe, release_key
from pallas_verify.campaigns.stop import StopOnSignal
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution.lifeline import kill_tree
from pallas_verify.exits import (
    EXIT_FINDINGS,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    run_status,
)
from pallas_verify.reports.compare import (
    Change,
    Comparison,
    compare_reports,
    load_report,
    report_jax_version,
)
from pallas_verify.reports.compare_text import WIDTH, label, wrap
from pallas_verify.reports.report import write_atomic

__all__ = ["Matrix", "Step", "VersionRun", "change_line", "matrix_lines", "run_matrix", "write_matrix"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class VersionRun:
    """One JAX release's conformance run.

    Attributes:
      jax: the release asked for.
      python, origin: its interpreter and how it was found (``jaxenvs``); None without one.
      report: its ``report.json``; None when there is none (``error`` says why).
      jax_version: the release its report says it ran on.
      exit_status: its conformance command's exit status; None when it did not start.
      error: why it has no report, or "".
      seconds: wall time of its command.
      log: the command's output (stdout and stderr); None when it did not start.
      cells: its cells by status, e.g. ``{"pass": 3, "fail": 1}``.
    """

    jax: str
    python: str | None = None
    origin: str | None = None
    report: str | None = None
    jax_version: str | None = None
    exit_status: int | None = None
    error: str = ""
    seconds: float = 0.0
    log: str | None = None
    cells: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        """Its cells by status (``1 PASS, 1 FAIL``), or why it has no report (first line)."""
        if self.report is None:
            return f"no report: {self.error.splitlines()[0] if self.error else 'none written'}"
        return ", ".join(f"{n} {label(s).upper()}" for s, n in self.cells.items()) or "no cells"

    def line(self) -> str:
        """Its progress line: the summary, then the exit status, time and report."""
        if self.report is None:
            return f"jax {self.jax}: {self.summary()}"
        return f"jax {self.jax}: {self.summary()} (exit {self.exit_status}, {self.seconds:.1f} s): {self.report}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    """The comparison of two consecutive releases' reports (``old`` the older)."""

    old: str
    new: str
    comparison: Comparison

    @property
    def changes(self) -> tuple[Change, ...]:
        """The cells whose verdict differs (a cell failing alike on both is no difference)."""
        return tuple(c for c in self.comparison.changes if c.differs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Matrix:
    """Every release's run, oldest first, and the steps between consecutive ones that have
    a report; ``interrupted`` when a signal stopped it."""

    runs: tuple[VersionRun, ...]
    steps: tuple[Step, ...] = ()
    interrupted: bool = False

    @property
    def status(self) -> int:
        """The exit status (the module's docstring)."""
        started = [r.exit_status for r in self.runs if r.exit_status is not None]
        if started and all(s == EXIT_USAGE for s in started) and len(started) == len(self.runs):
            return EXIT_USAGE
        changes = [c for s in self.steps for c in s.changes]
        found = any(s in (EXIT_FINDINGS, EXIT_USAGE) for s in started) or any(
            c.category != "not comparable" for c in changes)
        incomplete = any(r.report is None or r.exit_status == EXIT_INCOMPLETE for r in self.runs) or any(
            c.category == "not comparable" for c in changes)
        interrupted = self.interrupted or EXIT_INTERRUPTED in started
        return run_status(findings=found, interrupted=interrupted, incomplete=incomplete)

    def to_dict(self) -> dict[str, Any]:
        """``versions.json`` (docs/jax-versions.md)."""
        return {"version": 1, "runs": [dataclasses.asdict(r) for r in self.runs],
                "comparisons": [{"old_jax": s.old, "new_jax": s.new, **s.comparison.to_dict()} for s in self.steps],
                "interrupted": self.interrupted, "exit_status": self.status}


def run_matrix(versions: Sequence[str], conformance_args: Sequence[str], *, out_dir: Path,
               given: Mapping[str, Path], cwd: Path, cache: Path,
               say: Callable[[str], Any] = print) -> Matrix:
    """Run ``conformance ARGS`` under each release of ``versions``, oldest first, each into
    ``out_dir/jax-VERSION``; then compare consecutive releases' reports."""
    runs: list[VersionRun] = []
    with StopOnSignal() as stop:
        for version in sorted(set(versions), key=release_key):
            if stop.requested:
                runs.append(VersionRun(jax=version, error=f"not run: stopped by {stop.requested}"))
                continue
            run = _run_version(version, conformance_args, out_dir, given, cwd, cache, say, stop)
            say(run.line())
            for line in run.error.splitlines()[1:]:
                say(f"  {line.strip()}")
            runs.append(run)
    steps = []
    reports = [(r.jax, r.report) for r in runs if r.report is not None]
    for (old, old_path), (new, new_path) in itertools.pairwise(reports):
        comparison = compare_reports(load_report(old_path), load_report(new_path), old_path=old_path,
                                     new_path=new_path)
        steps.append(Step(old=old, new=new, comparison=comparison))
    return Matrix(runs=tuple(runs), steps=tuple(steps), interrupted=stop.requested is not None)


def _run_version(version: str, args: Sequence[str], out_dir: Path, given: Mapping[str, Path], cwd: Path,
                 cache: Path, say: Callable[[str], Any], stop: StopOnSignal) -> VersionRun:
    """One release: find (or make) its environment, probe it, run conformance, read the report."""
    try:
        env = find_env(version, given, cwd=cwd, cache=cache, say=say)
    except NoEnvironment as exc:
        return VersionRun(jax=version, error=f"cannot start: {exc}")
    say(f"jax {version}: conformance under {env.python} ({env.origin}) -> {out_dir / f'jax-{version}'}")
    try:
        probe(env, cwd=cwd)
    except NoEnvironment as exc:
        return VersionRun(jax=version, python=env.python, origin=env.origin, error=f"cannot start: {exc}")
    out = out_dir / f"jax-{version}"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "conformance.log"
    command = [env.python, "-m", "pallas_verify.cli", "conformance", *args, "--out", str(out)]
    started = time.perf_counter()
    with log.open("w") as sink:
        rc = _wait(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=cwd, process_group=0), stop)
    seen = VersionRun(jax=version, python=env.python, origin=env.origin, exit_status=rc, log=str(log),
                      seconds=time.perf_counter() - started)
    path = out / "report.json"
    if not path.is_file():
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return dataclasses.replace(seen, error=f"conformance exited {rc} without a report: "
                                   + (lines[-1] if lines else "no output") + f" (see {log})")
    try:
        data = load_report(path)
    except InvalidArgument as exc:  # a report cut short or of another format: said, the others still compare
        return dataclasses.replace(seen, error=str(exc))
    cells = collections.Counter(c.get("status") for k in data["kernels"] for c in k.get("results", {}).values())
    return dataclasses.replace(seen, report=str(path), jax_version=report_jax_version(data), cells=dict(cells))


def _wait(child: subprocess.Popen[Any], stop: StopOnSignal) -> int:
    """``child``'s exit status; the first SIGINT or SIGTERM here is passed on to it (it stops
    cleanly and writes its report); a second one, or any error, kills its tree."""
    told = False
    try:
        while (rc := child.poll()) is None:
            if stop.requested and not told:
                child.send_signal(getattr(signal, stop.requested, signal.SIGINT))
                told = True
            time.sleep(0.1)
        return rc
    except BaseException:
        kill_tree(child.pid, leads_group=True)
        child.wait()
        raise


_CAN = {"pass": "works on", "unsupported": "n/a on", "skipped": "skipped on", None: "absent on"}


def change_line(change: Change, old: str, new: str) -> str:
    """What changed in a cell from release ``old`` to ``new``, as a sentence: "works on
    0.11.2, fails on 0.12.0.1: exception: AttributeError: ..."."""
    def findings(seen: Sequence[Any]) -> str:
        return "; ".join(s.text() for s in seen)

    match change.category:
        case "new failure":
            found = findings(change.appeared or change.now)
            return f"{_CAN.get(change.old, 'absent on')} {old}, fails on {new}" + (f": {found}" if found else "")
        case "fixed":
            return f"works on {new}, fails on {old}" + (f": {findings(change.was)}" if change.was else "")
        case "still failing":
            return f"fails on both: {findings(change.was)} on {old}; {findings(change.now)} on {new}"
        case "new n/a":
            return f"runs on {old} ({label(change.old)}), n/a on {new}: {change.why_new}"
        case "n/a gone":
            return f"runs on {new} ({label(change.new)}), n/a on {old}: {change.why_old}"  # the reason last: it wraps
        case "added":
            return f"only on {new} ({label(change.new)})"
        case "removed":
            return f"only on {old} ({label(change.old)})"
    why = change.why_new or change.why_old
    return f"{label(change.old)} on {old}, {label(change.new)} on {new} (not comparable)" + (f": {why}" if why else "")


def matrix_lines(matrix: Matrix, *, width: int = WIDTH) -> list[str]:
    """The terminal account of the steps: per pair of consecutive releases, each cell that
    changed (or that the verdicts are the same), each in at most three lines of ``width``."""
    lines = []
    for step in matrix.steps:
        jax = step.comparison.fact("jax_version")
        said = jax is not None and (jax.old, jax.new) != (step.old, step.new)
        lines += wrap(f"jax {step.old} -> {step.new}" + (f" (the reports say {jax.old} -> {jax.new})" if said else "")
                      + ":", width=width)
        for c in step.changes:
            lines += wrap(f"{c.kernel} {c.cell}: {change_line(c, step.old, step.new)}", indent="  ", width=width)
        if not step.changes:
            both = len(step.comparison.changes)
            lines.append(f"  the same verdicts ({step.comparison.unchanged} cells alike"
                         + (f", {both} failing alike on both)" if both else ")"))
    if len(matrix.runs) - sum(r.report is None for r in matrix.runs) < 2:
        lines.append("fewer than two releases have a report: nothing to compare")
    return lines


def _markdown(matrix: Matrix) -> str:
    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["# JAX versions", "", "| jax | python | report | ran on jax | exit | cells |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.jax} | {cell(r.python or '-')} | {cell(r.report or '-')} | {r.jax_version or '-'} | "
              f"{'-' if r.exit_status is None else r.exit_status} | {cell(r.summary())} |" for r in matrix.runs]
    for run in (r for r in matrix.runs if r.error):
        lines += ["", f"jax {run.jax}:", "", "```", run.error, "```"]
    for step in matrix.steps:
        lines += ["", f"## jax {step.old} -> {step.new}", ""]
        lines += [f"- `{c.kernel}` {c.cell}: {change_line(c, step.old, step.new)}" for c in step.changes]
        if not step.changes:
            lines.append(f"The same verdicts ({step.comparison.unchanged} cells alike).")
    lines += ["", f"Exit status {matrix.status}."]
    return "\n".join(lines) + "\n"


def write_matrix(matrix: Matrix, out_dir: Path) -> dict[str, Path]:
    """Write ``versions.md``, ``versions.html`` (``reports.versions_html``, with each
    release's cells) and, last, ``versions.json`` under ``out_dir``; their paths by format."""
    from pallas_verify.reports.versions_html import versions_page

    data = matrix.to_dict()
    reports = {}
    for run in (r for r in matrix.runs if r.report is not None):
        with contextlib.suppress(InvalidArgument):  # read once already; one gone since is drawn without cells
            reports[run.jax] = load_report(run.report)
    paths = {"md": write_atomic(out_dir / "versions.md", _markdown(matrix)),
             "html": write_atomic(out_dir / "versions.html", versions_page(data, reports))}
    return {"json": write_atomic(out_dir / "versions.json", json.dumps(data, indent=2) + "\n"), **paths}
