"""Reference outputs: at working precision, and a float64 ground truth.

The working-precision outputs are what the reference returns on the example's inputs
(jitted, config keys as keyword arguments). The ground truth is the same computation
with every floating-point value carried in float64: the reference is traced at working
precision, and its jaxpr is evaluated with float inputs upcast, float literals and
constants upcast, and every float dtype an operation names (``astype``,
``preferred_element_type``, ``iota``...) replaced by float64. Integer and bool values keep
their dtypes. x64 is enabled only around that evaluation (a thread-local context), never
around the kernel's run.

For outputs of a float narrower than 32 bits (bf16, f16, fp8) a second evaluation runs in
the same compiled function: the reference with every such narrow float value carried in
float32 instead (``Truth.shadow``). Its distance to the ground truth is the reference's
arithmetic noise at full resolution, which the output's own rounding hides
(``tolerance.compare`` judges narrow outputs with it).

When the reference takes a narrow float input and multiplies matrices, a third evaluation
in float64 rounds the float operands of every ``dot_general`` to that narrow dtype first
(``Truth.dots``): what a kernel that feeds a matrix unit at its inputs' precision computes
(the softmax weights of a FlashAttention-style kernel rounded to bf16 before ``p @ v``), a
rounding the reference may skip. The precision oracle holds a kernel to whichever of the
two it is nearer, per element. Where jax's device is an NVIDIA GPU whose matrix units take
float32 operands in TF32 at default precision (``_jax_compat.dots_in_tf32``), a reference
with float32 inputs and a dot gets the same third evaluation with its dot operands
rounded to TF32 (``Truth.rounding`` names which rounding was made).

When no ground truth can be had (the reference rounds with ``reduce_precision``, uses an
operation the evaluation cannot lift, or raises in float64), ``Truth.outputs`` is None and
``Truth.reason`` says why; ``Truth.depth`` is then the reduction depth visible in the
reference's jaxpr, which the fallback bound grows with (``tolerance.compare``).

Compiled references are kept in one bounded per-process cache keyed by the reference,
its config and its transform (``bound``); the per-example results of a run are kept in a
bounded ``References`` (the runner's).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.keys import Lru, bound_key
from pallas_verify.matrix_units import dot_rounding, has_dot, rounded
from pallas_verify.spec import KernelSpec

__all__ = ["Bound", "Expected", "NoGroundTruth", "References", "Truth", "bound", "forget_compiled", "ground_truth",
           "reduction_depth", "reference_outputs", "reference_truth"]

Arrays = Sequence[np.ndarray]
# Reductions whose rounding error grows with the number of terms (max/min/argmax are exact).
_SUMS = ("reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp")


class NoGroundTruth(Exception):
    """The reference cannot be evaluated in float64; the message says why."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Truth:
    """The float64 ground truth of one example.

    Attributes:
      outputs: one float64 array per floating-point output (other outputs: their working
        value, unused), or None when no ground truth could be had.
      reason: why there is no ground truth (None when there is one).
      depth: the largest number of terms rounded into one output element, as the
        reference's jaxpr shows it (dot contractions, sums, scans); 1 when none.
      shadow: per output, the reference evaluated with every float narrower than 32 bits
        carried in float32 (a float32 array) where the output is such a narrow float, else
        None; None when there is no ground truth.
      dots: per output, the float64 evaluation with every dot's float operands rounded to
        the narrowest float dtype of the inputs (module docstring); None when the
        reference has no narrow float input or no dot, or no ground truth.
      rounding: what ``dots`` rounded the operands to: a narrow dtype's name, or
        ``"tf32"`` (float32 inputs on a GPU whose matrix units take TF32).
    """

    outputs: list[np.ndarray] | None
    reason: str | None = None
    depth: int = 1
    shadow: list[np.ndarray | None] | None = None
    dots: list[np.ndarray | None] | None = None
    rounding: str | None = None


# --- one compiled reference per (reference, config, transform) ----------------------

