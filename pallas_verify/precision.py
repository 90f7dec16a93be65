"""The precision oracle's rules: how far from the float64 ground truth a kernel may be.

Two rules, by the output's dtype (README "How outputs are judged" gives the measurements
behind every constant):

- float32 and wider, max norms over the output: ``max |kernel - float64| <= ERROR_RATIO x
  max |reference - float64| + max(FLOOR_EPS, sqrt(depth)) x eps x max |float64|``, where
  ``depth`` is the number of terms the reference rounds into an output (its jaxpr's dot
  contractions, sums and scan lengths, ``reference.reduction_depth``): what any float32
  algorithm of that depth may make, in another order or another form (a chunked
  recurrence against a token-serial reference), however exact the reference happens to
  be.
- Floats narrower than 32 bits (bf16, f16, fp8), per element, in steps of the output dtype
  at the float64 value: ``|kernel - float64| <= NARROW_RATIO x noise(x) + FLOOR_STEPS x
  step(x)`` at each float64 value x. The output's own rounding hides most of the
  reference's error, so its noise is measured where it shows: its float32 shadow's error
  (the reference with every narrow float carried in float32), or its own error beyond
  half a step (where it rounds inside), whichever is larger per element. That noise is
  modelled as ``a + b |x|``: an absolute part ``a`` (what cancellation next to large terms
  leaves, the largest noise over the ABSOLUTE_SHARE of elements nearest zero) and a relative
  part ``b`` (the largest remaining noise relative to the value). The reference always
  passes its own rule.

Where the reference takes narrow float inputs and multiplies matrices, a kernel may round
the operands of its dots to that narrow dtype, as feeding a matrix unit does (the softmax
weights of FlashAttention-style kernels, rounded before ``p @ v``). The float64 truth
evaluated with those roundings made (``reference.Truth.dots``) measures what they cost,
and both rules count its error as the reference's (the larger of the two per element).

Each rule returns, per element, whether it is close, and the figures its judgement
reports (``tolerance.Comparison``).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

__all__ = ["ABSOLUTE_SHARE", "ERROR_RATIO", "FLOOR_EPS", "FLOOR_STEPS", "NARROW_RATIO", "by_element", "by_norm",
           "floor_eps", "is_narrow", "steps"]

#: float32 and wider: the kernel's max error may be this many times the working-precision
#: reference's own (measured: at most 2.06 on correct kernels).
ERROR_RATIO = 4.0
#: Plus this many epsilons of the output dtype times the output's largest magnitude, or
#: sqrt(depth) of them where the computation rounds more terms into an output.
FLOOR_EPS = 2.0
#: Narrow floats: the kernel's error at an element may be this many times the reference's
#: noise there (measured: at most 3.2, upstream paged attention in f16, whose kernel
#: rounds at the output's precision five times where its reference rounds once)...
NARROW_RATIO = 8.0
#: ...plus this many steps of the output dtype at the float64 value: the final rounding's
#: half step and four more roundings at the output's scale. A floor of two epsilons at the
#: largest output would pass a bf16 accumulator at any depth, and in fp8 a kernel that
#: zeroes every small element.
FLOOR_STEPS = 2.5
#: The share of elements nearest zero whose largest noise is the absolute part of the
#: reference's noise model.
ABSOLUTE_SHARE = 0.1


def is_narrow(dtype: np.dtype) -> bool:
    """Floats narrower than 32 bits: bf16, f16, the fp8 family (``dtype`` is a float)."""
    return np.dtype(dtype).itemsize < 4


def steps(dtype: np.dtype, t: np.ndarray) -> np.ndarray:
    """The spacing of ``dtype`` at each float64 value of ``t`` (subnormal spacing near 0)."""
    info = ml_dtypes.finfo(dtype)
    exponent = np.floor(np.log2(np.maximum(np.abs(t), float(info.smallest_normal))))
    return np.exp2(np.minimum(exponent, info.maxexp - 1)) * float(info.eps)


def by_norm(a: np.ndarray, e: np.ndarray, t: np.ndarray, usable: np.ndarray, dtype: np.dtype,
            d: np.ndarray | None = None, depth: int = 1) -> tuple[np.ndarray, dict]:
    """float32 and wider: the kernel's max error within ERROR_RATIO x the reference's plus
    ``floor_eps(depth)`` eps at the largest output (``usable``: elements finite on all
    three sides); ``d``: the truth with rounded dot operands, whose error counts as the
    reference's too."""
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite elements are masked out
        k_err = np.where(usable, np.abs(a - t), 0.0)
        r_err = np.where(usable, _reference_error(e, t, d), 0.0)
    reference_error = float(r_err.max(initial=0.0))
    floor = floor_eps(depth) * float(ml_dtypes.finfo(dtype).eps) * float(np.abs(np.where(usable, t, 0.0)).max(initial=0.0))
    bound = ERROR_RATIO * reference_error + floor
    kernel_error = float(k_err.max(initial=0.0))
    margin = kernel_error / bound if bound else (math.inf if kernel_error else 0.0)
    return k_err <= bound, {"rule": "ground truth", "kernel_error": kernel_error, "reference_error": reference_error,
                            "bound": bound, "margin": margin, "at": _argmax(k_err)}


