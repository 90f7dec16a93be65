"""One search: one backend (and transform) of one spec, across its rounds.

Each example draws a config, inputs for it, the transform's own draws (a batch, a
cotangent; see transforms.py) and a mode; starts the static check of its config and input
shapes (``StaticLedger``: once per config and shapes, shared by every search of the spec);
runs the example on the backend through the runner; and raises ``Found`` when it shows
findings, so Hypothesis shrinks it. ``ShrinkProgress`` says when shrinking can no longer
make a finding more useful.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import strategies as st

from pallas_verify import transforms
from pallas_verify.attribution import internal_failure
from pallas_verify.backends.base import Backend
from pallas_verify.errors import InvalidSpec, NotForThisCase, brief
from pallas_verify.findings import INPUT_BLIND, Finding
from pallas_verify.keys import config_key, example_key
from pallas_verify.runner import InternalError, Runner, Unsupported, Verdict
from pallas_verify.signatures import SameSignature
from pallas_verify.spec import KernelSpec
from pallas_verify.tracer import Traced

if TYPE_CHECKING:
    from pallas_verify.reports.live import LiveProgress

__all__ = ["INPUT_BLIND", "BadSpec", "Found", "Search", "ShrinkProgress", "StaticLedger", "Stopped", "found_type"]


class Found(Exception):
    """Raised inside a search when an example shows findings (Hypothesis shrinks it)."""

    def __init__(self, findings: list[Finding], example: dict[str, Any]) -> None:
        super().__init__(findings[0].message)
        self.findings, self.example = findings, example


_ORIGINS: dict[str, type[Found]] = {}


def found_type(kind: str) -> type[Found]:
    """One exception type per finding kind: Hypothesis shrinks each kind separately."""
    if kind not in _ORIGINS:
        _ORIGINS[kind] = type(f"Found_{kind}", (Found,), {})
    return _ORIGINS[kind]


class Stopped(BaseException):
    """Raised inside a search to end it at once when its budget is spent (the caller's
    ``stop``, or the shrink budget): Hypothesis lets a BaseException through without
    shrinking it, where returning early would still pay a draw for every remaining
    shrink step. The search reports the last failure of each kind it saw."""


class BadSpec(Exception):
    """A spec's strategies misbehaved: the spec is invalid, not the kernel."""


@dataclasses.dataclass
class Search:
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
    seen: dict[str, Found] = dataclasses.field(default_factory=dict)
    passed: set[str] = dataclasses.field(default_factory=set)  # examples run in an earlier round
    seconds: float = 0.0
    done: bool = False
    found: list[tuple[Finding, dict[str, Any]]] = dataclasses.field(default_factory=list)
    unsupported: str | None = None
    internal: str | None = None  # pallas-verify's own failure (attribution.internal_error): the cell is not judged
    not_for_this_case: int = 0  # examples the backend could not run (errors.NotForThisCase): not run, not counted
    transform: str | None = None
    max_examples: int = 0
    shrink_steps: int = 0
    shrink: ShrinkProgress = dataclasses.field(default_factory=lambda: ShrinkProgress())
    progress: LiveProgress | None = None
    uniform: SameSignature = dataclasses.field(default_factory=lambda: SameSignature(kinds=INPUT_BLIND))
    early: Callable[[Finding, dict[str, Any], float, int], None] | None = None  # each kind's first failure
    stop: Callable[[], bool] | None = None
    modes: st.SearchStrategy[Any] | None = None  # the mode draw (default: the backend's own modes())
    last_found: dict[str, Found] = dataclasses.field(default_factory=dict)  # per kind, the latest failure

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
            raise Stopped  # nothing left to run: end Hypothesis's run instead of drawing again and again
        if key in self.passed or self.unsupported or self.internal or self.shrink.stopped:
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
        verdict = Verdict([], {})
        try:
            verdict = self.runner.judge(config, inputs, self.backend, mode, transform=self.transform)
        except NotForThisCase:  # the backend cannot run this example: not run, not judged, not counted
            self.not_for_this_case += 1
            if generating:
                self.examples -= 1
            else:
                self.shrink_steps -= 1
            return
        except Unsupported as exc:
            self.unsupported = str(exc)
        except InternalError as exc:
            self.internal = str(exc)
        except Exception as exc:  # the kernel's own errors come back in its Outcome: this one is the tool's
            self.internal = internal_failure(exc)
        findings = verdict.findings
        now = time.perf_counter() - self.kernel_started
        if static is not None:  # traced meanwhile where it has a worker of its own
            static()
            if self.early is not None and self.static is not None:
                for kind in set(self.static.found) - static_kinds:
                    self.early(*self.static.found[kind])
        if self.unsupported or self.internal:
            return
        if not generating:
            self.shrink.step(config, findings)
        if self.uniform.step(findings) and not self.shrink.stopped:  # every example failed one way: stop
            self.shrink.stopped = self.uniform.stopped
        if not findings:
            self.passed.add(key)
        if findings:
            self.first_failure = self.first_failure or time.perf_counter()
            example = {"config": config, "inputs": inputs, "mode": mode, "blame": dict(verdict.blame)}
            for f in findings:
                if f.kind not in self.first_seen:
                    self.first_seen[f.kind] = (now, self.examples)
                    if self.early is not None:
                        self.early(f, example, now, self.examples)
            found = found_type(findings[0].kind)(findings, example)
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
            raise BadSpec(str(exc)) from None

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


