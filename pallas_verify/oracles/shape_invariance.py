"""Shape-invariance oracle: the same rows computed inside a larger array give the same bits.

A Mosaic TPU kernel claims it: ``pltpu.CompilerParams.shape_invariant_numerics`` is True
unless the kernel sets it False (a ``pallas_call`` without compiler params is compiled
with the defaults). On the interpreters each example whose kernel makes the claim is
rerun with its inputs embedded in arrays twice as long along a dimension its pallas_call
tiles along one grid axis (the second half a copy of the first; ``_jax_compat.shape_plan``
finds the axis), and the outputs, sliced back to the first half, must equal the example's
own bit for bit. A kernel whose numerics depend on the array's extent (a tile or an
accumulation order chosen from the shape, a scale computed from ``pl.num_programs``) gives
different bits: a ``shape_invariance`` finding.

It applies where the spec allows it: the reference, run on the grown inputs and sliced
back, must give the example's reference outputs (within a loose tolerance). Where it does
not (a scan from the end, a softmax over the grown axis: rows that depend on the others)
the rerun is left out, as it is for a kernel that changes its inputs before the call or
its outputs after it, makes several calls, declares ``shape_invariant_numerics=False``,
or rejects the grown inputs; each reason is a note of the kernel's report. The rerun runs
once per config, input shapes and backend: what it exposes depends on shapes, not values.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding
from pallas_verify.keys import config_key
from pallas_verify.oracles.base import bitwise_differences, case_finding
from pallas_verify.reference import reference_outputs

__all__ = ["Grown", "ShapeRerun", "grown", "sliced"]

#: How many times longer the grown arrays are.
FACTOR = 2
#: Shape reruns per backend and kernel, on its first example and one every ``SPACING``
#: examples after: each costs a compile and a run on inputs twice as long, and a kernel
#: that picks a tile or an order from the array's shape does so on any shape (so a short
#: run checks once, a ci run of 10 examples twice, a longer one three times).
RERUNS_PER_BACKEND = 3
SPACING = 5
# The reference on grown inputs, sliced back, must give the example's within this (it only
# tells rows that depend on the others from rows that do not).
_RTOL = _ATOL = 1e-3


def grown(inputs: Sequence[np.ndarray], dims: Sequence[int | None]) -> tuple[np.ndarray, ...]:
    """``inputs``, each with ``FACTOR`` copies of itself along its dimension of ``dims``."""
    return tuple(x if d is None else np.concatenate([x] * FACTOR, axis=d) for x, d in zip(inputs, dims, strict=True))


def sliced(outputs: Sequence[np.ndarray], like: Sequence[np.ndarray], dims: Sequence[int]) -> tuple[np.ndarray, ...] | None:
    """``outputs`` cut back to the shapes of ``like`` along ``dims``; None when an output is not
    ``like``'s grown ``FACTOR`` times along its dimension (the kernel did not grow with it)."""
    if len(outputs) != len(like) or len(dims) != len(like):
        return None
    cut = []
    for out, base, d in zip(outputs, like, dims, strict=True):
        expected = tuple(n * FACTOR if i == d else n for i, n in enumerate(np.shape(base)))
        if np.shape(out) != expected:
            return None
        cut.append(np.take(out, np.arange(np.shape(base)[d]), axis=d))
    return tuple(cut)


@dataclasses.dataclass(frozen=True)
class Grown:
    """An example's inputs grown for its shape_invariance rerun (``ShapeRerun.due``), and
    the plan that says along which dimensions (and how to cut the outputs back)."""

    inputs: tuple[np.ndarray, ...]
    plan: Any  # _jax_compat.ShapePlan