def floor_eps(depth: int) -> float:
    """The float32 rule's floor, in epsilons of the largest output: FLOOR_EPS, or sqrt(depth)
    for a computation that rounds more terms into each output."""
    return max(FLOOR_EPS, math.sqrt(max(depth, 1)))


def by_element(a: np.ndarray, e: np.ndarray, t: np.ndarray, w: np.ndarray | None, usable: np.ndarray,
               dtype: np.dtype, d: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Narrow floats, per element: ``|kernel - float64| <= NARROW_RATIO x (a + b |x|) +
    FLOOR_STEPS steps``, ``w`` the reference's float32 shadow (None: its own error only);
    ``d``: the truth with rounded dot operands, whose error counts as noise too."""
    step = steps(dtype, np.where(usable, t, 1.0))
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite elements are masked out
        k_err = np.where(usable, np.abs(a - t), 0.0)
        noise = np.where(usable, np.maximum(np.abs(e - t) - step / 2, 0.0), 0.0)
        for shadow in (w, d):
            if shadow is not None:
                noise = np.maximum(noise, np.where(usable & np.isfinite(shadow), np.abs(shadow - t), 0.0))
    absolute, relative = _noise_model(noise, np.where(usable, np.abs(t), np.inf))
    allowed = NARROW_RATIO * (absolute + relative * np.abs(np.where(usable, t, 0.0))) + FLOOR_STEPS * step
    ratio = k_err / allowed
    at = _argmax(ratio)
    return ratio <= 1, {"rule": "ground truth in steps", "noise": (absolute, relative),
                        "kernel_error": float(k_err[at] / step[at]) if at is not None else 0.0,
                        "reference_error": float(absolute + relative * abs(t[at])) if at is not None else 0.0,
                        "bound": float(allowed[at] / step[at]) if at is not None else 0.0,
                        "margin": float(ratio.max(initial=0.0)), "at": at}


def _reference_error(e: np.ndarray, t: np.ndarray, d: np.ndarray | None) -> np.ndarray:
    """Per element, the reference's error against the float64 truth, or the error of the
    truth with the dot operands rounded to the narrow input dtype (``reference.Truth.dots``)
    where that is larger: a kernel that feeds its matrix unit at its inputs' precision
    makes that rounding, which the reference may skip."""
    err = np.abs(e - t)
    return err if d is None else np.maximum(err, np.where(np.isfinite(d), np.abs(d - t), 0.0))


def _noise_model(noise: np.ndarray, magnitude: np.ndarray) -> tuple[float, float]:
    """(a, b) of the smallest ``a + b |x|`` over ``noise`` with ``a`` the largest noise of
    the ABSOLUTE_SHARE of elements nearest zero (ties included): ``noise <= a + b |x|``
    holds at every element."""
    flat, mags = noise.ravel(), magnitude.ravel()
    finite = np.isfinite(mags)
    if not finite.any():
        return 0.0, 0.0
    share = max(1, math.ceil(ABSOLUTE_SHARE * int(finite.sum())))
    cut = np.partition(mags[finite], share - 1)[share - 1]
    absolute = float(flat[mags <= cut].max(initial=0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(mags > cut, np.maximum(flat - absolute, 0.0) / mags, 0.0)
    return absolute, float(relative.max(initial=0.0))


def _argmax(err: np.ndarray) -> tuple[int, ...] | None:
    if not err.size or not err.max() > 0:
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
