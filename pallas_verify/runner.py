"""One example on one backend, end to end: the backend runs the case (in the sandbox) while
the reference is computed here, then the oracles judge the outcome.

What the runner owns, each in its room: the case sandbox (``execution.sandbox``), the
reference's results per example (``reference.References``), the tracer that traces the
kernel for the static check and blame (``tracer``), the metamorphic reruns (``reruns``),
the outputs each backend gave for an example (for the divergence oracle), and the upstream
limitations met (``attribution``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from pallas_verify import _jax_compat, attribution, transforms
from pallas_verify.backends.base import Backend
from pallas_verify.backends.mosaic_params import ParamsCoverage
from pallas_verify.backends.schedule import Coverage
from pallas_verify.case import UNSUPPORTED, Case, ErrorInfo, Outcome
from pallas_verify.errors import NotForThisCase
from pallas_verify.execution.sandbox import Running, Sandbox
from pallas_verify.findings import Finding
from pallas_verify.keys import Lru, example_key
from pallas_verify.loader import spec_ref
from pallas_verify.oracles.approx import approx_math_case
from pallas_verify.oracles.differential import judge_outcome
from pallas_verify.oracles.divergence import Divergences
from pallas_verify.oracles.shape_invariance import ShapeRerun
from pallas_verify.reference import Expected, References, Truth
from pallas_verify.reruns import Rerun, Reruns
from pallas_verify.spec import KernelSpec
from pallas_verify.tolerance import Comparison, element_errors
from pallas_verify.tracer import BlameInputs, Tracer

__all__ = ["InternalError", "Runner", "Unsupported", "Verdict"]


#: Examples per (backend, transform) cell compiled under drawn compiler-param overrides.
OVERRIDES_PER_CELL = 3


class Unsupported(Exception):
    """The backend cannot run this kernel at all; the message says why."""


class InternalError(Exception):
    """pallas-verify's own code failed on this example: the cell is not judged, and the
    message says so (``attribution.internal_error``); never a finding against the kernel."""


class Verdict(NamedTuple):
    """The findings of one example on one backend, and per finding kind what blame maps
    (for the findings blame can map): it travels with the failing example, and only the
    findings a run reports are blamed (``Runner.blame``)."""

    findings: list[Finding]
    blame: Mapping[str, BlameInputs]


@dataclasses.dataclass
class Runner:
    """Runs examples of one spec, on any backend, sharing the reference between them.

    ``isolate``: where cases and traces run (``execution.sandbox``): "auto" in a worker
    process whenever the spec can be loaded by reference, "always", or "never" (except for
    backends that must isolate). ``cache_size``: examples whose reference results (and
    backend outputs, for the divergence oracle) are kept.
    """

    spec: KernelSpec
    timeout_s: float = 120.0
    isolate: str = "auto"
    cache_size: int = 256
    metamorphic: bool = True  # False: no reruns with one interpreter knob changed, no shape_invariance rerun

    def __post_init__(self) -> None:
        self.spec_ref = spec_ref(self.spec)
        self.sandbox = Sandbox(self.spec.name, self.spec_ref, timeout_s=self.timeout_s, isolate=self.isolate,
                               seen=self._saw)
        self.references = References(self.spec, self.cache_size)
        self.tracer = Tracer(self.spec, self.sandbox, cache_size=self.cache_size)
        self.shapes = ShapeRerun(notes=self.references.notes)  # the shape_invariance reruns (oracles/shape_invariance.py)
        self.reruns = Reruns(self.sandbox, self.shapes)
        self.upstream: dict[str, attribution.Upstream] = {}  # backend -> its first upstream limitation
        self.coverage: dict[tuple[str, str | None], Coverage] = {}  # (backend, transform) -> schedules run
        self.divergences = Divergences(self.cache_size)  # what each backend gave per example
        self._witnessed: Lru[str, bool] = Lru(maxsize=self.cache_size)  # example@backend -> judged clean there
        self._witness_errors: Lru[str, ErrorInfo] = Lru(maxsize=self.cache_size)  # example@backend -> its error
        self.params_coverage: dict[tuple[str, str | None], ParamsCoverage] = {}  # ... -> compiler params drawn
        self._overridden: dict[tuple[str, str | None], int] = {}  # (backend, transform) -> examples with overrides

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sandbox.close()

    def run(self, case: Case, backend: Backend | None = None) -> Outcome:
        """Run one case on ``backend`` (None: the registry's of ``case.backend``), in a
        worker process when isolation applies."""
        if backend is None:
            from pallas_verify.backends import registry

            backend = registry.get(case.backend)
        return self.sandbox.run(case, backend)

    def expected(self, config: Mapping[str, Any], inputs: Sequence[np.ndarray], key: str,
                 transform: str | None = None) -> Expected:
        """The reference's (outputs, paths, truth) for one example (under ``transform``),
        computed once (``reference.References``). ``truth`` is the float64 ground truth, or
        None under an explicit tolerance (which needs none)."""
        return self.references.expected(config, inputs, key, transforms.rule(transform))

    def check(self, config: Mapping[str, Any], inputs: tuple[np.ndarray, ...], backend: Backend,
              mode: Mapping[str, Any], transform: str | None = None) -> list[Finding]:
        """Every finding of one example on one backend, blamed (``judge``, then ``Tracer.blame``)."""
        verdict = self.judge(config, inputs, backend, mode, transform)
        return [self.tracer.blame(f, verdict.blame.get(f.kind)) for f in verdict.findings]

    def static_findings(self, config: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> list[Finding]:
        """The static grid check of one example (``Tracer.static``), waited for."""
        return self.tracer.static(config, inputs).result()

    def judge(self, config: Mapping[str, Any], inputs: tuple[np.ndarray, ...], backend: Backend,
              mode: Mapping[str, Any], transform: str | None = None, *, witness: bool = False) -> Verdict:
        """The findings of one example on one backend, not yet blamed.

        An error that is JAX's (``attribution``) raises Unsupported with the reason.
        ``witness=True`` runs the example as a witness for another backend's upstream
        limitation: no attribution of its own, and no metamorphic reruns (this backend's
        own search runs them on every example it draws).
        """
        mode = self._overrides_capped(backend.name, transform, mode)
        key = example_key(config, inputs) + (f"+{transform}" if transform else "")
        case = Case(spec=self.spec, config=config, inputs=inputs, backend=backend.name, mode=mode, transform=transform)
        running = self.sandbox.submit(case, backend)  # the worker runs the kernel while the reference is computed here
        rerun = None if witness or not self.metamorphic else self.reruns.start(backend, case)  # and, on a spare core, its rerun
        try:
            return self._judge(key, case, backend, running, rerun, witness=witness)
        finally:
            self.reruns.settle(rerun)  # the worker answers every request: take its answer off the pipe

    def _judge(self, key: str, case: Case, backend: Backend, running: Running, rerun: Rerun | None, *,
               witness: bool) -> Verdict:
        config, inputs, transform = case.config, case.inputs, case.transform
        try:
            expected, paths, truth = self.expected(config, inputs, key, transform)
        except Exception as exc:
            if running.pending is not None:  # the worker answers every request: take its answer off the pipe
                self.sandbox.collect(running)
            return Verdict([_reference_failure(self.spec.name, config, exc, transform)], {})
        outcome = self.sandbox.collect(running)
        if witness and outcome.error is not None:  # what attribution asks when no witness runs it clean
            self._witness_errors.put(_witness_key(case), outcome.error)
        if outcome.error is not None and outcome.error.type in (UNSUPPORTED, _jax_compat.MissingFeature.__name__):
            raise Unsupported(outcome.error.message)
        if outcome.error is not None and outcome.error.type == NotForThisCase.__name__:
            raise NotForThisCase(outcome.error.message)  # this example only: the search goes on
        limitation = _jax_compat.upstream_limitation(outcome.error, backend=case.backend, transform=transform)
        if limitation:
            raise Unsupported(limitation)
        internal = attribution.internal_error(outcome.error)
        if internal:
            raise InternalError(internal)
        upstream = attribution.attribute(case, outcome, backend, clean=self._judged_clean,
                                         failed=lambda other: self._witness_errors.get(_witness_key(other)),
                                         seen=self.upstream) if not witness and outcome.error is not None else None
        if upstream:
            raise Unsupported(upstream)
        judged = approx_math_case(transforms.judged(case, expected), backend)  # what approx_math permits
        found, table = judge_outcome(judged, outcome, expected, paths, self.truth_for(case, truth, mismatched=False))
        if any(f.kind == "mismatch" for f in found) and self.truth_for(case, truth, mismatched=True) is truth:
            found, table = judge_outcome(judged, outcome, expected, paths, truth)
        if found or not outcome.ok:
            return Verdict(_with_schedule(found, outcome), _mismatched(found, judged, outcome, expected, table))
        found, blame = self.reruns.findings(rerun, outcome, expected, paths) if rerun is not None else ([], {})
        if not found and backend.executes and transform is None:
            found = self.divergences.findings(key, case, outcome, paths, expected, truth,
                                              arithmetic=backend.arithmetic)
        if not found and backend.executes and transforms.rule(transform).per_example:
            found = transforms.per_example_findings(case, outcome, lambda alone: self.sandbox.run(alone, backend), paths,
                                                    truth)
        return Verdict(found, blame)

    def truth_for(self, case: Case, truth: Truth | None, *, mismatched: bool) -> Truth | None:
        """``truth`` with its rounded-dot evaluation (``reference.Truth.dots``) only for a
        kernel that rounds its dot operands so itself (``grid.dots``): asked
        (a trace, waited for) only once the outputs ``mismatched`` without it, for the bare
        kernel."""
        if truth is None or truth.dots is None:
            return truth
        if not mismatched or case.transform is not None or not self.tracer.rounds_dot_operands(
                case.config, case.inputs, truth.rounding or ""):
            return dataclasses.replace(truth, dots=None)
        return truth

    def _judged_clean(self, case: Case, backend: Backend) -> bool:
        """Whether ``case`` runs on ``backend`` with no finding (it witnesses an upstream
        limitation on another backend); asked once per example, transform and backend."""
        key = _witness_key(case)
        if key not in self._witnessed:
            try:
                clean = not self.judge(case.config, case.inputs, backend, case.mode, case.transform,
                                       witness=True).findings
            except Unsupported:
                clean = False
            self._witnessed.put(key, clean)
        return bool(self._witnessed.get(key))

    def _saw(self, case: Case, outcome: Outcome) -> None:
        """Every outcome collected: its schedule counted in ``coverage``, what its
        compiler-param overrides did in ``params_coverage``."""
        key = (case.backend, case.transform)
        if outcome.schedule:
            self.coverage.setdefault(key, Coverage()).add(outcome.schedule)
        if outcome.compiler_params:
            self.params_coverage.setdefault(key, ParamsCoverage()).add(outcome.compiler_params)

    def _overrides_capped(self, backend: str, transform: str | None, mode: Mapping[str, Any]) -> Mapping[str, Any]:
        """``mode`` without its drawn compiler-param overrides once ``OVERRIDES_PER_CELL``
        examples of the cell compiled under some (each costs a second compile)."""
        if not mode.get("compiler_params"):
            return mode
        cell = (backend, transform)
        self._overridden[cell] = self._overridden.get(cell, 0) + 1
        if self._overridden[cell] <= OVERRIDES_PER_CELL:
            return mode
        self.references.notes.add(f"compiler_params: overrides compiled on the first {OVERRIDES_PER_CELL} examples "
                                  "per mosaic_tpu cell (each costs a second compile)")
        return {**mode, "compiler_params": {}}



def _witness_key(case: Case) -> str:
    """``example+transform@backend``: one example run as a witness on one backend."""
    return f"{example_key(case.config, case.inputs)}+{case.transform}@{case.backend}"


def _reference_failure(kernel: str, config: Mapping[str, Any], exc: Exception, transform: str | None) -> Finding:
    under = f" under {transform}" if transform else ""
    return Finding(kind="exception", kernel=kernel, backend="reference", config=dict(config),
                   transform=transform,
                   message=f"the reference raised {type(exc).__name__}{under}: {exc}. The reference must accept "
                   "every config and input the spec draws; fix it or narrow spec.configs/inputs.")


def _with_schedule(found: list[Finding], outcome: Outcome) -> list[Finding]:
    """A mismatch of a run on several cores carries the grid schedule it ran (blame then
    names the core that wrote the bad blocks)."""
    if not outcome.schedule or len({core for _, core in outcome.schedule}) <= 1:
        return found
    schedule = [list(p) for p in outcome.schedule]
    return [dataclasses.replace(f, evidence={**f.evidence, "grid_schedule": schedule}) if f.kind == "mismatch" else f
            for f in found]


def _mismatched(found: list[Finding], judged: Case, outcome: Outcome, expected: Sequence[np.ndarray],
                table: list[Comparison] | None) -> dict[str, BlameInputs]:
    """What blame maps for a mismatch: the comparison's bad elements and their errors."""
    if table is None or outcome.outputs is None or len(outcome.outputs) != len(expected) or len(table) != len(expected):
        return {}
    if not any(f.kind == "mismatch" for f in found):
        return {}
    errors = tuple(element_errors(a, e) if c.bad is not None else None
                   for c, a, e in zip(table, outcome.outputs, expected, strict=True))
    return {"mismatch": BlameInputs(inputs=judged.inputs, masks=tuple(c.bad for c in table), errors=errors)}