@dataclasses.dataclass(eq=False)
class Bound:
    """A reference bound to one config (under a transform's ``wrap``), compiled once: its
    jit at working precision and, per input shapes, its float64 evaluation (``_lift``)."""

    fn: Callable[..., Any]
    _jit: Any = None
    _lifted: Lru[Any, tuple[Any, int, str | None]] = dataclasses.field(default_factory=lambda: Lru(maxsize=16))

    def outputs(self, inputs: Arrays) -> tuple[list[np.ndarray], list[str]]:
        """Its outputs (numpy, flattened) and their paths (``out``, ``out[1]``...)."""
        import jax

        if self._jit is None:
            self._jit = jax.jit(self.fn)
        result = jax.block_until_ready(self._jit(*inputs))
        leaves, _ = jax.tree_util.tree_flatten_with_path(result)
        return [np.asarray(leaf) for _, leaf in leaves], ["out" + jax.tree_util.keystr(path) for path, _ in leaves]

    def truth(self, inputs: Arrays) -> Truth:
        """Its outputs on ``inputs`` with every float value carried in float64 (and the
        float32 shadows of its narrow float outputs)."""
        import jax

        avals = tuple((tuple(np.shape(x)), str(np.asarray(x).dtype)) for x in inputs)
        compiled, depth, reason = self._lifted.get_or_make(avals, lambda: _lift(self.fn, avals))
        if compiled is None:
            return Truth(outputs=None, reason=reason, depth=depth)
        run, narrow, rounding = compiled
        try:
            with jax.enable_x64(True):
                outs, shadows, dots = jax.block_until_ready(run(*(_lift_value(np.asarray(x)) for x in inputs)))
                outputs = [np.asarray(o) for o in outs]
        except Exception as exc:
            return Truth(outputs=None, reason=f"the reference raised {type(exc).__name__} in float64: "
                         f"{_first_line(exc)}", depth=depth)
        shadow: list[np.ndarray | None] = [None] * len(outputs)
        for i, value in zip(narrow, shadows, strict=True):
            shadow[i] = np.asarray(value)
        rounded = [np.asarray(d) for d in dots] or None
        return Truth(outputs=outputs, depth=depth, shadow=shadow, dots=rounded, rounding=rounding if rounded else None)


# The one process-wide cache of compiled references (a long-lived worker stays small).
_BOUND: Lru[tuple[Any, ...], Bound] = Lru(maxsize=512)


def forget_compiled() -> None:
    """Drop every compiled reference of this process (a benchmark's cold start; a run never
    needs to: the cache is bounded)."""
    _BOUND.clear()


def bound(reference: Callable[..., Any], config: Mapping[str, Any], transform: str | None = None,
          wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None) -> Bound:
    """``reference`` bound to ``config`` and run under ``wrap`` (the ``transform``'s), compiled once."""
    def make() -> Bound:
        fn = functools.partial(reference, **dict(config))
        return Bound(fn if wrap is None else wrap(fn))

    return _BOUND.get_or_make(bound_key(reference, config, transform), make)


def reference_outputs(reference: Callable[..., Any], config: Mapping[str, Any],
                      inputs: Arrays) -> tuple[list[np.ndarray], list[str]]:
    """A spec's ``reference`` outputs (numpy, flattened) on one example, and their paths
    (``out``, ``out[1]``...)."""
    return bound(reference, config).outputs(inputs)


def reference_truth(reference: Callable[..., Any], config: Mapping[str, Any], inputs: Arrays) -> Truth:
    """The ground truth of a spec's ``reference`` on one example."""
    return bound(reference, config).truth(inputs)


def ground_truth(fn: Callable[..., Any], inputs: Arrays) -> Truth:
    """``fn``'s outputs on ``inputs`` with every float value carried in float64 (and the
    float32 shadows of its narrow float outputs)."""
    return _BOUND.get_or_make(("as given", *bound_key(fn, {})), lambda: Bound(fn)).truth(inputs)


# --- per example -------------------------------------------------------------------

class Expected(NamedTuple):
    """What the reference gives for one example: its outputs, their paths, and the float64
    ground truth (None under an explicit tolerance, which needs none)."""

    outputs: list[np.ndarray]
    paths: list[str]
    truth: Truth | None


class _Rule(Protocol):
    """How the expected of a (transformed) example is computed (``transforms.Rule``)."""

    name: str | None

    def expected(self, reference: Callable[..., Any], config: Mapping[str, Any],
                 inputs: Arrays) -> tuple[list[np.ndarray], list[str]]: ...

    def truth(self, reference: Callable[..., Any], config: Mapping[str, Any], inputs: Arrays) -> Truth: ...


