"""One example, end to end: static grid check, reference once, every backend, oracles."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pallas_verify import _jax_compat, attribution, choices, reference, transforms
from pallas_verify.backends.base import Backend
from pallas_verify.backends.execute import config_key
from pallas_verify.backends.mosaic_params import ParamsCoverage
from pallas_verify.backends.schedule import Coverage, cores_named
from pallas_verify.case import UNSUPPORTED, Case, Outcome
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution.caselimit import CaseLimit
from pallas_verify.execution.isolation import Pending, Worker, shared_worker, static_tracer_slot
from pallas_verify.findings import Finding
from pallas_verify.loader import spec_ref
from pallas_verify.oracles.approx import approx_math_case
from pallas_verify.oracles.base import bitwise_equal
from pallas_verify.oracles.differential import compare_outputs, outcome_findings
from pallas_verify.oracles.divergence import divergence_findings
from pallas_verify.oracles.metamorphic import metamorphic_finding
from pallas_verify.oracles.shape_invariance import ShapeRerun
from pallas_verify.reference import Truth, reference_outputs
from pallas_verify.spec import KernelSpec

__all__ = ["ISOLATE", "UNSUPPORTED", "Runner", "Unsupported", "example_key", "reference_outputs"]

ISOLATE: tuple[str, ...] = tuple(choices.ISOLATE)


#: Examples per (backend, transform) cell compiled under drawn compiler-param overrides.
OVERRIDES_PER_CELL = 3


class Unsupported(Exception):
    """The backend cannot run this kernel at all; the message says why."""


def example_key(config: Mapping[str, Any], inputs: Sequence[np.ndarray]) -> str:
    """A key for one example: the config and a digest of the input bytes."""
    digest = hashlib.sha1()
    for x in inputs:
        digest.update(f"{x.shape}{x.dtype}".encode())
        digest.update(np.ascontiguousarray(x).tobytes())
    return config_key(config) + digest.hexdigest()


@dataclasses.dataclass
class Runner:
    """Runs examples of one spec, on any backend, sharing the reference between them.

    ``isolate``: "auto" runs in a worker process whenever the spec can be loaded by
    reference (so a hang is a ``timeout`` and an abort a ``crash``, and the run goes
    on) and in-process otherwise; "always" requires a worker; "never" stays in-process
    except for backends that must isolate (compilers that may abort).
    """

    spec: KernelSpec
    timeout_s: float = 120.0
    isolate: str = "auto"
    cache_size: int = 256
    metamorphic: bool = True  # False: no reruns with one interpreter knob changed, no shape_invariance rerun

    def __post_init__(self) -> None:
        if self.isolate not in ISOLATE:
            raise InvalidArgument(f"isolate={self.isolate!r} must be one of {ISOLATE}.")
        self.spec_ref = spec_ref(self.spec)
        if self.isolate == "always" and self.spec_ref is None:
            raise InvalidArgument(
                f"isolate='always' needs KernelSpec {self.spec.name!r} at module level (FILE.py::NAME or "
                "MODULE:NAME) so a worker process can load it; define it at module level or use isolate='auto'."
            )
        self._static: dict[str, list[Finding]] = {}
        self.static_notes: list[str] = []  # "static check skipped for <call>: <reason>", each once
        self._expected: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._outputs: dict[str, dict[str, tuple[Outcome, Mapping[str, Any]]]] = {}  # example -> backend -> (outcome, mode)
        self.reference_runs = 0  # examples whose reference was computed (not served from the cache)
        self.notes: set[str] = set()
        self._workers: dict[str, Worker] = {}
        self._blame_now = True
        self._unblamed: dict[int, tuple[Any, ...]] = {}
        self.limit = CaseLimit(ceiling=self.timeout_s)
        self.reruns = RerunTally()
        self.upstream: dict[str, attribution.Upstream] = {}  # backend -> its first upstream limitation
        self._witnessed: dict[str, bool] = {}  # example + transform + backend -> judged clean there
        self.coverage: dict[tuple[str, str | None], Coverage] = {}  # (backend, transform) -> schedules run
        self.params_coverage: dict[tuple[str, str | None], ParamsCoverage] = {}  # ... -> compiler params drawn
        self._overridden: dict[tuple[str, str | None], int] = {}  # (backend, transform) -> examples with overrides
        self.shapes = ShapeRerun(notes=self.notes)  # the shape_invariance reruns (oracles/shape_invariance.py)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        for name in list(self._workers):
            self.release(name)

    def release(self, backend: str) -> None:
        """Stop the worker process of an isolating ``backend`` (one per backend: compilers
        such as Mosaic GPU fix their target once per process); the shared interpreter
        worker lives on."""
        worker = self._workers.pop(backend, None)
        if worker is not None:
            worker.close()

    def _in_worker(self, backend: Backend) -> bool:
        if backend.isolate or self.isolate == "always":
            return True
        return self.isolate == "auto" and self.spec_ref is not None

    def run(self, case: Case) -> Outcome:
        """Run one case on its backend, in a worker process when isolation applies."""
        return self.collect(self.submit(case))

    def submit(self, case: Case, slot: str = "interpreters") -> _Running:
        """Start ``case`` in its worker process and return at once (when isolation applies;
        otherwise it runs in ``collect``): the caller works meanwhile, then collects.
        Interpreters run in the shared worker of ``slot``."""
        from pallas_verify.backends import registry

        backend = registry.get(case.backend)
        if not self._in_worker(backend):
            return _Running(case, backend)
        if self.spec_ref is None:
            return _Running(case, backend, outcome=Outcome(error=_no_ref_error(self.spec, backend)))
        if backend.isolate:  # compilers: a process per backend (Mosaic GPU fixes its target per process)
            worker = self._workers.setdefault(case.backend, Worker(timeout_s=self.timeout_s))
        else:  # interpreters: one long-lived process for every spec and backend
            worker = shared_worker(slot)
        return _Running(case, backend, worker, worker.submit_case(self.spec_ref, case))

    def _overrides_capped(self, backend: str, transform: str | None, mode: Mapping[str, Any]) -> Mapping[str, Any]:
        """``mode`` without its drawn compiler-param overrides once ``OVERRIDES_PER_CELL``
        examples of the cell compiled under some (each costs a second compile)."""
        if not mode.get("compiler_params"):
            return mode
        cell = (backend, transform)
        self._overridden[cell] = self._overridden.get(cell, 0) + 1
        if self._overridden[cell] <= OVERRIDES_PER_CELL:
            return mode
        self.notes.add(f"compiler_params: overrides compiled on the first {OVERRIDES_PER_CELL} examples per "
                       "mosaic_tpu cell (each costs a second compile)")
        return {**mode, "compiler_params": {}}

    def collect(self, running: _Running) -> Outcome:
        """The Outcome of a submitted case (its schedule counted in ``coverage``, what its
        compiler-param overrides did in ``params_coverage``)."""
        outcome = self._collect(running)
        key = (running.case.backend, running.case.transform)
        if outcome.schedule:
            self.coverage.setdefault(key, Coverage()).add(outcome.schedule)
        if outcome.compiler_params:
            self.params_coverage.setdefault(key, ParamsCoverage()).add(outcome.compiler_params)
        return outcome

    def _collect(self, running: _Running) -> Outcome:
        if running.outcome is not None:
            return running.outcome
        if running.worker is None or running.pending is None:
            return running.backend.run(running.case)
        outcome = running.worker.collect(running.pending, timeout_s=self.timeout_s,
                                         idle_after_s=self.limit.idle_after())
        if outcome.timed_out:
            return dataclasses.replace(outcome, diagnostics=f"{outcome.diagnostics} ({self.limit.describe()})")
        self.limit.record(outcome.seconds, finished=outcome.crashed is None)
        return outcome

    def expected(self, config: Mapping[str, Any], inputs: Sequence[np.ndarray], key: str,
                 transform: str | None = None) -> Any:
        """The reference's (outputs, paths, truth) for one example (under ``transform``),
        computed once. ``truth`` is the float64 ground truth, or None under an explicit
        tolerance (which needs none); why a ground truth is missing goes to ``notes``."""
        if key not in self._expected:
            self.reference_runs += 1
            outputs, paths = (reference_outputs(self.spec, config, inputs) if transform is None
                              else transforms.expected_outputs(self.spec, config, tuple(inputs), transform))
            truth = None
            if self.spec.tolerance is None:
                truth = (reference.spec_truth(self.spec, config, inputs) if transform is None
                         else transforms.ground_truth(self.spec, config, tuple(inputs), transform))
                if truth.reason:
                    under = f" under {transform}" if transform else ""
                    self.notes.add(f"no float64 ground truth{under}: {truth.reason}; outputs judged by a bound "
                                   f"growing with the reduction depth ({truth.depth})")
            self._expected[key] = (outputs, paths, truth)
            if len(self._expected) > self.cache_size:
                old, _ = self._expected.popitem(last=False)
                self._outputs.pop(old, None)
        self._expected.move_to_end(key)
        return self._expected[key]

    def check(
        self,
        config: Mapping[str, Any],
        inputs: tuple[np.ndarray, ...],
        backend: Backend,
        mode: Mapping[str, Any],
        transform: str | None = None,
        *,
        blame: bool = True,
        witness: bool = False,
    ) -> list[Finding]:
        """Every finding of one example on one backend.

        ``blame=False`` leaves the blame of the bad elements (a trace of the kernel) for
        ``blamed``: a search blames only the findings it reports, not every failing example.
        An error that is JAX's (``attribution``) raises Unsupported with the reason.
        ``witness=True`` runs the example as a witness for another backend's upstream
        limitation: no attribution of its own, and no metamorphic reruns (this backend's
        own search runs them on every example it draws).
        """
        self._blame_now = blame
        mode = self._overrides_capped(backend.name, transform, mode)
        key = example_key(config, inputs) + (f"+{transform}" if transform else "")
        case = Case(spec=self.spec, config=config, inputs=inputs, backend=backend.name, mode=mode, transform=transform)
        running = self.submit(case)  # the worker runs the kernel while the reference is computed here
        ahead = None if witness or not self.metamorphic else self._rerun_ahead(backend, case)  # and, on a spare core, its rerun
        try:
            return self._judge(key, case, backend, running, ahead, witness=witness)
        finally:
            if ahead is not None and ahead.pending is not None and ahead.outcome is None:
                self.collect(ahead)  # the worker answers every request: take its answer off the pipe

    def _judge(self, key: str, case: Case, backend: Backend, running: _Running, ahead: _Running | None, *,
               witness: bool) -> list[Finding]:
        config, inputs, transform = case.config, case.inputs, case.transform
        try:
            expected, paths, truth = self.expected(config, inputs, key, transform)
        except Exception as exc:
            if running.pending is not None:  # the worker answers every request: take its answer off the pipe
                self.collect(running)
            return [self._reference_failure(config, exc, transform)]
        outcome = self.collect(running)
        if outcome.error is not None and outcome.error.type == UNSUPPORTED:
            raise Unsupported(outcome.error.message)
        limitation = _jax_compat.upstream_limitation(outcome.error, backend=case.backend, transform=transform)
        if limitation:
            raise Unsupported(limitation)
        upstream = attribution.attribute(case, outcome, clean=self._judged_clean, seen=self.upstream) if (
            not witness and outcome.error is not None) else None
        if upstream:
            raise Unsupported(upstream)
        judged = approx_math_case(transforms.judged(case, expected), backend)  # what approx_math permits
        found = outcome_findings(judged, outcome, expected if backend.executes else None, paths, truth,
                                         executes=backend.executes)
        if found or not outcome.ok:
            return [self._blamed(f, judged, outcome, expected, truth) for f in found]
        reruns = self.metamorphic and not witness
        found = self._metamorphic(backend, case, outcome, paths, ahead) if reruns else []
        if not found and reruns and getattr(backend, "reruns_shapes", False):
            found = self.shapes.findings(case, outcome, expected, paths, self.run)
        if not found and backend.executes and transform is None:
            found = self._divergence(key, case, outcome, paths, expected, truth)
        if not found and backend.executes and transform is not None:
            found = transforms.per_example_findings(case, outcome, self.run, paths, truth)
        return found

    def _judged_clean(self, case: Case) -> bool:
        """Whether ``case`` runs on its backend with no finding (it witnesses an upstream
        limitation on another backend); asked once per example, transform and backend."""
        from pallas_verify.backends import registry

        key = f"{example_key(case.config, case.inputs)}+{case.transform}@{case.backend}"
        if key not in self._witnessed:
            blame_now = self._blame_now
            try:
                self._witnessed[key] = not self.check(case.config, case.inputs, registry.get(case.backend), case.mode,
                                                      case.transform, blame=False, witness=True)
            except Unsupported:
                self._witnessed[key] = False
            finally:
                self._blame_now = blame_now
        return self._witnessed[key]

    def _blamed(self, finding: Finding, judged: Case, outcome: Outcome, expected: Sequence[np.ndarray],
                truth: Truth | None) -> Finding:
        if finding.kind != "mismatch" or outcome.outputs is None or len(outcome.outputs) != len(expected):
            return finding
        table = compare_outputs(["out"] * len(expected), outcome.outputs, expected, judged.spec.tolerance,
                                        truth)
        errors = [np.abs(np.asarray(a, np.float64) - np.asarray(e, np.float64)) if c.bad is not None else None
                  for c, a, e in zip(table, outcome.outputs, expected, strict=True)]
        if outcome.schedule and len({core for _, core in outcome.schedule}) > 1:  # blame then names the core
            finding = dataclasses.replace(finding, evidence={**finding.evidence,
                                                             "grid_schedule": [list(p) for p in outcome.schedule]})
        return self._with_blame(finding, judged.inputs, [c.bad for c in table], errors)

    def _divergence(self, key: str, case: Case, outcome: Outcome, paths: list[str], expected: Sequence[np.ndarray],
                    truth: Truth | None) -> list[Finding]:
        """Compare with every other backend that ran this very example and passed."""
        seen = self._outputs.setdefault(key, {})
        found = []
        for other, (other_outcome, other_mode) in seen.items():
            if other != case.backend:
                other_case = dataclasses.replace(case, backend=other, mode=other_mode)
                found += divergence_findings([other_case, case], [other_outcome, outcome], paths, expected, truth)
        seen[case.backend] = (Outcome(outputs=outcome.outputs), dict(case.mode))
        return found

    def _rerun_ahead(self, backend: Backend, case: Case) -> _Running | None:
        """The backend's metamorphic reruns as one case with every knob changed, started now
        in a worker of its own when a core is spare for it (``static_tracer_slot``): it runs
        beside the base run instead of after it. A knob the kernel lacks changes nothing,
        so the one rerun serves whichever of them the base run says apply."""
        variants = getattr(backend, "variants", lambda _: [])(case.mode)
        if not variants or backend.isolate or not self._in_worker(backend) or static_tracer_slot() != "tracer":
            return None
        if self.reruns.last.get(backend.name) == frozenset():  # the kernel's last example needed none
            return None
        merged = dataclasses.replace(case, mode=_merged(case.mode, [mode for _, mode in variants if not _races_only(mode)]))
        return self.submit(merged, slot="reruns")

    def _metamorphic(self, backend: Backend, case: Case, base: Outcome, paths: list[str],
                     ahead: _Running | None = None) -> list[Finding]:
        """The backend's metamorphic reruns that can show something on this kernel (as the
        base run's ``reruns`` says): one rerun with all their knobs changed (started ahead
        when a core was spare), and each alone only when that one shows a difference (to
        name the kind); then the races-only rerun, judged by its race reports alone."""
        variants = getattr(backend, "variants", lambda _: [])(case.mode)
        wanted = [(kind, mode) for kind, mode in variants if base.reruns is None or kind in base.reruns]
        self.reruns.count(backend.name, [kind for kind, _ in variants], [kind for kind, _ in wanted], base.skipped)
        self.reruns.last[backend.name] = frozenset(kind for kind, _ in wanted)
        races_only = [(kind, mode) for kind, mode in wanted if _races_only(mode)]
        wanted = [(kind, mode) for kind, mode in wanted if not _races_only(mode)]
        together, singles = None, wanted
        if wanted and (ahead is not None or len(wanted) > 1):
            merged = ahead.case if ahead is not None else dataclasses.replace(
                case, mode=_merged(case.mode, [mode for _, mode in wanted]))
            variant = self.collect(ahead) if ahead is not None else self.run(merged)
            if ahead is not None:
                ahead.outcome = variant
            together = metamorphic_finding(case, wanted[0][0], base, merged, variant, paths)
            singles = wanted if together is not None else []  # each alone only to name the kind
        for kind, mode in singles:
            variant_case = dataclasses.replace(case, mode=mode)
            variant = self.run(variant_case)
            finding = metamorphic_finding(case, kind, base, variant_case, variant, paths)
            if finding is not None:
                return [self._metamorphic_blame(finding, case, base, variant)]
        if together is not None:
            return [together]
        for kind, mode in races_only:
            variant_case = dataclasses.replace(case, mode=mode)
            finding = metamorphic_finding(case, kind, base, variant_case, self.run(variant_case), paths)
            if finding is not None:
                return [finding]
        return []

    def _metamorphic_blame(self, finding: Finding, case: Case, base: Outcome, variant: Outcome) -> Finding:
        if base.outputs is None or variant.outputs is None:
            return finding
        masks = [~bitwise_equal(a, b) for a, b in zip(base.outputs, variant.outputs, strict=True)]
        return self._with_blame(finding, case.inputs, masks, [None] * len(masks))

    def _tracer(self, slot: str = "interpreters") -> Worker | None:
        """Where the static check and blame trace the kernel: a shared worker when
        isolation applies (see the class docstring), else in-process. The static check
        may have a worker of its own (``static_tracer_slot``)."""
        isolated = self.isolate == "always" or (self.isolate == "auto" and self.spec_ref is not None)
        return shared_worker(slot) if isolated else None

    def static_findings(self, config: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> list[Finding]:
        """The static grid check, once per (config, input shapes); parts it cannot
        analyse are added to ``static_notes``."""
        return self.start_static(config, inputs)()

    def start_static(self, config: Mapping[str, Any],
                     inputs: tuple[np.ndarray, ...]) -> Callable[[], list[Finding]]:
        """Start ``static_findings`` (in the tracer's worker when isolation applies); the
        returned function waits for them."""
        from pallas_verify.oracles.static import start_static_check

        key = config_key(config) + repr([(x.shape, str(x.dtype)) for x in inputs])
        if key in self._static:
            return lambda: self._static[key]
        slot = static_tracer_slot()
        result = start_static_check(self.spec, config, inputs, spec_ref=self.spec_ref, worker=self._tracer(slot),
                                    timeout_s=self.timeout_s)

        def findings() -> list[Finding]:
            if key not in self._static:
                done = result()
                self._static[key] = done.findings
                self.static_notes.extend(n for n in done.notes if n not in self.static_notes)
            return self._static[key]

        if slot == "interpreters":  # the cases' worker (or this process): done before it gets the case
            findings()
        return findings

    def _with_blame(self, finding: Finding, inputs: Sequence[np.ndarray], masks: Sequence[np.ndarray | None],
                    errors: Sequence[np.ndarray | None]) -> Finding:
        if not self._blame_now:
            self._unblamed[id(finding)] = (finding, inputs, masks, errors)  # holds the finding: its id stays its own
            return finding
        return self._blame(finding, inputs, masks, errors)

    def blamed(self, finding: Finding) -> Finding:
        """``finding`` with the blame ``check(blame=False)`` left for later (when it has one)."""
        entry = self._unblamed.pop(id(finding), None)
        if entry is None or entry[0] is not finding:
            return finding
        return self._blame(*entry)

    def forget_blame(self) -> None:
        """Drop the blame left for findings that were not reported (a search's shrink steps)."""
        self._unblamed.clear()

    def _blame(self, finding: Finding, inputs: Sequence[np.ndarray], masks: Sequence[np.ndarray | None],
               errors: Sequence[np.ndarray | None]) -> Finding:
        from pallas_verify.oracles.static import blame_finding

        blamed = blame_finding(finding, self.spec, inputs, masks, errors, spec_ref=self.spec_ref,
                               worker=self._tracer(), timeout_s=self.timeout_s)
        ran, writers = blamed.evidence.get("grid_schedule"), blamed.evidence.get("blame", {}).get("writers")
        named = cores_named(ran, writers) if ran and writers else None
        if named is None:
            return blamed
        return dataclasses.replace(blamed, message=f"{blamed.message}\n{named}",
                                   evidence={**blamed.evidence, "cores": named})

    def _reference_failure(self, config: Mapping[str, Any], exc: Exception, transform: str | None = None) -> Finding:
        under = f" under {transform}" if transform else ""
        return Finding(kind="exception", kernel=self.spec.name, backend="reference", config=dict(config),
                       transform=transform,
                       message=f"the reference raised {type(exc).__name__}{under}: {exc}. The reference must accept "
                       "every config and input the spec draws; fix it or narrow spec.configs/inputs.")


@dataclasses.dataclass
class RerunTally:
    """How many examples each backend ran, and on how many it left a check out because the
    kernel has nothing that check varies or could trip (``_jax_compat.RERUNS`` and
    ``SKIPPED_CHECKS`` say why): a metamorphic rerun, or race detection."""

    examples: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter[tuple[str, str]] = dataclasses.field(default_factory=collections.Counter)
    last: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)  # backend -> reruns of its last example

    def count(self, backend: str, kinds: Sequence[str], wanted: Sequence[str], skipped: Sequence[str] = ()) -> None:
        if kinds:
            self.examples[backend] += 1
        self.skipped.update((backend, k) for k in kinds if k not in wanted)
        self.skipped.update((backend, k) for k in skipped)

    def notes(self) -> list[str]:
        """One line per check left out: on how many examples, and why."""
        reasons = {**_jax_compat.RERUNS, **_jax_compat.SKIPPED_CHECKS}
        return [f"{backend}: {'race detection' if kind == 'race' else f'the {kind} rerun'} was skipped on {n} of "
                f"{self.examples[backend]} examples ({reasons.get(kind, 'the kernel has nothing it changes')})"
                for (backend, kind), n in sorted(self.skipped.items())]


@dataclasses.dataclass
class _Running:
    """A case submitted to run: in a worker (``pending``), already decided (``outcome``),
    or to run in-process when collected."""

    case: Case
    backend: Backend
    worker: Worker | None = None
    pending: Pending | None = None
    outcome: Outcome | None = None


def _races_only(mode: Mapping[str, Any]) -> bool:
    """Whether a rerun's mode computes no float values (its outputs are placeholders)."""
    return bool(mode.get("skip_floating_point_ops"))


def _merged(mode: Mapping[str, Any], variants: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``mode`` with every knob that any of ``variants`` changes set as that variant sets it."""
    merged = dict(mode)
    for variant in variants:
        merged.update({k: v for k, v in variant.items() if mode.get(k) != v})
    return merged


def _no_ref_error(spec: KernelSpec, backend: Backend) -> Any:
    from pallas_verify.case import ErrorInfo

    return ErrorInfo(type="InvalidSpec", message=(
        f"backend {backend.name} runs cases in a worker process, which loads KernelSpec {spec.name!r} by "
        "reference; define the spec at module level so it has one (FILE.py::NAME or MODULE:NAME)."))
