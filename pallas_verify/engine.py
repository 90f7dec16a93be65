"""The Hypothesis loop: draw a config, inputs and a mode; run; check; shrink; report.

``verify`` runs, per backend (cheapest first), one search of the bare kernel and one per
transform in ``spec.transforms``:

1. Each example checks every ``pallas_call``'s grid without running anything (races
   across "parallel" axes, unwritten output blocks, revisits): the static check, traced
   once per config and input shapes and shared by every search (where a core is spare,
   in a worker of its own while step 2 runs: ``isolation.static_tracer_slot``). Its
   findings are the kernel's, reported once with backend "static" (one per kind, on the
   smallest example that showed it), and they fail every cell.
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

import hypothesis
import numpy as np
from hypothesis import strategies as st

from pallas_verify import transforms
from pallas_verify.backends import registry
from pallas_verify.backends.base import Backend
from pallas_verify.backends.execute import config_key
from pallas_verify.errors import InvalidArgument, InvalidSpec, brief
from pallas_verify.findings import Finding, one_per_reference_failure
from pallas_verify.interrupts import Interrupted, not_started, signal_name, unfinished
from pallas_verify.oracles.static import StaticLedger
from pallas_verify.profiles import profile_settings
from pallas_verify.reports.report import (
    BackendResult,
    Report,
    divergence_cells,
    join_reasons,
    kernel_entry,
    unrun_results,
)
from pallas_verify.runner import Runner, Unsupported, example_key
from pallas_verify.signatures import SameSignature
from pallas_verify.spec import KernelSpec

if TYPE_CHECKING:
    from pallas_verify.reports.live import LiveProgress

__all__ = ["verify"]


class _Found(Exception):
    """Raised inside a search when an example shows findings (Hypothesis shrinks it)."""

    def __init__(self, findings: list[Finding], example: dict[str, Any]) -> None:
        super().__init__(findings[0].message)
        self.findings, self.example = findings, example


_ORIGINS: dict[str, type[_Found]] = {}


def _found_type(kind: str) -> type[_Found]:
    """One exception type per finding kind: Hypothesis shrinks each kind separately."""
    if kind not in _ORIGINS:
        _ORIGINS[kind] = type(f"Found_{kind}", (_Found,), {})
    return _ORIGINS[kind]


class _Stopped(BaseException):
    """Raised inside a search to end it at once when its budget is spent (the caller's
    ``stop``, or the shrink budget): Hypothesis lets a BaseException through without
    shrinking it, where returning early would still pay a draw for every remaining
    shrink step. The search reports the last failure of each kind it saw."""


class _BadSpec(Exception):
    """A spec's strategies misbehaved: the spec is invalid, not the kernel."""


