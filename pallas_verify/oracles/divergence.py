"""Backend divergence: executing backends that each pass the reference must agree bitwise
with each other (for specs that declare ``bitwise_stable``), where they compute with the
same arithmetic (``Backend.arithmetic``): the interpreters, XLA's on one device. A real
chip's compiled kernel has its own exp, rsqrt and reduction order (measured on an H200
through ``triton:h100``: a correct row norm 2.5e-7 from the truth where the HLO
interpreter was 1.0e-7), so it is held to the reference alone.

Two backends that both pass can still disagree: the precision oracle's bound is a max
norm, so a backend that corrupts a few small elements next to large ones can stay under
it. Where they differ, the float64 reference (the working-precision one when there is no
float64 truth) decides which of them is wrong: the backend whose error there is more
than ``DECISIVE`` times the other's is blamed, and the finding is its.

When neither is, the reference cannot decide: both are as near the truth as each other
where they differ. That is rounding (XLA:CPU compiles the same kernel body differently
in the HLO interpreter, one program for the whole grid, and in TPU interpret mode, one
per grid step), no evidence against the kernel: a ``Tie``, counted and said in the
kernel's notes, never a finding. Without reference outputs to decide by, the finding
still names both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding
from pallas_verify.keys import Lru
from pallas_verify.oracles.base import bitwise_differences, bitwise_equal, case_finding

if TYPE_CHECKING:
    from pallas_verify.reference import Truth

__all__ = ["DECISIVE", "DivergenceEvidence", "Divergences", "Tie", "blamed_backends", "divergence_findings"]

# How much farther from the reference one backend must be, on the elements where the two
# differ, to be the one that disagrees with it.
DECISIVE = 2.0


@dataclasses.dataclass(frozen=True)
class Tie:
    """Two backends that each pass the reference and differ bitwise on one example, where
    the reference cannot decide between them (module docstring): rounding, not a finding.

    Attributes:
      backends: the two backends, in the order they ran.
      differing: elements whose bits differ, over every output.
      error: the larger of the two backends' errors against the reference there.
    """

    backends: tuple[str, str]
    differing: int
    error: float


@dataclasses.dataclass(frozen=True)
class DivergenceEvidence:
    """What a ``backend_divergence`` finding's evidence says, typed (it travels as its
    ``Finding.evidence`` dict: ``to_dict`` writes it, ``of`` reads it back).

    Attributes:
      backends: the two backends, in the order they ran the example.
      blamed: the one the reference blames, or both without reference outputs to decide.
      errors: each backend's largest error against the reference where they differ
        (empty without reference outputs).
      modes: each backend's mode for the example.
      found_on: the backend whose search drew the example.
      other_backend: the backend the finding is not reported on.
    """

    backends: tuple[str, str]
    blamed: tuple[str, ...]
    errors: Mapping[str, float]
    modes: Mapping[str, Mapping[str, Any]]
    found_on: str
    other_backend: str

    def to_dict(self) -> dict[str, Any]:
        return {"backends": list(self.backends), "blamed": list(self.blamed), "errors": dict(self.errors),
                "modes": {b: dict(m) for b, m in self.modes.items()}, "found_on": self.found_on,
                "other_backend": self.other_backend}

    @classmethod
    def of(cls, finding: Finding) -> DivergenceEvidence | None:
        """The evidence of a divergence finding (None for any other finding)."""
        ev = finding.evidence
        if finding.kind != "backend_divergence" or "backends" not in ev:
            return None
        a, b = ev["backends"]
        return cls(backends=(str(a), str(b)), blamed=tuple(ev.get("blamed", ())), errors=dict(ev.get("errors", {})),
                   modes={k: dict(v) for k, v in ev.get("modes", {}).items()},
                   found_on=str(ev.get("found_on", finding.backend)),
                   other_backend=str(ev.get("other_backend", b if finding.backend == a else a)))

    def others(self, backend: str) -> dict[str, dict[str, Any]]:
        """The backends other than ``backend``, each with its mode, in the order they ran."""
        return {b: dict(self.modes[b]) for b in self.backends if b != backend and b in self.modes}


def divergence_findings(cases: Sequence[Case], outcomes: Sequence[Outcome], paths: Sequence[str],
                        expected: Sequence[np.ndarray] | None = None, truth: Truth | None = None,
                        ties: list[Tie] | None = None) -> list[Finding]:
    """Executing backends that each pass the reference but differ from each other bitwise.

    Each later run is compared with the first; the finding is reported against the
    backend that disagrees with the reference (``expected``, or ``truth`` where it has a
    float64 value). When the reference cannot decide, there is no finding: the ``Tie`` is
    appended to ``ties``. Without reference outputs the finding is reported against the
    later backend with both named in ``evidence["blamed"]``.
    """
    runs = [(c, o) for c, o in zip(cases, outcomes, strict=True) if o.ok and o.outputs is not None]
    if len(runs) < 2 or not runs[0][0].spec.bitwise_stable:
        return []
    first, found = runs[0], []
    for later in runs[1:]:
        lines = bitwise_differences(paths, first[1].outputs, later[1].outputs)  # type: ignore[arg-type]
        if not lines:
            continue
        judged = _finding(first, later, lines, _targets(expected, truth, len(paths)))
        if isinstance(judged, Tie):
            if ties is not None:
                ties.append(judged)
        else:
            found.append(judged)
    return found


class Divergences:
    """The outputs each executing backend gave for an example that passed there (the last
    ``cache_size`` examples): a later backend's outputs for the same example are compared
    with each of them."""

    def __init__(self, cache_size: int = 256) -> None:
        self._outputs: Lru[str, dict[str, tuple[Outcome, Mapping[str, Any], str]]] = Lru(maxsize=cache_size)
        self.ties: list[Tie] = []  # every example where two backends differed by rounding only

    def notes(self) -> list[str]:
        """The ties, said once per pair of backends (the kernel's notes): how many examples,
        how many elements, and how near the reference both stayed."""
        pairs: dict[tuple[str, str], list[Tie]] = {}
        for tie in self.ties:
            pairs.setdefault(tuple(sorted(tie.backends)), []).append(tie)  # type: ignore[arg-type]
        return [f"backend_divergence not charged to the kernel: {a} and {b} each passed the reference and differed "
                f"bitwise on {len(ties)} example(s) ({sum(t.differing for t in ties)} elements in all), where the "
                f"reference cannot decide between them (both within {max(t.error for t in ties):.3g} of it, neither "
                f"{DECISIVE:g}x farther than the other): rounding that differs between the interpreters' compiles, "
                "no evidence against the kernel"
                for (a, b), ties in sorted(pairs.items())]

    def findings(self, key: str, case: Case, outcome: Outcome, paths: Sequence[str],
                 expected: Sequence[np.ndarray] | None = None, truth: Truth | None = None, *,
                 arithmetic: str = "xla") -> list[Finding]:
        """Compare ``outcome`` (of example ``key``, passed) with the outputs every other
        backend of the same ``arithmetic`` gave for it (``Backend.arithmetic``: a real chip
        is held to the reference, not to the interpreters' bits); then remember it."""
        seen = self._outputs.get_or_make(key, dict)
        found = []
        for other, (other_outcome, other_mode, other_arithmetic) in seen.items():
            if other != case.backend and other_arithmetic == arithmetic:
                other_case = dataclasses.replace(case, backend=other, mode=other_mode)
                found += divergence_findings([other_case, case], [other_outcome, outcome], paths, expected, truth,
                                             self.ties)
        seen[case.backend] = (Outcome(outputs=outcome.outputs), dict(case.mode), arithmetic)
        return found


def _targets(expected: Sequence[np.ndarray] | None, truth: Truth | None, n: int) -> list[np.ndarray | None]:
    """Per output, what the backends are measured against: the float64 truth where there
    is one for a floating-point output, else the working-precision reference."""
    if expected is None:
        return [None] * n
    exact = truth.outputs if truth is not None and truth.outputs is not None else [None] * n
    return [t if t is not None and np.shape(t) == np.shape(e) and np.asarray(e).dtype.kind == "f" else e
            for e, t in zip(expected, exact, strict=True)]


def _error(outputs: Sequence[np.ndarray], other: Sequence[np.ndarray], targets: Sequence[np.ndarray | None]) -> float:
    """The largest distance from the reference of ``outputs`` where they differ from ``other``
    (a NaN or inf where the reference has a different value counts as infinitely far)."""
    worst = 0.0
    for out, oth, target in zip(outputs, other, targets, strict=True):
        differ = ~bitwise_equal(out, oth)
        if target is None or not differ.any() or np.shape(target) != np.shape(out):
            continue
        a, t = np.asarray(out, np.float64)[differ], np.asarray(target, np.float64)[differ]
        with np.errstate(invalid="ignore", over="ignore"):
            dist = np.abs(a - t)
        same = (a == t) | (np.isnan(a) & np.isnan(t))
        dist = np.where(same, 0.0, np.where(np.isfinite(dist), dist, np.inf))
        worst = max(worst, float(dist.max(initial=0.0)))
    return worst


def blamed_backends(errors: dict[str, float]) -> list[str]:
    """The backends that disagree with the reference, given each one's error where they
    differ: the one more than DECISIVE times farther than the other, else both."""
    (a, err_a), (b, err_b) = errors.items()
    if err_a > DECISIVE * err_b:
        return [a]
    if err_b > DECISIVE * err_a:
        return [b]
    return [a, b]


def _finding(first: tuple[Case, Outcome], later: tuple[Case, Outcome], lines: list[str],
             targets: list[np.ndarray | None]) -> Finding | Tie:
    (case_a, out_a), (case_b, out_b) = first, later
    a, b = case_a.backend, case_b.backend
    if all(t is None for t in targets):
        errors: dict[str, float] = {}
        blamed, verdict = [a, b], "no reference outputs were given to decide which is wrong"
    else:
        errors = {a: _error(out_a.outputs, out_b.outputs, targets),  # type: ignore[arg-type]
                  b: _error(out_b.outputs, out_a.outputs, targets)}  # type: ignore[arg-type]
        blamed = blamed_backends(errors)
        if len(blamed) == 2:  # as near the reference as each other: rounding (module docstring)
            differing = sum(int((~bitwise_equal(x, y)).sum()) for x, y in zip(out_a.outputs, out_b.outputs,  # type: ignore[arg-type]
                                                                              strict=True))
            return Tie(backends=(a, b), differing=differing, error=max(errors.values()))
        verdict = f"{blamed[0]} disagrees with the reference there"
    against = ", ".join(f"{name} by up to {err:.4g}" for name, err in errors.items())
    message = (f"outputs of {a} and {b} each pass the reference but differ bitwise"
               + (f"; where they differ, the reference is missed by {against}" if errors else "")
               + f": {verdict}.\n" + "\n".join(lines))
    on = case_a if blamed == [a] else case_b
    evidence = DivergenceEvidence(backends=(a, b), blamed=tuple(blamed), errors=errors,
                                  modes={a: dict(case_a.mode), b: dict(case_b.mode)}, found_on=b,
                                  other_backend=b if on is case_a else a)
    return case_finding(on, "backend_divergence", message, **evidence.to_dict())
