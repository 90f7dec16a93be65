"""Transforms checked like outputs: the kernel under ``jax.vmap`` or ``jax.vjp``.

A transformed example is a pure function of an extended input tuple, so a reproducer
saves that tuple in its ``.npz`` and reruns the transformed call:

- ``vmap``: every input gains a leading batch axis (per-example inputs drawn from
  ``spec.inputs(config)``, stacked). The kernel under ``jax.vmap`` must match the
  reference applied per example, and the kernel applied per example on the same backend.
  Outputs are named ``vmap(out)``.
- ``grad``: the inputs are the primal inputs, then one cotangent per floating-point
  output of the reference, then the primal layout ``arange(n_primals)`` (its length says
  where the primals end). The kernel's VJP (through its ``custom_vjp``, i.e. its backward
  kernels) must match the reference's VJP for every floating-point input; integer and
  bool inputs (metadata) are not differentiated. Outputs are named ``grad(argI)``.

``RULES`` is the one table of transforms (its names are ``spec.TRANSFORMS``), ``BARE`` the
rule of the bare kernel; ``rule(transform)`` picks one. ``bound(case)`` is the kernel bound
to the case's config under its transform: what every backend runs or compiles and what
blame traces.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from pallas_verify import reference
from pallas_verify.backends.wrap import grad_wrap, inexact, split, vmap_wrap
from pallas_verify.case import Case, Outcome
from pallas_verify.errors import InvalidArgument, InvalidSpec
from pallas_verify.findings import Finding
from pallas_verify.oracles.base import case_finding
from pallas_verify.reference import Truth, reference_outputs, reference_truth
from pallas_verify.spec import TRANSFORMS, KernelSpec, Tolerance

__all__ = [
    "BARE",
    "GRAD_TOLERANCE_FACTOR",
    "MAX_BATCH",
    "RULES",
    "Rule",
    "bound",
    "expected_outputs",
    "extend",
    "ground_truth",
    "judged",
    "per_example_findings",
    "rule",
]

#: Smallest batch ``vmap`` draws: a batch of one tests nothing the bare search does not.
MIN_BATCH = 2
#: Largest batch ``vmap`` draws (shrinks towards MIN_BATCH).
MAX_BATCH = 3
#: Under an explicit ``pv.Tolerance`` only (by default gradients are judged against their
#: own float64 ground truth): gradients sum over the axes the forward broadcast over (an
#: extra reduction per input), so their tolerance is the forward's times this factor, and
#: the absolute part is scaled by the largest expected gradient.
GRAD_TOLERANCE_FACTOR = 8.0

Arrays = tuple[np.ndarray, ...]


# --- vmap ---------------------------------------------------------------------------

def _vmap_extend(data: st.DataObject, spec: KernelSpec, config: Mapping[str, Any], inputs: Arrays,
                 more: Callable[[], Arrays]) -> Arrays:
    if not inputs:
        raise InvalidSpec(f"KernelSpec {spec.name!r} declares transforms=('vmap',) but its kernel takes "
                          "no inputs to batch; drop 'vmap' from its transforms.")
    batch = data.draw(st.integers(MIN_BATCH, MAX_BATCH), label="batch")
    examples = [inputs] + [more() for _ in range(batch - 1)]
    layouts = {tuple((x.shape, str(x.dtype)) for x in ex) for ex in examples}
    if len(layouts) > 1:
        raise InvalidSpec(f"KernelSpec {spec.name!r} declares 'vmap' but spec.inputs({dict(config)!r}) drew "
                          f"inputs of different shapes for one config: {sorted(layouts)}; draw shapes from the "
                          "config so every example of a batch has the same shapes.")
    return tuple(np.stack([ex[i] for ex in examples]) for i in range(len(inputs)))


def _unbatch(inputs: Arrays, b: int) -> Arrays:
    return tuple(np.asarray(x[b]) for x in inputs)


def _vmap_expected(fn: Callable[..., Any], config: Mapping[str, Any],
                   inputs: Arrays) -> tuple[list[np.ndarray], list[str]]:
    per_example = [reference_outputs(fn, config, _unbatch(inputs, b)) for b in range(len(inputs[0]))]
    outputs = [np.stack(leaves) for leaves in zip(*(outs for outs, _ in per_example), strict=True)]
    return outputs, [f"vmap({p})" for p in per_example[0][1]]


def _vmap_truth(fn: Callable[..., Any], config: Mapping[str, Any], inputs: Arrays) -> Truth:
    per_example = [reference_truth(fn, config, _unbatch(inputs, b)) for b in range(len(inputs[0]))]
    depth = max(t.depth for t in per_example)
    missing = next((t for t in per_example if t.outputs is None), None)
    if missing is not None:
        return Truth(outputs=None, reason=missing.reason, depth=depth)
    return Truth(outputs=[np.stack(leaves) for leaves in zip(*(t.outputs or [] for t in per_example), strict=True)],
                 depth=depth, shadow=_stacked([t.shadow for t in per_example]),
                 dots=_stacked([t.dots for t in per_example]), rounding=per_example[0].rounding if per_example else None)


def _stacked(shadows: Sequence[Sequence[np.ndarray | None] | None]) -> list[np.ndarray | None] | None:
    """Per output, the examples' shadows (float32, or rounded dots) stacked (None where an
    output has none)."""
    if any(s is None for s in shadows):
        return None
    return [None if any(x is None for x in leaves) else np.stack(leaves)
            for leaves in zip(*shadows, strict=True)]


# --- grad ---------------------------------------------------------------------------

def _grad_extend(data: st.DataObject, spec: KernelSpec, config: Mapping[str, Any], inputs: Arrays,
                 more: Callable[[], Arrays]) -> Arrays:
    import jax

    del more
    if not any(inexact(x.dtype) for x in inputs):
        raise InvalidSpec(f"KernelSpec {spec.name!r} declares transforms=('grad',) but drew no floating-point "
                          f"input (dtypes {[str(x.dtype) for x in inputs]}); drop 'grad' from its transforms.")
    try:
        shapes = jax.tree.leaves(jax.eval_shape(functools.partial(spec.reference, **config), *inputs))
    except Exception:  # the runner reports the reference's failure on this very example
        shapes = []
    floats = [s for s in shapes if inexact(s.dtype)]
    seed = data.draw(st.integers(0, 2**32 - 1), label="cotangent")
    rng = np.random.default_rng(seed)
    cotangents = tuple(rng.standard_normal(s.shape).astype(s.dtype) for s in floats)
    return (*inputs, *cotangents, np.arange(len(inputs), dtype=np.int32))


def _grad_reference(fn: Callable[..., Any], config: Mapping[str, Any]) -> reference.Bound:
    return reference.bound(fn, config, "grad", grad_wrap)


def _grad_truth(fn: Callable[..., Any], config: Mapping[str, Any], inputs: Arrays) -> Truth:
    """The reference's VJP evaluated in float64 (primals and cotangents upcast)."""
    return _grad_reference(fn, config).truth(inputs)