@dataclasses.dataclass
class _Search:
    """State of one search: one backend (and transform) for one spec, across its rounds."""

    spec: KernelSpec
    backend: Backend
    runner: Runner
    shrink_budget_s: float
    static: StaticLedger | None = None
    examples: int = 0
    kernel_started: float = dataclasses.field(default_factory=time.perf_counter)
    first_seen: dict[str, tuple[float, int]] = dataclasses.field(default_factory=dict)
    first_failure: float | None = None
    seen: dict[str, _Found] = dataclasses.field(default_factory=dict)
    passed: set[str] = dataclasses.field(default_factory=set)  # examples run in an earlier round
    seconds: float = 0.0
    done: bool = False
    found: list[tuple[Finding, dict[str, Any]]] = dataclasses.field(default_factory=list)
    unsupported: str | None = None
    transform: str | None = None
    max_examples: int = 0
    shrink_steps: int = 0
    shrink: _ShrinkProgress = dataclasses.field(default_factory=lambda: _ShrinkProgress())
    progress: LiveProgress | None = None
    uniform: SameSignature = dataclasses.field(default_factory=lambda: SameSignature(kinds=_INPUT_BLIND))
    early: Callable[[Finding, dict[str, Any], float, int], None] | None = None  # each kind's first failure
    stop: Callable[[], bool] | None = None
    modes: st.SearchStrategy[Any] | None = None  # the mode draw (default: the backend's own modes())
    last_found: dict[str, _Found] = dataclasses.field(default_factory=dict)  # per kind, the latest failure

    def example(self, data: st.DataObject) -> None:
        config = _draw(data, self.spec.configs, "configs", dict)
        base = inputs = tuple(np.asarray(x) for x in _draw(data, self.spec.inputs(config), "inputs", tuple))
        if self.transform is not None:
            inputs = self._extend(data, config, inputs)
        mode = data.draw(self.modes if self.modes is not None else self.backend.modes(), label="mode")
        key = example_key(config, inputs) + repr(mode)
        if key in self.seen:  # Hypothesis replays the minimal example: no need to rerun it
            raise self.seen[key]
        if self._shrink_over_budget() or (self.examples and self.stop is not None and self.stop()):
            raise _Stopped  # nothing left to run: end Hypothesis's run instead of drawing again and again
        if key in self.passed or self.unsupported or self.shrink.stopped:
            return  # stop shrinking (or searching): every new candidate is uninteresting
        generating = self._generating()
        if generating and self.examples >= self.max_examples:
            return  # the budget is spent (a later round replays and extends an earlier one)
        if generating:
            self.examples += 1
        else:
            self.shrink_steps += 1
        static = self.static.start(config, base, self.examples) if self.static is not None else None
        static_kinds = set(self.static.found) if self.static is not None else set()
        try:
            findings = self.runner.check(config, inputs, self.backend, mode, transform=self.transform, blame=False)
        except Unsupported as exc:
            self.unsupported = str(exc)
        now = time.perf_counter() - self.kernel_started
        if static is not None:  # traced meanwhile where it has a worker of its own
            static()
            if self.early is not None and self.static is not None:
                for kind in set(self.static.found) - static_kinds:
                    self.early(*self.static.found[kind])
        if self.unsupported:
            return
        if not generating:
            self.shrink.step(config, findings)
        if self.uniform.step(findings) and not self.shrink.stopped:  # every example failed one way: stop
            self.shrink.stopped = self.uniform.stopped
        if not findings:
            self.passed.add(key)
        if findings:
            self.first_failure = self.first_failure or time.perf_counter()
            example = {"config": config, "inputs": inputs, "mode": mode}
            for f in findings:
                if f.kind not in self.first_seen:
                    self.first_seen[f.kind] = (now, self.examples)
                    if self.early is not None:
                        self.early(f, example, now, self.examples)
            found = _found_type(findings[0].kind)(findings, example)
            self.seen[key] = self.last_found[findings[0].kind] = found
            if all(f.evidence.get("shrink_stopped") for f in findings):  # e.g. a shape mismatch: nothing to shrink
                self.shrink.stopped = str(findings[0].evidence["shrink_stopped"])
            raise found

    def _extend(self, data: st.DataObject, config: dict[str, Any], inputs: tuple[np.ndarray, ...]) -> Any:
        def more() -> tuple[np.ndarray, ...]:
            return tuple(np.asarray(x) for x in _draw(data, self.spec.inputs(config), "inputs", tuple))

        assert self.transform is not None
        try:
            return transforms.extend(self.transform, data, spec=self.spec, config=config, inputs=inputs, more=more)
        except InvalidSpec as exc:
            raise _BadSpec(str(exc)) from None

    def _generating(self) -> bool:
        """Whether Hypothesis is still generating examples rather than shrinking a failure.

        It generates until ``max_examples`` examples have run, and stops generating
        ``_GENERATE_AFTER_FAILURE_S`` after the first failure; every later call is a shrink step.
        """
        if self.first_failure is None:
            return True
        recent = time.perf_counter() - self.first_failure <= _GENERATE_AFTER_FAILURE_S
        return recent and self.examples < self.max_examples

    def _shrink_over_budget(self) -> bool:
        return self.first_failure is not None and time.perf_counter() - self.first_failure > self.shrink_budget_s


# Hypothesis keeps generating for up to 10 s after its first failure (should_generate_more).
_GENERATE_AFTER_FAILURE_S = 10.0
# Shrinking stops after this many steps that failed exactly as the last failure did (same
# config, same kind and message, for kinds whose evidence does not depend on the input
# values): simpler input values would not make such a finding more useful.
_SAME_FAILURE_PATIENCE = 8
# ... and after this many steps without a new failing candidate.
_STALL_PATIENCE = 100
# Example caps of the rounds before each search's last one (which runs to its budget).
_ROUNDS = (1,)
_INPUT_BLIND = frozenset({"exception", "compile_error", "crash", "timeout"})


