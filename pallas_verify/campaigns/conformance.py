"""The conformance suite: every registered kernel (the catalog, the upstream wrappers, the
third-party corpus and any library registered under ``pallas_verify.kernels``) on every
backend.

The result is the feature x backend matrix: one cell per (kernel, backend[, transform]),
each pass, fail (with the finding), unsupported (with the reason), skipped (backend not
available here, or not for the kernel's platforms, with the reason) or, when the run did
not get to it, interrupted (a signal stopped the run) or not reached (its unit lost to the
infrastructure: never charged to the kernel; see ``campaigns.units``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import time
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from pallas_verify.campaigns.sanitizer import Planted
from pallas_verify.campaigns.sanitizer import judge as judge_planted
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
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution import Executor, Work
from pallas_verify.findings import Finding, row_of
from pallas_verify.reports.matrix import tally
from pallas_verify.reports.report import (
    BackendResult,
    Report,
    cell_key,
    join_reasons,
    kernel_entry,
    kernel_rows,
    unrun_results,
)
from pallas_verify.spec import KernelSpec

__all__ = ["HOST_DEVICES", "ensure_host_devices", "registered_specs", "run_conformance"]


# Host CPU devices the conformance run asks for: the catalog's multi-device kernels (a
# ring permute with remote DMAs under shard_map) need 4.
HOST_DEVICES = 4


def ensure_host_devices(environ: MutableMapping[str, str] = os.environ) -> None:
    """Ask XLA for HOST_DEVICES CPU devices unless the user chose a count; call before jax
    is imported. Worker processes inherit it."""
    flags = environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={HOST_DEVICES}".strip()


def registered_specs(pattern: str = "*", invalid: list[dict[str, str]] | None = None) -> list[KernelSpec]:
    """The specs kernel libraries register (``registered``: the ``pallas_verify.kernels``
    entry points, this project's catalog among them) whose names match ``pattern`` (fnmatch;
    ``a,b`` for several). An entry point or module that cannot be loaded goes to
    ``invalid`` (``{"target", "reason"}``); without ``invalid`` it raises."""
    from pallas_verify.registered import registered_specs as every

    bad: list[dict[str, str]] = []
    patterns = [p for p in pattern.split(",") if p]
    found = every(bad)
    if bad and invalid is None:
        raise InvalidArgument("\n".join(f"{b['target']}: {b['reason']}" for b in bad))
    if invalid is not None:
        invalid += bad
    specs = list({id(s): s for _, s in found if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)}.values())
    if not specs and not bad:
        raise InvalidArgument(f"--kernels {pattern!r} matches no registered kernel; try '*' or e.g. 'matmul*'.")
    return specs


def user_specs(targets: Sequence[str], pattern: str = "*") -> list[KernelSpec]:
    """The KernelSpecs of spec files or modules (``FILE.py``, ``FILE.py::NAME``, ``MODULE``)
    whose names match ``pattern`` (fnmatch; ``a,b`` for several), in file order."""
    from pallas_verify.loader import load_specs

    patterns = [p for p in pattern.split(",") if p]
    specs: dict[int, KernelSpec] = {}
    for target in targets:
        specs.update((id(s), s) for s in load_specs(target) if any(fnmatch.fnmatchcase(s.name, p) for p in patterns))
    if not specs:
        raise InvalidArgument(f"--kernels {pattern!r} matches no KernelSpec of {', '.join(targets)}; try '*'.")
    return list(specs.values())


def run_conformance(
    specs: Sequence[KernelSpec],
    *,
    backends: Sequence[str] | str | None = None,
    max_examples: int = 3,
    profile: str = "ci",
    out_dir: str | Path = "pv-out/conformance",
    progress: Callable[[str], Any] = print,
    executor: Executor | None = None,
    generated_s: float = 0.0,
    write: Callable[[Report], Any] | None = None,
    status: Callable[[int, Sequence[str]], Any] | None = None,
    invalid: Sequence[dict[str, str]] = (),
    seed: int | None = None,
    planted: Sequence[Planted] = (),
    isolate: str = "auto",
) -> Report:
    """Verify each spec on each backend; the Report's results are the matrix.

    With ``executor`` each spec is one unit of work run there (the report records each
    cell's node); without, the specs run one after another in this process. With
    ``generated_s`` > 0, a smith campaign of that many seconds adds the "generated
    programs" row (programs run, pass, divergences per TPU-capable backend). ``progress``
    gets a line per finished kernel; ``write`` is called with the report so far after
    every unit (``campaigns.output``); ``status`` (if given) hears, while units run, how
    many kernels finished and which run now. ``invalid`` (what ``registered_specs`` could not
    load) is the report's from the start. SIGINT and SIGTERM stop the units run on an
    executor cleanly (``report.interrupted``). ``seed``: what every spec's search draws
    from (``choices.run_seed``: 0 under the ci profile when None); the report records it,
    and the same seed repeats the run. ``planted``: planted-bug kernels run as rows beside
    ``specs``, each judged by its expected verdicts (``campaigns.sanitizer``). ``isolate``:
    ``verify``'s, for the specs run in this process (no ``executor``).
    """
    from pallas_verify.backends import registry
    from pallas_verify.choices import run_seed

    names = [b.name for b in registry.resolve(backends)]
    seed = run_seed(seed, profile)
    report = Report(backends=names, profile=profile, seed=seed, invalid=[dict(i) for i in invalid])
    specs = [*specs, *(row.spec for row in planted)]
    started = time.perf_counter()
    if executor is not None:
        report.executor = executor.name
        _run_units(specs, names, max_examples, profile, Path(out_dir) / "repro", executor, report, progress,
                   write or (lambda _: None), status, seed)
    else:
        _run_here(specs, names, max_examples, profile, Path(out_dir) / "repro", report, progress, seed, isolate)
    if generated_s > 0 and not report.interrupted:
        report.merge(_generated_row(names, generated_s, Path(out_dir) / "generated", progress, seed))
    if planted:
        judge_planted(report, planted, out_dir=Path(out_dir) / "repro", seed=seed, max_examples=max_examples,
                      profile=profile)
    report.seconds = time.perf_counter() - started
    return report


def _run_here(specs: Sequence[KernelSpec], names: list[str], max_examples: int, profile: str, repro: Path,
              report: Report, progress: Callable[[str], Any], seed: int, isolate: str = "auto") -> None:
    """Every spec in this process, one after another."""
    from pallas_verify.engine import verify

    for done, spec in enumerate(specs, 1):
        part = verify(spec, names, max_examples, seed, profile=profile, out_dir=repro, isolate=isolate)
        report.merge(part)
        progress(f"[{done}/{len(specs)}] {spec.name}: {tally(part.results)}")


def _generated_row(names: Sequence[str], budget_s: float, out_dir: Path, progress: Callable[[str], Any],
                   seed: int) -> Report:
    from pallas_verify.backends import registry
    from pallas_verify.campaigns.smith.campaign import (
        GENERATED,
        SmithOptions,
        conformance_rows,
        smith,
    )

    tpu = tuple(n for n in names if "tpu" in registry.get(n).platforms and registry.get(n).available() is None)
    # One batch at a time from this process: its interpreters' worker is already warm.
    part = conformance_rows(smith(SmithOptions(backends=tpu, budget_s=budget_s, out_dir=out_dir, workers=1,
                                                   seed=seed)))
    progress(f"{GENERATED}: " + ", ".join(f"{cell_key(r)}={r.status} ({r.reason})" for r in part.results))
    return part


def _run_units(specs: Sequence[KernelSpec], names: list[str], max_examples: int, profile: str, repro: Path,
               executor: Executor, report: Report, progress: Callable[[str], Any],
               write: Callable[[Report], Any], status: Callable[[int, Sequence[str]], Any] | None = None,
               seed: int | None = None) -> None:
    """Every spec as a unit on ``executor``; parts merged in spec order as they come back."""
    from pallas_verify.campaigns.stop import StopOnSignal
    from pallas_verify.loader import spec_ref

    env = {k: os.environ[k] for k in ("XLA_FLAGS",) if k in os.environ}
    waiting = []
    for spec in specs:
        ref = spec_ref(spec)
        if ref is None:
            raise InvalidArgument(f"spec {spec.name!r} cannot be loaded by reference; define it at module level.")
        waiting.append(Work(entry="pallas_verify.campaigns.units:run_spec", kind="verify", spec_ref=ref,
                            tag=spec.name, backends=tuple(names), max_examples=max_examples, seed=seed,
                            params={"profile": profile}, env=env, limit_s=3600.0))
    run = _Matrix(specs=list(specs), names=names, base=report)
    units = Units(executor, repro, flat=True)
    with StopOnSignal() as stop:
        try:
            while (waiting or units.running()) and not stop.requested:
                while waiting and units.free() > 0:
                    units.submit(waiting.pop(0))
                arrived = units.poll(0.5)
                for arrival in arrived:  # kept, even when a stop came meanwhile
                    line = run.absorb(arrival, units)
                    if line:
                        progress(line + (f" (on {arrival.node})" if arrival.node and executor.name != "local" else ""))
                if status is not None:
                    status(len(run.parts), [w.tag for w in units.running()])
                if arrived:
                    snapshot = run.assemble()
                    snapshot.invalid[:0] = report.invalid
                    snapshot.run = {**run.account(units), "finished": False}
                    write(snapshot)
        finally:
            running = {w.tag for w in units.cancel()}
    report.interrupted = stop.requested is not None
    run.finish(running, stop.requested)
    report.merge(run.assemble())
    report.run = {**run.account(units), "finished": True}


@dataclasses.dataclass
class _Matrix:
    """The parts of a conformance run on an executor, as they arrive."""

    specs: list[KernelSpec]
    names: list[str]
    base: Report
    parts: dict[str, Report] = dataclasses.field(default_factory=dict)
    found: dict[str, list[Finding]] = dataclasses.field(default_factory=dict)  # sent before their unit ended
    lost: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def absorb(self, arrival: Arrival, units: Units) -> str | None:
        """Fold in one arrival; the progress line of a spec that finished."""
        spec = next(s for s in self.specs if s.name == arrival.work.tag)
        result = arrival.result
        if isinstance(result, Found):
            self.found.setdefault(spec.name, []).append(result.finding)
            return None
        if isinstance(result, Reported):
            part = result.report
            part.results = [dataclasses.replace(r, node=arrival.node) for r in part.results]
            self.notes += [n for n in result.notes if n not in self.notes]
            self.found.pop(spec.name, None)  # the unit's own, shrunk findings replace them
        elif isinstance(result, Skipped):
            part = _skipped(spec, self.names, result.reason)
        elif isinstance(result, Invalid):
            part = _unfinished(spec, self.names, f"invalid spec: {result.reason}", [])
            part.invalid.append({"kernel": spec.name, "reason": result.reason})
        else:
            assert isinstance(result, Lost)
            self.lost.append({"unit": spec.name, "kernel": spec.name, "cause": result.cause, "message": result.message,
                              "attempts": result.attempts, "node": arrival.node})
            why = f"its unit was lost ({result.cause}, {result.attempts} attempts): {result.message.splitlines()[0]}"
            part = _unfinished(spec, self.names, why, self.found.pop(spec.name, []))
        self.parts[spec.name] = part
        return f"[{len(self.parts)}/{len(self.specs)}] {spec.name}: {tally(part.results)}"

    def finish(self, running: set[str], signame: str | None) -> None:
        """Parts for the specs that never finished: stopped while running, or before."""
        for spec in self.specs:
            if spec.name not in self.parts:
                when = "while it ran" if spec.name in running else "before it ran"
                why = f"stopped by {signame} {when}" if signame else "not run"
                self.parts[spec.name] = _unfinished(spec, self.names, why, self.found.pop(spec.name, []),
                                                    status="interrupted" if signame else "not_reached")

    def assemble(self) -> Report:
        """The report so far: finished parts, and placeholders for the rest."""
        out = Report(backends=list(self.base.backends), profile=self.base.profile, executor=self.base.executor,
                     seed=self.base.seed)
        for spec in self.specs:
            out.merge(self.parts.get(spec.name) or _unfinished(spec, self.names, "not reached yet",
                                                               self.found.get(spec.name, [])))
        return out

    def account(self, units: Units) -> dict[str, Any]:
        return {"units": len(self.parts), "retried": units.retried, "lost": self.lost,
                "notes": self.notes + write_notes(units.write_errors)}


def _unfinished(spec: KernelSpec, names: list[str], reason: str, found: list[Finding], *,
                status: Any = "not_reached") -> Report:
    """A spec whose unit did not finish: its cells ``status`` (not reached, or interrupted),
    for ``reason``, but failed where a finding it sent before it ended showed (those
    findings are kept)."""
    part = Report(backends=names, kernels=[kernel_entry(spec)], findings=list(found))
    for name in names:
        for cell in unrun_results(spec, name, status, reason):
            kinds = [f.kind for f in found if row_of(f) == name and f.transform == cell.transform]
            part.results.append(dataclasses.replace(cell, status="fail", reason=join_reasons(kinds)) if kinds else cell)
    part.results += kernel_rows(spec.name, found)
    return part


def _skipped(spec: KernelSpec, names: list[str], reason: str) -> Report:
    return Report(backends=names, kernels=[kernel_entry(spec)],
                  results=[BackendResult(kernel=spec.name, backend=b, status="skipped", reason=reason) for b in names])