class References:
    """The reference's Expected per example of one spec, each computed once; at most
    ``cache_size`` kept, the least recently used evicted first.

    Attributes:
      runs: examples whose reference was computed (not served from the cache).
      notes: why a ground truth was missing, once per reason (said once per spec).
    """

    def __init__(self, spec: KernelSpec, cache_size: int = 256) -> None:
        self.spec = spec
        self.runs = 0
        self.notes: set[str] = set()
        self._cache: Lru[str, Expected] = Lru(maxsize=cache_size)

    def expected(self, config: Mapping[str, Any], inputs: Arrays, key: str, rule: _Rule) -> Expected:
        """The Expected of the example ``key`` (``keys.example_key``), under ``rule``."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        self.runs += 1
        outputs, paths = rule.expected(self.spec.reference, config, tuple(inputs))
        truth = None
        if self.spec.tolerance is None:
            truth = rule.truth(self.spec.reference, config, tuple(inputs))
            if truth.reason:
                under = f" under {rule.name}" if rule.name else ""
                self.notes.add(f"no float64 ground truth{under}: {truth.reason}; outputs judged by a bound "
                               f"growing with the reduction depth ({truth.depth})")
        expected = Expected(outputs, paths, truth)
        self._cache.put(key, expected)
        return expected


# --- float64 ground truth -----------------------------------------------------------

def _is_float(dtype: Any) -> bool:
    import jax.numpy as jnp

    try:
        return bool(jnp.issubdtype(dtype, jnp.floating))
    except TypeError:
        return False


def _narrow(dtype: Any) -> bool:
    return _is_float(dtype) and np.dtype(dtype).itemsize < 4


def _target(dtype: Any, to: Any) -> Any:
    """The dtype a value of ``dtype`` is carried in: float64 lifts every float, float32
    only the floats narrower than 32 bits; anything else keeps its dtype."""
    if to == np.float64:
        return np.dtype(np.float64) if _is_float(dtype) else dtype
    return np.dtype(np.float32) if _narrow(dtype) else dtype


def _lift_value(x: Any, to: Any = np.float64) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return x
    target = _target(dtype, to)
    return x if target == dtype else x.astype(target)


def _lift_params(params: Mapping[str, Any], to: Any) -> dict[str, Any]:
    lifted = {}
    for key, value in params.items():
        if isinstance(value, np.dtype) and _is_float(value):
            value = _target(value, to)
        lifted[key] = value
    return lifted


def _evaluate(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], to: Any = np.float64,
              dots: Any = None) -> list[Any]:
    """Evaluate ``jaxpr`` with floating-point values carried in ``to`` (``_target``), the
    float operands of every dot rounded to ``dots`` first when it is a dtype (or TF32)."""
    return _jax_compat.evaluate(
        jaxpr, [_lift_value(c, to) for c in consts], args, functools.partial(_apply, to=to, dots=dots),
        literal=lambda v: _lift_value(np.asarray(v.val, dtype=v.aval.dtype), to),
    )


def _apply(eqn: Any, invals: list[Any], *, to: Any, dots: Any = None) -> list[Any]:
    name = eqn.primitive.name
    if name == "reduce_precision":
        raise NoGroundTruth("the reference rounds to a fixed precision with lax.reduce_precision")
    body = _jax_compat.call_body(eqn)
    if body is not None:
        return _evaluate(*body, invals, to=to, dots=dots)
    if dots is not None and name == "dot_general":  # a matrix unit's inputs, at the inputs' precision
        invals = [rounded(v, dots) if _is_float(v.dtype) else v for v in invals]
    return _jax_compat.bind(eqn, invals, _lift_params(_lift_bodies(name, eqn.params, to, dots), to))


def _lift_jaxpr(inner: Any, to: Any, dots: Any = None) -> Any:
    """A closed jaxpr param with its inputs, outputs and body carried in ``to``."""
    import jax

    if not hasattr(inner, "consts"):
        raise NoGroundTruth("the reference uses a primitive with an open jaxpr body")
    avals = [jax.ShapeDtypeStruct(v.aval.shape, _target(v.aval.dtype, to)) for v in inner.jaxpr.invars]
    return jax.make_jaxpr(lambda *xs: _evaluate(inner.jaxpr, inner.consts, xs, to, dots))(*avals)


def _lift_bodies(name: str, params: Mapping[str, Any], to: Any, dots: Any = None) -> dict[str, Any]:
    """``params`` with every jaxpr-valued entry (scan/while body, cond branches) lifted."""
    from jax.extend.core import jaxprs_in_params

    if name in _OPAQUE:
        raise NoGroundTruth(f"the reference uses {name}, whose body cannot be evaluated in float64")
    if not list(jaxprs_in_params(params)):
        return dict(params)
    lifted = {}
    for key, value in params.items():
        if hasattr(value, "jaxpr") and hasattr(value, "consts"):
            value = _lift_jaxpr(value, to, dots)
        elif isinstance(value, tuple) and value and all(hasattr(v, "consts") for v in value):
            value = tuple(_lift_jaxpr(v, to, dots) for v in value)
        elif list(jaxprs_in_params({key: value})):
            raise NoGroundTruth(f"the reference uses {name}, whose body cannot be evaluated in float64")
        lifted[key] = value
    return lifted


# Primitives whose bodies are not plain jax functions of their operands.
_OPAQUE = ("pallas_call", "core_map", "shard_map", "custom_linear_solve", "custom_transpose_call")


def reduction_depth(jaxpr: Any) -> int:
    """How many terms the reference rounds into its outputs, from its jaxpr: the sizes of
    every dot contraction, sum and cumulative op added up (a bound on the longest chain);
    a loop body's depth counts times its length where the jaxpr says it (scan)."""
    total = 0
    for eqn in jaxpr.eqns:
        name, params = eqn.primitive.name, eqn.params
        if name == "dot_general":
            (contracting, _), _ = params["dimension_numbers"]
            shape = eqn.invars[0].aval.shape
            total += math.prod(shape[d] for d in contracting)
        elif name in _SUMS:
            shape = eqn.invars[0].aval.shape
            axes = params.get("axes", (params.get("axis", 0),))
            total += math.prod(shape[a] for a in axes)
        inner = [reduction_depth(j) for j, _ in _jax_compat.sub_jaxprs(eqn)]
        if inner:
            total += max(inner) * int(params.get("length", 1))
    return max(total, 1)