@dataclasses.dataclass
class _ShrinkProgress:
    """Whether shrinking still makes a finding more useful; ``stopped`` once it cannot.

    The reported example stays the smallest one that actually failed: after ``stopped``
    every new candidate passes without running, and Hypothesis reports the last failure.
    """

    last: tuple[str, str, str] | None = None
    same: int = 0
    stale: int = 0
    stopped: str | None = None

    def step(self, config: dict[str, Any], findings: list[Finding]) -> None:
        if not findings:
            self.stale += 1
        else:
            first = findings[0]
            outcome = (config_key(config), first.kind, first.message)
            same = first.kind in _INPUT_BLIND and outcome == self.last
            self.same = self.same + 1 if same else 0
            self.stale = self.stale + 1 if same else 0
            self.last = outcome
        if self.same >= _SAME_FAILURE_PATIENCE:
            self.stopped = f"{self.same} shrink steps failed the same way at the same config"
        elif self.stale >= _STALL_PATIENCE:
            self.stopped = f"{self.stale} shrink steps without a smaller failing example"


def _draw(data: st.DataObject, strategy: Any, field: str, kind: type) -> Any:
    if not isinstance(strategy, st.SearchStrategy):
        raise _BadSpec(f"KernelSpec.{field} must give a Hypothesis SearchStrategy; got {brief(strategy)}.")
    value = data.draw(strategy, label=field)
    if not isinstance(value, kind):
        raise _BadSpec(f"KernelSpec.{field} must draw a {kind.__name__}; it drew {brief(value)}.")
    return value


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
    if max_examples is not None and (isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1):
        raise InvalidArgument(f"max_examples={max_examples!r} must be a positive integer.")
    chosen = registry.resolve(backends)
    started = time.perf_counter()
    report = Report(backends=[b.name for b in chosen], seed=seed, profile=profile)
    report.kernels.append(kernel_entry(spec))
    runnable = _plan(spec, chosen, report)
    options = {"profile": profile, "max_examples": max_examples, "seed": seed, "database": database}
    if progress is not None:
        progress.kernel(spec.name, len(runnable) * (1 + len(spec.transforms)), report.results)
    interrupted: Interrupted | None = None
    every_mode = st.tuples(*(b.modes() for b in runnable)) if aligned else None
    with Runner(spec, timeout_s=timeout_s, isolate=isolate, metamorphic=metamorphic) as runner:
        grid = StaticLedger(runner.start_static, runner.static_notes, started) if static else None
        searches: list[_Search] = []

        def early(finding: Finding, example: dict[str, Any], seconds: float, examples: int) -> None:
            if on_finding is not None:
                on_finding(_finish([(finding, example, seconds, examples)], None, runner, Path(out_dir),
                                   provisional=True)[0])

        try:
            for i, backend in enumerate(runnable):
                modes = every_mode.map(operator.itemgetter(i)) if every_mode is not None else None
                searches = [_Search(spec, backend, runner, shrink_budget_s, static=grid, transform=t,
                                    kernel_started=started, progress=progress,
                                    early=early if on_finding is not None else None, stop=stop, modes=modes)
                            for t in (None, *spec.transforms)]
                for cap in (*_ROUNDS, None):  # the searches take turns: see the module docstring
                    for search in (s for s in searches if not s.done):
                        search.found = _run_search(search, cap=cap, **options)
                        search.done = cap is None or bool(search.found) or search.unsupported is not None
                for search in searches:
                    findings = _finish([(f, ex, *search.first_seen.get(f.kind, (0.0, 0))) for f, ex in search.found],
                                       search.shrink.stopped, runner, Path(out_dir))
                    report.findings.extend(findings)
                    coverage = runner.coverage.get((backend.name, search.transform))
                    params = runner.params_coverage.get((backend.name, search.transform))
                    result = _result(spec, backend, findings, search)
                    result = result if coverage is None else dataclasses.replace(result, grid_coverage=coverage.figure())
                    report.results.append(result if params is None else
                                          dataclasses.replace(result, compiler_params=params.figure()))
                    if progress is not None:
                        progress.cell(report.results[-1], len(findings))
                runner.forget_blame()  # the failing examples the searches did not report
                runner.release(backend.name)
        except KeyboardInterrupt as exc:  # keep what finished; the rest is marked interrupted
            interrupted = _stopped(exc, spec, runnable, searches, runner, report, Path(out_dir))
        if grid is not None:  # the kernel's own findings: reported once, before the backends'
            report.findings[:0] = _finish(list(grid.found.values()), None, runner, Path(out_dir))
        notes = [*sorted(runner.notes), *runner.reruns.notes()]
        if notes:  # e.g. no float64 ground truth, reruns skipped: said once per spec, not a finding
            report.kernels[-1]["notes"] = notes
        if runner.static_notes:  # parts of the static check that did not run, and why
            report.kernels[-1]["static_skipped"] = list(runner.static_notes)
        if runner.upstream:  # JAX's failures (attribution): once per backend, with a plain-jax reproducer
            from pallas_verify.reports.upstream import upstream_entries

            report.kernels[-1]["upstream"] = upstream_entries(runner.upstream.values(), spec, runner.spec_ref,
                                                              Path(out_dir))
    report.results = divergence_cells(report.results, report.findings)
    report.findings = one_per_reference_failure(report.findings)
    order = {name: i for i, name in enumerate(report.backends)}
    report.results.sort(key=lambda r: (order.get(r.backend, len(order)), r.transform or ""))
    static_kinds = sorted({f.kind for f in report.findings if f.backend == "static"})
    if static_kinds:
        report.results = [_with_static(r, static_kinds) for r in report.results]
    report.seconds = time.perf_counter() - started
    if interrupted is not None:
        report.interrupted = True
        interrupted.report = report
        raise interrupted
    return report


