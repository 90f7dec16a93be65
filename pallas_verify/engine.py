"""``verify``: plan a spec's searches, let them take turns, and assemble the report (one
search's examples are search.py's, its rounds under Hypothesis rounds.py's).

``verify`` runs, per backend (cheapest first), one search of the bare kernel and one per
transform in ``spec.transforms``:

1. Each example checks every ``pallas_call``'s grid without running anything (races
   across "parallel" axes, unwritten output blocks, revisits): the static check, traced
   once per config and input shapes and shared by every search (where a core is spare,
   in a worker of its own while step 2 runs: ``isolation.static_tracer_slot``). Its
   findings are the kernel's, reported once with backend "static" (one per kind, on the
   smallest example that showed it), and they fail the report's ``static`` row, not the
   backends' cells (``findings.KERNEL_ROWS``; a divergence between backends fails the
   ``divergence`` row): each backend's cell is judged by its own examples alone.
2. It sends the case to the backend (in its worker process) and computes the reference
   meanwhile (cached per example, so every backend's search reuses it: Hypothesis draws
   the same configs and inputs first in each), then runs the oracles.
3. A transform's search draws config, inputs, the transform's own draws (a batch, a
   cotangent; see transforms.py), then the mode. A backend's searches take turns: each
   runs its first ``_ROUNDS`` examples before any runs the rest of its budget, so a bug
   only a transform shows is not found after the whole bare search.

A search per backend, rather than one over all backends, keeps each backend's verdict
honest: a backend that fails on every example would otherwise stop the search before the
others were judged, and shrinking one backend's bug would be steered by another's.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from pallas_verify import _jax_compat
from pallas_verify.backends import registry
from pallas_verify.backends.base import Backend
from pallas_verify.causes import knobs_needed
from pallas_verify.errors import InvalidSpec, brief, check_positive_int
from pallas_verify.findings import Finding, one_per_reference_failure, row_of
from pallas_verify.interrupts import Interrupted, not_started, signal_name, unfinished
from pallas_verify.reports.report import (
    BackendResult,
    Report,
    join_reasons,
    kernel_entry,
    kernel_rows,
    unrun_results,
)
from pallas_verify.rounds import merge, run_search
from pallas_verify.runner import Runner
from pallas_verify.search import Search, StaticLedger
from pallas_verify.spec import KernelSpec

if TYPE_CHECKING:
    from pallas_verify.reports.live import LiveProgress

__all__ = ["verify"]

# Example caps of the rounds before each search's last one (which runs to its budget).
_ROUNDS = (1,)


def verify(
    spec: KernelSpec,
    backends: Sequence[str] | str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    *,
    profile: str = "dev",
    out_dir: str | Path = "pv-out",
    timeout_s: float = 120.0,
    isolate: str = "auto",
    shrink_budget_s: float = 60.0,
    database: Any = None,
    static: bool = True,
    progress: LiveProgress | None = None,
    on_finding: Callable[[Finding], Any] | None = None,
    stop: Callable[[], bool] | None = None,
    metamorphic: bool = True,
    aligned: bool = False,
) -> Report:
    """Search ``spec``'s configs and inputs for findings on ``backends`` (None: all).

    Returns a Report with, per backend, its result and the findings of its minimal
    failing examples (one per kind), each with a reproducer under ``out_dir``.
    ``progress`` hears of every example and every finished cell (``reports.live``).

    A KeyboardInterrupt (Ctrl-C, or SIGTERM under ``interrupts.signals_interrupt``)
    stops the search: it is raised again as :class:`~pallas_verify.interrupts.Interrupted`
    whose ``report`` holds every finished cell and every failure seen so far (with its
    reproducer), the other cells marked ``interrupted``.
    ``on_finding``, when given, is called with each finding the moment its first failing
    example shows it, before shrinking (``evidence["provisional"]`` says so), with a
    reproducer of that example: a caller cut short later still has it.
    ``stop``: polled before each example after a search's first; once it returns True no
    example runs (a campaign's budget or cancel), and the failures found so far are reported.
    ``metamorphic``: False skips the reruns of TPU interpret mode with one knob changed
    (a campaign that draws every mode per example and judges each against the reference).
    ``aligned``: every search draws the modes of all the backends (using its own), so all
    searches draw the same choices and run the same configs and inputs until one fails:
    the executing backends are then compared with each other on every example (the
    backend-divergence oracle), not only where their draws happen to coincide.
    """
    if not isinstance(spec, KernelSpec):
        raise InvalidSpec(f"spec={brief(spec)} must be a pallas_verify.KernelSpec.")
    check_positive_int("max_examples", max_examples, optional=True)
    chosen = registry.resolve(backends)
    started = time.perf_counter()
    report = Report(backends=[b.name for b in chosen], seed=seed, profile=profile,
                    jax_gaps=[str(gap) for gap in _jax_compat.version_gaps()])
    report.kernels.append(kernel_entry(spec))
    runnable = _plan(spec, chosen, report)
    options = {"profile": profile, "max_examples": max_examples, "seed": seed, "database": database}
    if progress is not None:
        progress.kernel(spec.name, len(runnable) * (1 + len(spec.transforms)), report.results)
    interrupted: Interrupted | None = None
    every_mode = st.tuples(*(b.modes() for b in runnable)) if aligned else None
    with Runner(spec, timeout_s=timeout_s, isolate=isolate, metamorphic=metamorphic) as runner:
        grid = StaticLedger(runner.tracer.static, runner.tracer.notes, started) if static else None
        searches: list[Search] = []

        def early(finding: Finding, example: dict[str, Any], seconds: float, examples: int) -> None:
            if on_finding is not None:
                on_finding(_finish([(finding, example, seconds, examples)], None, runner, Path(out_dir),
                                   provisional=True)[0])

        try:
            for i, backend in enumerate(runnable):
                modes = every_mode.map(operator.itemgetter(i)) if every_mode is not None else None
                searches = [Search(spec, backend, runner, shrink_budget_s, static=grid, transform=t,
                                   kernel_started=started, progress=progress,
                                   early=early if on_finding is not None else None, stop=stop, modes=modes)
                            for t in (None, *spec.transforms)]
                for cap in (*_ROUNDS, None):  # the searches take turns: see the module docstring
                    for search in (s for s in searches if not s.done):
                        search.found = run_search(search, cap=cap, **options)
                        search.done = (cap is None or bool(search.found) or search.unsupported is not None
                                       or search.internal is not None)
                for search in searches:
                    found = [_with_knobs(spec, f, ex, runner, backend, shrink_budget_s)
                             for f, ex in _unexplained(search, runner.upstream.get(backend.name))]
                    findings = _finish([(f, ex, *search.first_seen.get(f.kind, (0.0, 0))) for f, ex in found],
                                       search.shrink.stopped, runner, Path(out_dir))
                    report.findings.extend(findings)
                    coverage = runner.coverage.get((backend.name, search.transform))
                    params = runner.params_coverage.get((backend.name, search.transform))
                    result = _no_pallas_cell(_result(spec, backend, findings, search), runner.tracer)
                    result = result if coverage is None else dataclasses.replace(result, grid_coverage=coverage.figure())
                    report.results.append(result if params is None else
                                          dataclasses.replace(result, compiler_params=params.figure()))
                    if progress is not None:
                        progress.cell(report.results[-1], len(findings))
                runner.sandbox.release(backend, then=runnable[i + 1] if i + 1 < len(runnable) else None)
        except KeyboardInterrupt as exc:  # keep what finished; the rest is marked interrupted
            interrupted = _stopped(exc, spec, runnable, searches, runner, report, Path(out_dir))
        if grid is not None:  # the kernel's own findings: reported once, before the backends'
            report.findings[:0] = _finish(list(grid.found.values()), None, runner, Path(out_dir))
        notes = [*sorted(runner.references.notes), *runner.reruns.notes(), *runner.divergences.notes(),
                 *_no_pallas_note(runner.tracer)]
        if notes:  # e.g. no float64 ground truth, reruns skipped: said once per spec, not a finding
            report.kernels[-1]["notes"] = notes
        if runner.tracer.notes:  # parts of the static check that did not run, and why
            report.kernels[-1]["static_skipped"] = list(runner.tracer.notes)
        if runner.upstream:  # JAX's failures (attribution): once per backend, with a plain-jax reproducer
            from pallas_verify.reports.upstream import upstream_entries

            report.kernels[-1]["upstream"] = upstream_entries(runner.upstream.values(), spec, runner.spec_ref,
                                                              Path(out_dir))
    report.findings = one_per_reference_failure(report.findings)
    order = {name: i for i, name in enumerate(report.backends)}
    report.results.sort(key=lambda r: (order.get(r.backend, len(order)), r.transform or ""))
    for row in kernel_rows(spec.name, report.findings):  # the static check's, the backends' divergence
        report.results.append(row)
        if progress is not None:
            progress.cell(row, sum(row_of(f) == row.backend for f in report.findings))
    report.seconds = time.perf_counter() - started
    if interrupted is not None:
        report.interrupted = True
        interrupted.report = report
        raise interrupted
    return report


def _finish(found: list[tuple[Finding, dict[str, Any], float, int]], shrink_stopped: str | None, runner: Runner,
            out_dir: Path, *, provisional: bool = False, blame: bool = True) -> list[Finding]:
    """Findings with their (example, seconds and examples to detect), timed, blamed from
    the inputs their example carries (``blame``; a search blames only the findings it
    reports, not every failing example) and with a reproducer; ``provisional``: a first
    failing example, sent before shrinking (not blamed)."""
    from pallas_verify.reports.excerpt import kernel_excerpt
    from pallas_verify.reports.reproducer import write_reproducer

    done = []
    for finding, example, seconds, examples in found:
        if blame and not provisional:
            finding = runner.tracer.blame(finding, example.get("blame", {}).get(finding.kind))
        evidence = {**finding.evidence, "examples_to_detect": examples}
        source = kernel_excerpt(runner.spec.kernel, finding)
        if source is not None:
            evidence["source"] = source
        if provisional:
            evidence["provisional"] = "the first failing example, before shrinking"
        if shrink_stopped:
            evidence["shrink_stopped"] = shrink_stopped
        finding = dataclasses.replace(finding, elapsed_s=seconds, evidence=evidence)
        done.append(write_reproducer(finding, example, runner.spec_ref, out_dir))
    return done


def _no_pallas_cell(result: BackendResult, tracer: Any) -> BackendResult:
    """No Pallas, no PASS: a passing cell of a spec none of whose examples the static check
    traced ran a Pallas kernel is skipped, saying so (nothing Pallas was tested)."""
    if result.status != "pass" or not tracer.kernelless or len(tracer.kernelless) < len(tracer.checked):
        return result
    configs = list(tracer.kernelless.values())
    return dataclasses.replace(result, status="skipped", reason=(
        f"no Pallas kernel ran: none of the {len(configs)} configs traced ran a pallas_call, pl.kernel or "
        f"core_map (e.g. {configs[0]}), so nothing here tested Pallas code. Draw the inputs or configs that take "
        "the function's Pallas path"))


def _no_pallas_note(tracer: Any) -> list[str]:
    """The note counting the configs that ran no Pallas kernel, when others did."""
    configs = list(tracer.kernelless.values())
    if not configs or len(configs) == len(tracer.checked):
        return []
    return [f"{len(configs)} of {len(tracer.checked)} configs traced ran no Pallas kernel (e.g. {configs[0]}): "
            "their examples tested the function's non-Pallas path only"]


def _with_knobs(spec: KernelSpec, finding: Finding, example: dict[str, Any], runner: Runner, backend: Backend,
                budget_s: float) -> tuple[Finding, dict[str, Any]]:
    """``finding`` saying which knobs of its minimal config it needs (``causes``): each
    tried at its simplest value on the finding's backend and mode (bare kernels only);
    where every knob it does not need, at its simplest at once, fails the same way, the
    finding and its example on that simpler config."""
    if finding.transform is not None or finding.backend != backend.name or not example.get("config"):
        return finding, example
    knobs = knobs_needed(spec, finding, example["config"], example["inputs"],
                         lambda c, i: runner.judge(c, i, backend, example["mode"]).findings, budget_s)
    line = knobs.line()
    if not line:
        return finding, example
    if knobs.simpler is not None:
        again, config = knobs.simpler  # the finding as that config shows it (blamed on its own run, not this one)
        finding, example = dataclasses.replace(again, config=config), {**example, "config": config, "blame": {}}
    evidence = {"needed": list(knobs.needed), "not_needed": dict(knobs.not_needed), "untried": dict(knobs.untried)}
    return (dataclasses.replace(finding, message=f"{finding.message}\n{line}",
                                evidence={**finding.evidence, "knobs": evidence}), example)


def _unexplained(search: Search, limitation: Any) -> list[tuple[Finding, dict[str, Any]]]:
    """A search's findings, but, when it ended n/a for an upstream limitation, those that
    are the same JAX failure met before a witness ran an example clean (one verdict)."""
    if not search.unsupported or limitation is None:
        return search.found
    return [(f, example) for f, example in search.found if not limitation.explains(f)]


def _plan(spec: KernelSpec, chosen: list[Backend], report: Report) -> list[Backend]:
    """Backends that will run; the rest get a skipped/unsupported result with the reason."""
    runnable = []
    for backend in chosen:
        skip = registry.skip_reason(spec, backend)
        if skip is None:
            runnable.append(backend)
        else:
            report.results.extend(unrun_results(spec, backend.name, skip.status, skip.reason))
    return runnable


def _result(spec: KernelSpec, backend: Backend, findings: list[Finding], search: Search) -> BackendResult:
    cell = {"kernel": spec.name, "backend": backend.name, "transform": search.transform,
            "examples": search.examples, "shrink_steps": search.shrink_steps, "seconds": search.seconds}
    if search.unsupported:
        return BackendResult(**cell, status="unsupported", reason=search.unsupported)
    if search.internal:
        return BackendResult(**cell, status="error", reason=search.internal)
    own = [f for f in findings if row_of(f) == backend.name]  # a divergence fails its own row
    if own:
        return BackendResult(**cell, status="fail", reason=join_reasons(f.kind for f in own),
                             note=search.uniform.stopped or "")
    reason = "" if backend.executes else "compiled only (no device attached)"
    return BackendResult(**cell, status="pass", reason=reason)


def _stopped(exc: KeyboardInterrupt, spec: KernelSpec, runnable: list[Backend], searches: list[Search],
             runner: Runner, report: Report, out_dir: Path) -> Interrupted:
    """Fold an interrupted verify into ``report``: the searches under way keep the failures
    they saw (the smallest so far of each kind, with a reproducer; not blamed, as that
    would trace the kernel again) and are ``fail``, or ``interrupted`` when they saw none;
    the backends not reached are ``interrupted``."""
    signame = signal_name(exc)
    done = {(r.backend, r.transform) for r in report.results}
    for search in (s for s in searches if (s.backend.name, s.transform) not in done):
        found = search.found or merge(list(reversed(search.seen.values())))  # the latest: the smallest yet
        stopped = search.shrink.stopped if search.done else f"interrupted by {signame}; the example may not be minimal"
        findings = _finish([(f, ex, *search.first_seen.get(f.kind, (0.0, 0))) for f, ex in found],
                           stopped, runner, out_dir, blame=False)
        report.findings.extend(findings)
        report.results.append(unfinished(_result(spec, search.backend, findings, search), signame))
    started = {s.backend.name for s in searches}
    report.results.extend(not_started(spec, [b.name for b in runnable if b.name not in started], signame))
    return Interrupted(signame)