def _grad_expected(fn: Callable[..., Any], config: Mapping[str, Any], inputs: Arrays) -> tuple[list[np.ndarray], list[str]]:
    grads, _ = _grad_reference(fn, config).outputs(inputs)
    primals, _ = split(inputs)
    return grads, [f"grad(arg{i})" for i, x in enumerate(primals) if inexact(x.dtype)]


def _grad_tolerance(spec: KernelSpec, expected: Sequence[np.ndarray]) -> Tolerance | None:
    if not expected or spec.tolerance is None:
        return spec.tolerance
    base = spec.tolerance
    finite = [np.abs(e[np.isfinite(e)].astype(np.float64)) for e in expected]
    scale = max((float(f.max()) for f in finite if f.size), default=0.0)
    factor = GRAD_TOLERANCE_FACTOR
    return Tolerance(rtol=factor * base.rtol, atol=factor * (base.atol + base.rtol * scale))


# --- the table ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """How the kernel runs under one transform (or bare), how that extends an example,
    and how the expected is computed.

    Attributes:
      name: the transform's name (one of ``spec.TRANSFORMS``); None for the bare kernel.
      wrap: how a function (the kernel or the reference bound to a config) runs under it.
      extend: ``(data, spec, config, inputs, more) -> extended inputs``; ``more()`` draws
        another example's inputs for the same config. None: the inputs as drawn.
      expected: ``(reference, config, extended inputs) -> (outputs, paths)``, ``reference``
        the spec's reference function.
      truth: ``(reference, config, extended inputs) -> Truth``: the same in float64.
      tolerance: ``(spec, expected outputs) -> Tolerance`` used to compare under an
        explicit spec tolerance; None: the spec's.
      per_example: each example of a batch must also match the kernel run on that
        example alone (``per_example_findings``).
    """

    name: str | None
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]]
    extend: Callable[..., Arrays] | None
    expected: Callable[..., tuple[list[np.ndarray], list[str]]]
    truth: Callable[..., Truth]
    tolerance: Callable[[KernelSpec, Sequence[np.ndarray]], Tolerance | None] | None = None
    per_example: bool = False


def _unchanged(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


#: The bare kernel: no transform.
BARE = Rule(name=None, wrap=_unchanged, extend=None, expected=reference_outputs, truth=reference_truth)

RULES: Mapping[str, Rule] = {
    "vmap": Rule(name="vmap", wrap=vmap_wrap, extend=_vmap_extend, expected=_vmap_expected, truth=_vmap_truth,
                 per_example=True),
    "grad": Rule(name="grad", wrap=grad_wrap, extend=_grad_extend, expected=_grad_expected, truth=_grad_truth,
                 tolerance=_grad_tolerance),
}
assert tuple(RULES) == TRANSFORMS, "every transform of spec.TRANSFORMS needs exactly one rule"


def rule(transform: str | None) -> Rule:
    """The rule of ``transform`` (None: the bare kernel's); InvalidArgument naming the choices."""
    if transform is None:
        return BARE
    if transform not in RULES:
        raise InvalidArgument(f"transform={transform!r} is not one of {TRANSFORMS}.")
    return RULES[transform]


def bound(case: Case) -> Callable[..., Any]:
    """The case's kernel bound to its config, under its transform: what every backend runs
    or compiles and what blame traces, called on the case's (extended) inputs."""
    return rule(case.transform).wrap(functools.partial(case.spec.kernel, **case.config))


def extend(transform: str, data: st.DataObject, *, spec: KernelSpec, config: Mapping[str, Any],
           inputs: Arrays, more: Callable[[], Arrays]) -> Arrays:
    """The example's inputs extended with the transform's own draws (batch, cotangent)."""
    extension = rule(transform).extend
    return inputs if extension is None else extension(data, spec, config, inputs, more)


def expected_outputs(spec: KernelSpec, config: Mapping[str, Any], inputs: Arrays,
                     transform: str) -> tuple[list[np.ndarray], list[str]]:
    """The reference under ``transform`` on the extended ``inputs``: (outputs, paths)."""
    return rule(transform).expected(spec.reference, config, inputs)


def ground_truth(spec: KernelSpec, config: Mapping[str, Any], inputs: Arrays, transform: str) -> Truth:
    """The float64 ground truth of the reference under ``transform`` on the extended ``inputs``."""
    return rule(transform).truth(spec.reference, config, inputs)


def judged(case: Case, expected: Sequence[np.ndarray] | None) -> Case:
    """``case`` with the tolerance its transform compares with (grad under an explicit
    tolerance: scaled; by default the precision oracle needs no tolerance)."""
    scaled = rule(case.transform).tolerance
    if scaled is None or expected is None:
        return case
    tolerance = scaled(case.spec, expected)
    return dataclasses.replace(case, spec=dataclasses.replace(case.spec, tolerance=tolerance))


def per_example_findings(case: Case, outcome: Outcome, run: Callable[[Case], Outcome],
                         paths: Sequence[str], truth: Truth | None = None) -> list[Finding]:
    """vmap: each example of the batch must match the kernel run on that example alone
    (by default: the batched kernel's error against the float64 ground truth within the
    bound of the lone kernel's error)."""
    from pallas_verify.oracles.differential import compare_outputs

    if not rule(case.transform).per_example or outcome.outputs is None:
        return []
    for b in range(len(case.inputs[0])):
        alone = run(dataclasses.replace(case, inputs=_unbatch(case.inputs, b), transform=None))
        if not alone.ok or alone.outputs is None:
            continue  # the bare kernel's own failure is the bare search's finding
        batched = [np.asarray(out[b]) for out in outcome.outputs]
        table = compare_outputs([f"{p}[{b}]" for p in paths], batched, alone.outputs, case.spec.tolerance,
                                _example(truth, b))
        bad = [c.describe() for c in table if not c.ok]
        if bad:
            return [case_finding(case, "mismatch", f"under vmap, example {b} of the batch differs from the kernel "
                                 "run on that example alone:\n" + "\n".join(bad), outputs=bad, example=b)]
    return []


def _example(truth: Truth | None, b: int) -> Truth | None:
    """Example ``b`` of a vmap ground truth."""
    if truth is None or truth.outputs is None:
        return truth
    shadow = None if truth.shadow is None else [None if w is None else np.asarray(w[b]) for w in truth.shadow]
    dots = None if truth.dots is None else [None if d is None else np.asarray(d[b]) for d in truth.dots]
    return dataclasses.replace(truth, outputs=[np.asarray(t[b]) for t in truth.outputs], shadow=shadow, dots=dots)
