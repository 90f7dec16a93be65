"""Which knobs of a minimal config a failure needs.

Shrinking leaves a config as simple as Hypothesis could make it within its budget, but a
search that stops early (every example failed the same way) or runs out of shrink time
reports knobs the failure may not depend on. After shrinking, each knob of the failing
config that is not at its simplest value (the config strategy's minimal example) is tried
there alone, on the same inputs, backend and mode: a knob without which the finding's kind
is gone is *needed*; one with which it stays is *not needed*. A knob that shapes the inputs
(its simplest value changes their shapes, dtypes or the values the inputs strategy draws),
or whose trial cannot run (it raised, or the budget ran out), is *untried*, and says why.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, find, settings

from pallas_verify.findings import Finding
from pallas_verify.profiles import NO_EXPLAIN
from pallas_verify.spec import KernelSpec

__all__ = ["Knobs", "knobs_needed", "simplest"]

# No explain phase: it calls find's condition on random variants of the minimal example, and
# find returns the last value its condition accepted (a random one), after a few hundred draws.
_FIND = settings(database=None, max_examples=50, suppress_health_check=list(HealthCheck),
                 phases=NO_EXPLAIN)


@dataclasses.dataclass(frozen=True)
class Knobs:
    """What trying each knob at its simplest value showed.

    Attributes:
      needed: knobs without which the failure is gone.
      not_needed: knobs whose simplest value fails the same way (name -> that value).
      untried: knobs not tried (name -> why).
      simpler: the finding again on the config with every knob it does not need at its
        simplest value at once, and that config; None when it does not fail the same way
        there (or every knob it does not need is one already there).
    """

    needed: tuple[str, ...] = ()
    not_needed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    untried: Mapping[str, str] = dataclasses.field(default_factory=dict)
    simpler: tuple[Finding, dict[str, Any]] | None = None

    def line(self) -> str:
        """One line for the finding's message ("" when no knob was tried)."""
        parts = []
        if self.needed:
            parts.append(f"needs {', '.join(self.needed)} (at their simplest values it passes)")
        if self.not_needed:
            values = ", ".join(f"{k}={v!r}" for k, v in self.not_needed.items())
            together = " (all at once too: the config above)" if self.simpler is not None else ""
            parts.append(f"does not need the rest: it fails the same way at {values}{together}")
        if self.untried:
            parts.append("not tried: " + "; ".join(f"{k} ({why})" for k, why in self.untried.items()))
        return "minimal config, knob by knob: " + "; ".join(parts) if parts else ""


def simplest(strategy: Any) -> Any:
    """The minimal example of a strategy (Hypothesis's shrink target)."""
    return find(strategy, lambda _: True, settings=_FIND)


def knobs_needed(spec: KernelSpec, finding: Finding, config: Mapping[str, Any], inputs: Sequence[np.ndarray],
                 check: Callable[[Mapping[str, Any], Sequence[np.ndarray]], list[Finding]], budget_s: float) -> Knobs:
    """Try each knob of ``config`` (the finding's minimal config) at its simplest value,
    the others kept, with ``check`` (the kinds one example shows on the finding's backend
    and mode); stop trying once ``budget_s`` is spent."""
    if budget_s <= 0:
        return Knobs()
    try:
        base = simplest(spec.configs)
    except Exception:  # a config strategy with no example: nothing to try
        return Knobs()
    deadline = time.monotonic() + budget_s
    needed: list[str] = []
    not_needed: dict[str, Any] = {}
    untried: dict[str, str] = {}
    for key, value in config.items():
        if key not in base or _same(base[key], value):
            continue
        if time.monotonic() > deadline:
            untried[key] = "the shrink budget ran out"
            continue
        trial = {**config, key: base[key]}
        why = _inputs_fit(spec, config, trial, inputs)
        if why is not None:
            untried[key] = why
            continue
        try:
            kinds = {f.kind for f in check(trial, inputs)}
        except Exception as exc:  # an upstream limitation, a config the kernel rejects: no answer
            untried[key] = f"at {base[key]!r} it could not be judged: {type(exc).__name__}"
            continue
        if finding.kind in kinds:
            not_needed[key] = base[key]
        else:
            needed.append(key)
    return Knobs(needed=tuple(needed), not_needed=not_needed, untried=untried,
                 simpler=_together(finding, config, not_needed, inputs, check))


def _together(finding: Finding, config: Mapping[str, Any], not_needed: Mapping[str, Any],
              inputs: Sequence[np.ndarray], check: Callable[..., list[Finding]]) -> tuple[Finding, dict] | None:
    """The finding on ``config`` with every knob in ``not_needed`` at its simplest value at
    once, and that config, when it fails the same way there; else None."""
    if not not_needed:
        return None
    simpler = {**config, **not_needed}
    try:
        again = [f for f in check(simpler, inputs) if f.kind == finding.kind]
    except Exception:  # each alone failed the same way; together they may not run
        return None
    return (again[0], simpler) if again else None


def _inputs_fit(spec: KernelSpec, config: Mapping[str, Any], trial: Mapping[str, Any],
                inputs: Sequence[np.ndarray]) -> str | None:
    """Why the failing inputs cannot stand for ``trial``'s (its inputs differ in shape or
    dtype, or the knob changes what the inputs strategy draws), else None."""
    try:
        drawn = tuple(np.asarray(x) for x in simplest(spec.inputs(dict(trial))))
        before = tuple(np.asarray(x) for x in simplest(spec.inputs(dict(config))))
    except Exception as exc:
        return f"its inputs could not be drawn: {type(exc).__name__}"
    if [(x.shape, x.dtype) for x in drawn] != [(np.shape(x), np.asarray(x).dtype) for x in inputs]:
        return "its simplest value changes the inputs' shapes or dtypes"
    if len(drawn) != len(before) or not all(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
                                            for a, b in zip(drawn, before, strict=True)):
        return "it changes the values the inputs are drawn with"
    return None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # arrays and the like: compare their text
        return repr(a) == repr(b)