def _finish(found: list[tuple[Finding, dict[str, Any], float, int]], shrink_stopped: str | None, runner: Runner,
            out_dir: Path, *, provisional: bool = False) -> list[Finding]:
    """Findings with their (example, seconds and examples to detect), timed and with a
    reproducer; ``provisional``: a first failing example, sent before shrinking (not blamed)."""
    from pallas_verify.reports.reproduce import write_reproducer

    done = []
    for finding, example, seconds, examples in found:
        if not provisional:
            finding = runner.blamed(finding)  # blame only what is reported, not every failing example
        evidence = {**finding.evidence, "examples_to_detect": examples}
        if provisional:
            evidence["provisional"] = "the first failing example, before shrinking"
        if shrink_stopped:
            evidence["shrink_stopped"] = shrink_stopped
        finding = dataclasses.replace(finding, elapsed_s=seconds, evidence=evidence)
        done.append(write_reproducer(finding, example, runner.spec_ref, out_dir))
    return done


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


def _run_search(
    search: _Search, *, cap: int | None, profile: str, max_examples: int | None, seed: int | None, database: Any
) -> list[tuple[Finding, dict[str, Any]]]:
    """One round of ``search``: up to ``cap`` examples (None: its whole budget)."""
    started = time.perf_counter()
    try:
        return _run_round(search, cap=cap, profile=profile, max_examples=max_examples, seed=seed, database=database)
    finally:
        search.seconds += time.perf_counter() - started