@dataclasses.dataclass
class ShrinkProgress:
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
            same = first.kind in INPUT_BLIND and outcome == self.last
            self.same = self.same + 1 if same else 0
            self.stale = self.stale + 1 if same else 0
            self.last = outcome
        if self.same >= _SAME_FAILURE_PATIENCE:
            self.stopped = f"{self.same} shrink steps failed the same way at the same config"
        elif self.stale >= _STALL_PATIENCE:
            self.stopped = f"{self.stale} shrink steps without a smaller failing example"


def _draw(data: st.DataObject, strategy: Any, field: str, kind: type) -> Any:
    if not isinstance(strategy, st.SearchStrategy):
        raise BadSpec(f"KernelSpec.{field} must give a Hypothesis SearchStrategy; got {brief(strategy)}.")
    value = data.draw(strategy, label=field)
    if not isinstance(value, kind):
        raise BadSpec(f"KernelSpec.{field} must draw a {kind.__name__}; it drew {brief(value)}.")
    return value


@dataclasses.dataclass
class StaticLedger:
    """The static check of a search's examples, run inline on each example's config and
    untransformed inputs: one finding per kind, kept with the smallest example that
    showed it, and the seconds and examples it took to see it first.

    ``start_of`` starts the check itself (``Tracer.static``: cached per config and input
    shapes) and returns a future of its findings: a search starts it before an example
    runs and takes the findings after, so a worker traces while another runs the kernel.
    After a trace that hung or aborted, the rest are skipped (each would hang again), and
    ``notes`` says so.
    """

    start_of: Callable[[Mapping[str, Any], tuple[np.ndarray, ...]], Traced[list[Finding]]]
    notes: list[str]
    started: float
    found: dict[str, tuple[Finding, dict[str, Any], float, int]] = dataclasses.field(default_factory=dict)
    stopped: bool = False

    def start(self, config: Mapping[str, Any], inputs: tuple[np.ndarray, ...], examples: int) -> Callable[[], None]:
        """Start checking one example; the returned function records its findings."""
        if self.stopped:
            return lambda: None
        findings = self.start_of(config, inputs)
        return lambda: self._record(config, inputs, examples, findings.result())

    def _record(self, config: Mapping[str, Any], inputs: tuple[np.ndarray, ...], examples: int,
                findings: list[Finding]) -> None:
        for finding in findings:
            example = {"config": dict(config), "inputs": inputs, "mode": {}}
            first = self.found.get(finding.kind)
            if first is None:
                self.found[finding.kind] = (finding, example, time.perf_counter() - self.started, examples)
            elif _size(inputs) < _size(first[1]["inputs"]):
                self.found[finding.kind] = (finding, example, first[2], first[3])
            if finding.kind in ("timeout", "crash") and not self.stopped:
                self.stopped = True
                self.notes.append(f"static check skipped after its first {finding.kind}: tracing the kernel for "
                                  f"config {dict(config)} failed, and tracing again for each new config would only wait on it again")


def _size(inputs: Sequence[np.ndarray]) -> int:
    return sum(int(np.size(x)) for x in inputs)