@dataclasses.dataclass
class ShapeRerun:
    """The shape-invariance reruns of one runner: plans traced once per kernel config and
    input shapes, reruns once per config, shapes and backend; why a kernel has none is
    added to ``notes`` (the kernel's report notes).

    The rerun itself rides in the example's one metamorphic rerun (``reruns``): ``due``
    gives its grown inputs before the base run is judged, ``applies`` says whether the
    spec allows it once the reference is known, and ``judge`` compares its outputs.
    """

    notes: set[str]
    _plans: collections.OrderedDict[Any, Any] = dataclasses.field(default_factory=collections.OrderedDict)
    _done: set[Any] = dataclasses.field(default_factory=set)
    _asked: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)  # backend -> examples

    def due(self, case: Case) -> Grown | None:
        """The grown inputs of ``case``'s rerun when one is due (counted as done), else None:
        on a backend's first example and one every ``SPACING`` after, at most
        ``RERUNS_PER_BACKEND``, each config and input shapes once."""
        if case.transform is not None or "tpu" not in case.spec.platforms:
            return None
        shapes = tuple((np.shape(x), str(np.asarray(x).dtype)) for x in case.inputs)
        key = (case.backend, config_key(case.config), shapes)
        self._asked[case.backend] += 1
        ran = sum(done[0] == case.backend for done in self._done)
        if key in self._done or (self._asked[case.backend] - 1) % SPACING or ran >= RERUNS_PER_BACKEND:
            self.notes.add(f"shape_invariance: checked on a backend's first example and one every {SPACING} after, "
                           f"at most {RERUNS_PER_BACKEND} (each rerun compiles and runs the kernel on inputs twice "
                           "as long)")
            return None
        self._done.add(key)
        plan = self._plan(case, shapes)
        if isinstance(plan, str):
            self._skip(case, plan)
            return None
        return Grown(grown(case.inputs, plan.inputs), plan)

    def applies(self, case: Case, rerun: Grown, expected: Sequence[np.ndarray]) -> bool:
        """Whether the spec allows the rerun: the reference on the grown inputs, cut back,
        gives the example's reference outputs (a note says why not)."""
        try:
            wider, _ = reference_outputs(case.spec.reference, case.config, rerun.inputs)
        except Exception as exc:  # the spec's reference rejects grown inputs: the spec does not allow it
            return self._skip(case, f"the reference rejects inputs grown along the tiled axis ({type(exc).__name__})")
        reference = sliced(wider, expected, rerun.plan.outputs)
        if reference is None or not all(_close(a, b) for a, b in zip(reference, expected, strict=True)):
            return self._skip(case, "the reference's rows depend on the other rows along the tiled axis")
        return True

    def cut(self, case: Case, rerun: Grown, base: Outcome, variant: Outcome) -> tuple[np.ndarray, ...] | None:
        """The rerun's outputs cut back to the example's rows, or None (a note says why:
        the kernel rejects the grown inputs, or its outputs do not grow with them)."""
        outputs = sliced(variant.outputs, base.outputs, rerun.plan.outputs) if (
            variant.outputs is not None and base.outputs is not None) else None
        if variant.error is not None or outputs is None:
            why = variant.error.summary()[:200] if variant.error is not None else "its outputs do not grow with them"
            self._skip(case, f"the kernel does not take inputs grown along the tiled axis ({why})")
            return None
        return outputs

    def finding(self, case: Case, rerun: Grown, base: Outcome, outputs: Sequence[np.ndarray],
                paths: list[str]) -> Finding | None:
        """The ``shape_invariance`` finding when the cut-back ``outputs`` differ from the
        base run's in any bit."""
        assert base.outputs is not None
        lines = bitwise_differences(paths, base.outputs, outputs)
        if not lines:
            return None
        plan = rerun.plan
        claim = "its pallas_call claims shape_invariant_numerics=True (pltpu.CompilerParams' default)"
        message = (f"the same rows give different bits inside a larger array: with every input the pallas_call of "
                   f"{plan.call!r} tiles along grid axis {plan.grid_axis} grown {FACTOR} times along that dimension "
                   f"(a copy appended; dimensions {list(plan.inputs)} per input), the outputs cut back to the "
                   f"example's rows differ from the example's own, though {claim} and the reference gives the "
                   "same rows. Its numerics depend on the array's shape (a tile or an accumulation order chosen "
                   "from it, a scale from pl.num_programs); make them not, or declare "
                   "pltpu.CompilerParams(shape_invariant_numerics=False):\n" + "\n".join(lines))
        return case_finding(case, "shape_invariance", message, outputs=lines, grown_dims=list(plan.inputs),
                            grid_axis=plan.grid_axis, grown_shapes=[list(np.shape(x)) for x in rerun.inputs])

    def _plan(self, case: Case, shapes: Any) -> Any:
        key = (case.spec.kernel, config_key(case.config), shapes)
        if key not in self._plans:
            self._plans[key] = _traced_plan(case)
            if len(self._plans) > 256:
                self._plans.popitem(last=False)
        return self._plans[key]

    def _skip(self, case: Case, reason: str) -> bool:
        self.notes.add(f"{case.backend}: the shape_invariance rerun was left out ({reason})")
        return False


def _traced_plan(case: Case) -> Any:
    import jax

    from pallas_verify.backends.interpreters import trace_context

    try:
        with trace_context(case.spec.platforms):
            closed = jax.make_jaxpr(lambda *xs: case.spec.kernel(*xs, **case.config))(*case.inputs)
    except Exception as exc:  # the base run traced it; a kernel that does not trace twice has no plan
        return f"the kernel could not be traced again ({type(exc).__name__})"
    return _jax_compat.shape_plan(closed)


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if not (np.issubdtype(a.dtype, np.floating) or a.dtype.kind == "V" or str(a.dtype) == "bfloat16"):
        return bool(np.array_equal(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return bool(np.allclose(a64, b64, rtol=_RTOL, atol=_ATOL, equal_nan=True))