def _run_round(
    search: _Search, *, cap: int | None, profile: str, max_examples: int | None, seed: int | None, database: Any
) -> list[tuple[Finding, dict[str, Any]]]:
    overrides: dict[str, Any] = {"database": database} if database is not None else {}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    if seed is not None:
        overrides["derandomize"] = False

    settings = hypothesis.settings(profile_settings(profile), **overrides)
    search.max_examples = settings.max_examples
    if cap is not None and cap < settings.max_examples:
        settings = hypothesis.settings(settings, max_examples=cap)

    @settings
    @hypothesis.given(st.data())
    def run(data: st.DataObject) -> None:
        try:
            search.example(data)
        finally:
            _tick(search)

    where = search.backend.name + (f"+{search.transform}" if search.transform else "")
    # The example database's key is the digest of the inner test function (the same source
    # for every search): this makes it one key per spec and backend, so a search never
    # replays, nor deletes as no longer failing, another kernel's saved failure.
    run.hypothesis.inner_test._hypothesis_internal_add_digest = f"{search.spec.name}|{where}".encode()  # type: ignore[attr-defined]
    if seed is not None:
        run = hypothesis.seed(seed)(run)
        if database is not None:  # @seed turns the database off; a campaign's slices need both
            run._hypothesis_internal_use_settings = hypothesis.settings(  # type: ignore[attr-defined]
                run._hypothesis_internal_use_settings, database=database)  # type: ignore[attr-defined]
    try:
        run()
    except _Stopped:
        return _merge(list(search.last_found.values()))
    except _BadSpec as exc:
        prefix = f"KernelSpec {search.spec.name!r}: "
        raise InvalidSpec(str(exc) if str(exc).startswith(prefix) else prefix + str(exc)) from None
    except _Found as exc:
        return _merge([exc])
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        others = [e for e in leaves if not isinstance(e, _Found)]
        if others:
            raise others[0] from group
        return _merge([e for e in leaves if isinstance(e, _Found)])
    return []


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def _merge(found: list[_Found]) -> list[tuple[Finding, dict[str, Any]]]:
    """One finding per kind, each with the minimal example that showed it."""
    seen: dict[str, tuple[Finding, dict[str, Any]]] = {}
    for exc in found:
        for f in exc.findings:
            seen.setdefault(f.kind, (f, exc.example))
    return list(seen.values())


def _result(spec: KernelSpec, backend: Backend, findings: list[Finding], search: _Search) -> BackendResult:
    cell = {"kernel": spec.name, "backend": backend.name, "transform": search.transform,
            "examples": search.examples, "shrink_steps": search.shrink_steps, "seconds": search.seconds}
    if search.unsupported:
        return BackendResult(**cell, status="unsupported", reason=search.unsupported)
    if findings:
        return BackendResult(**cell, status="fail", reason=join_reasons(f.kind for f in findings),
                             note=search.uniform.stopped or "")
    reason = "" if backend.executes else "compiled only (no device attached)"
    return BackendResult(**cell, status="pass", reason=reason)


def _with_static(result: BackendResult, kinds: list[str]) -> BackendResult:
    """A static grid finding is a bug on every backend: their cells fail too."""
    if result.status not in ("pass", "fail"):
        return result
    return result.failing(f"static {k}" for k in kinds)


def _tick(search: _Search) -> None:
    """Tell the search's progress (if any) that an example or shrink step ran."""
    if search.progress is not None:
        where = search.backend.name + (f"+{search.transform}" if search.transform else "")
        failing = sorted({f.kind for found in search.seen.values() for f in found.findings})
        search.progress.tick(where, examples=search.examples, max_examples=search.max_examples,
                             shrink_steps=search.shrink_steps, failing=failing)


def _stopped(exc: KeyboardInterrupt, spec: KernelSpec, runnable: list[Backend], searches: list[_Search],
             runner: Runner, report: Report, out_dir: Path) -> Interrupted:
    """Fold an interrupted verify into ``report``: the searches under way keep the failures
    they saw (the smallest so far of each kind, with a reproducer; not blamed, as that
    would trace the kernel again) and are ``fail``, or ``interrupted`` when they saw none;
    the backends not reached are ``interrupted``."""
    signame = signal_name(exc)
    runner.forget_blame()
    done = {(r.backend, r.transform) for r in report.results}
    for search in (s for s in searches if (s.backend.name, s.transform) not in done):
        found = search.found or _merge(list(reversed(search.seen.values())))  # the latest: the smallest yet
        stopped = search.shrink.stopped if search.done else f"interrupted by {signame}; the example may not be minimal"
        findings = _finish([(f, ex, *search.first_seen.get(f.kind, (0.0, 0))) for f, ex in found],
                           stopped, runner, out_dir)
        report.findings.extend(findings)
        report.results.append(unfinished(_result(spec, search.backend, findings, search), signame))
    started = {s.backend.name for s in searches}
    report.results.extend(not_started(spec, [b.name for b in runnable if b.name not in started], signame))
    return Interrupted(signame)