def _lift(fn: Callable[..., Any], avals: tuple[tuple[tuple[int, ...], str], ...]) -> tuple[Any, int, str | None]:
    """(compiled evaluation or None, reduction depth, why not) of ``fn`` at ``avals``.

    Traced at working precision, then lifted and compiled under x64; the compiled function
    takes the float64 inputs and returns (float64 outputs, float32 shadows of the narrow
    float outputs, the float64 outputs with rounded dot operands or []). A failure is kept (``Bound``) like a success, so a spec without a
    ground truth pays for it once.
    """
    import jax

    try:
        closed = jax.make_jaxpr(fn)(*(jax.ShapeDtypeStruct(s, np.dtype(d)) for s, d in avals))
    except Exception as exc:  # the working-precision run reports a reference that cannot trace
        return None, 1, f"the reference could not be traced: {type(exc).__name__}: {_first_line(exc)}"
    depth = reduction_depth(closed.jaxpr)
    lifted = [jax.ShapeDtypeStruct(s, _target(np.dtype(d), np.float64)) for s, d in avals]
    narrow = [i for i, v in enumerate(closed.jaxpr.outvars) if _narrow(v.aval.dtype)]
    carried = [_target(np.dtype(d), np.float32) for _, d in avals]
    dots = dot_rounding([np.dtype(d) for _, d in avals]) if has_dot(closed.jaxpr) else None

    def both(*xs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        truth = _evaluate(closed.jaxpr, closed.consts, xs)
        rounded = [] if dots is None else _evaluate(closed.jaxpr, closed.consts, xs, dots=dots)
        if not narrow:
            return truth, [], rounded
        shadow = _evaluate(closed.jaxpr, closed.consts, [x.astype(d) for x, d in zip(xs, carried, strict=True)],
                           np.float32)
        return truth, [shadow[i] for i in narrow], rounded

    try:
        with jax.enable_x64(True):
            run = jax.jit(both).lower(*lifted).compile()
    except NoGroundTruth as exc:
        return None, depth, str(exc)
    except Exception as exc:
        return None, depth, f"the reference fails in float64: {type(exc).__name__}: {_first_line(exc)}"
    return (run, narrow, None if dots is None else getattr(dots, "name", dots)), depth, None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""
