"""The one comparison of outputs: the precision oracle, explicit tolerances, ULP, NaN/inf.

By default a floating-point output is judged against a float64 ground truth (the
reference evaluated in float64, ``reference.py``) by the rules of ``precision.py``: max
norms for float32 and wider, per element in steps of the dtype for narrower floats. When
no ground truth could be had, the bound grows with the reduction depth of the reference
(``FALLBACK_EPS``).

An explicit ``pv.Tolerance`` overrides both: then default tolerances per dtype follow (and are at least as careful as) the table that
``torch.testing.assert_close`` uses: floating point compares with
``|actual - expected| <= atol + rtol * |expected|``; integers and bool compare exactly.
NaN and inf positions must match in both directions: a NaN where the reference has a
number is a mismatch, and so is a number where the reference has NaN.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from pallas_verify import precision
from pallas_verify.precision import ERROR_RATIO, FLOOR_EPS, FLOOR_STEPS, NARROW_RATIO
from pallas_verify.spec import Tolerance

__all__ = ["ERROR_RATIO", "FALLBACK_EPS", "FLOOR_EPS", "FLOOR_STEPS", "NARROW_RATIO", "SIGNIFICANT", "Comparison", "compare",
           "default_tolerance", "element_errors", "ulp_distance"]

#: The headline's relative and ULP errors are over the elements at least this share of the
#: output's largest |reference|: nearer zero, an output is dominated by cancellation.
SIGNIFICANT = 2.0**-10

#: Without a ground truth: |kernel - reference| <= FALLBACK_EPS * eps * sqrt(depth) *
#: max |reference| (plus the dtype's default tolerance), depth from the reference's jaxpr.
FALLBACK_EPS = 4.0

_FLOAT_DEFAULTS: dict[str, Tolerance] = {
    "float64": Tolerance(rtol=1e-7, atol=1e-7),
    "float32": Tolerance(rtol=1.3e-6, atol=1e-5),
    "float16": Tolerance(rtol=1e-3, atol=1e-5),
    "bfloat16": Tolerance(rtol=1.6e-2, atol=1e-5),
    # fp8: one ULP at 1.0 is 2**-3 (e4m3) or 2**-2 (e5m2).
    "float8_e4m3fn": Tolerance(rtol=1.25e-1, atol=1e-3),
    "float8_e5m2": Tolerance(rtol=2.5e-1, atol=1e-3),
}
_EXACT = Tolerance(rtol=0.0, atol=0.0)


def default_tolerance(dtype: np.dtype) -> Tolerance:
    """The tolerance for comparing outputs of ``dtype`` (exact for ints and bool)."""
    dtype = np.dtype(dtype)
    if dtype.name in _FLOAT_DEFAULTS:
        return _FLOAT_DEFAULTS[dtype.name]
    if _is_float(dtype):
        info = ml_dtypes.finfo(dtype)
        return Tolerance(rtol=float(info.eps), atol=1e-3)
    return _EXACT


def _is_float(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.floating) or dtype.name in _FLOAT_DEFAULTS or (
        dtype.kind == "V" and dtype.name not in _ML_INTEGERS)


_ML_INTEGERS = frozenset({"int2", "int4", "uint2", "uint4"})  # ml_dtypes' sub-byte integers: exact


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Number of representable values between ``actual`` and ``expected`` (int64).

    Both arrays are cast to the dtype of ``actual``; NaN positions give 0 where both are
    NaN and the maximum int64 otherwise. Integers give the absolute difference.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    if not _is_float(actual.dtype):
        return np.abs(actual.astype(np.int64) - expected.astype(np.int64))
    itype = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[actual.dtype.itemsize]
    a = _ordered(actual.view(itype))
    e = _ordered(np.asarray(expected, dtype=actual.dtype).view(itype))
    dist = np.abs(a - e)
    nan_a, nan_e = _isnan(actual), _isnan(expected)
    dist = np.where(nan_a & nan_e, 0, dist)
    return np.where(nan_a ^ nan_e, np.iinfo(np.int64).max, dist)


def element_errors(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``|actual - expected|`` per element in float64: 0 where both are NaN or the same
    infinity, ``inf`` where a NaN or an infinity meets anything else (what blame maps)."""
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a - e)
    agree = (np.isnan(a) & np.isnan(e)) | (np.isinf(a) & (a == e))
    return np.where(agree, 0.0, np.where(np.isnan(err), np.inf, err))


def _ordered(bits: np.ndarray) -> np.ndarray:
    """Map sign-magnitude float bits to integers ordered like the floats (-0 == +0)."""
    wide = bits.astype(np.int64)
    sign_bit = np.int64(1) << (8 * bits.dtype.itemsize - 1)
    return np.where(wide < 0, -(wide + sign_bit), wide)


def _isnan(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return np.isnan(x.astype(np.float64)) if _is_float(x.dtype) else np.zeros(x.shape, bool)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Comparison:
    """How one output compares with its expected value.

    Attributes:
      path: where the output sits in the kernel's result, e.g. ``"out[0]"``.
      shape, dtype: of the actual output.
      bad: boolean mask of mismatching elements (None when shapes or dtypes differ).
      problem: a structural mismatch (shape/dtype/structure), else None.
      max_abs, max_rel, max_ulp: largest errors against the working-precision reference
        over the elements where both sides are finite (NaN/inf mismatches are counted in
        ``bad`` and ``nonfinite`` only); for floats, the relative and ULP errors only over
        the elements at least ``SIGNIFICANT`` of ``scale`` (the others are dominated by
        cancellation, where a tiny absolute error is a huge relative one).
      scale: the largest |reference| over the finite elements (floats; 0 otherwise).
      first_bad: index of the first bad element in row-major order, or None.
      nonfinite: one phrase per kind of NaN/inf disagreement, most frequent first, e.g.
        ``"1024 of 1024 elements NaN where float64 is finite"``.
      finite: how many elements are finite on both sides (the ones the errors are over).
      rule: how the values were judged: "ground truth" (the default oracle for float32 and
        float64 outputs: max norms), "ground truth in steps" (its per-element form for
        floats narrower than 32 bits: errors in steps of the output dtype at the float64
        value), "depth" (no ground truth: bound from the reduction depth), "tolerance" (an
        explicit ``pv.Tolerance``), "exact" (integers, bool).
      kernel_error, reference_error, bound: "ground truth": max |kernel - float64|, max
        |reference - float64| and the allowed kernel error. "ground truth in steps": at the
        element most over (or nearest) its bound, the kernel's error and its bound in steps,
        and the reference's noise there (absolute). "depth": the largest bound. Else 0.
      noise: "ground truth in steps": the reference's noise model (a, b), noise(x) = a +
        b |x| (``precision.by_element``); else None.
      margin: the largest (error / allowed error) over the elements (above 1: bad).
      worst: index of the element with the largest margin, with (kernel, reference, float64
        or None) values there; None when nothing differs.
      note: why there is no ground truth ("depth" only).
      floor_eps: "ground truth": the floor in epsilons of max |float64| (FLOOR_EPS, or
        sqrt of the reference's depth: ``precision.floor_eps``).
    """

    path: str
    shape: tuple[int, ...]
    dtype: str
    bad: np.ndarray | None
    problem: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: int = 0
    scale: float = 0.0
    first_bad: tuple[int, ...] | None = None
    nonfinite: tuple[str, ...] = ()
    finite: int = 0
    rule: str = "exact"
    kernel_error: float = 0.0
    reference_error: float = 0.0
    bound: float = 0.0
    noise: tuple[float, float] | None = None
    margin: float = 0.0
    worst: tuple[tuple[int, ...], tuple[float, float, float | None]] | None = None
    note: str | None = None
    floor_eps: float = FLOOR_EPS

    @property
    def n_bad(self) -> int:
        return int(self.bad.sum()) if self.bad is not None else 0

    @property
    def ok(self) -> bool:
        return self.problem is None and self.n_bad == 0

    def describe(self) -> str:
        """One line: shape, dtype, count and share of bad elements, NaN/inf disagreements,
        the judgement and the worst errors over the finite elements."""
        head = f"{self.path}: shape={self.shape} dtype={self.dtype}"
        if self.problem:
            return f"{head}: {self.problem}"
        size = max(int(np.prod(self.shape)), 1)
        parts = [f"{head}: {self.n_bad}/{size} bad ({100 * self.n_bad / size:.3g}%)"]
        if self.nonfinite:
            parts.append("; ".join(self.nonfinite))
        if self.finite:
            over = f"over the {_elements(self.finite)} finite on both sides: " if self.nonfinite else ""
            scale = f" (scale {self.scale:.3g}: max |reference|)" if self.scale else ""
            near = f" over the elements above 1/{1 / SIGNIFICANT:g} of the scale" if self.scale else ""
            parts.append(f"{over}{self.judgement()}max abs {self.max_abs:.3g}{scale}, max rel {self.max_rel:.3g} "
                         f"and max ULP {self.max_ulp}{near}")
        return ", ".join(parts) + f", first bad at {self.first_bad}"

    def _depth_text(self) -> str:
        return f" (sqrt of its depth {round(self.floor_eps ** 2)})" if self.floor_eps > FLOOR_EPS else ""

    def judgement(self) -> str:
        """The oracle's reasoning: errors, ratio, bound and worst element (empty when exact)."""
        where = ""
        if self.worst is not None:
            idx, (k, r, t) = self.worst
            truth = "" if t is None else f", float64 {t:.7g}"
            where = f"; worst at {idx}: kernel {k:.7g}, reference {r:.7g}{truth}"
        if self.rule == "ground truth":
            ratio = self.kernel_error / self.reference_error if self.reference_error else float("inf")
            ratio_text = f"{ratio:.3g}x" if self.kernel_error else "0x"
            return (f"kernel error {self.kernel_error:.3g} vs float64, reference error {self.reference_error:.3g} "
                    f"(ratio {ratio_text}), bound {self.bound:.3g} = {ERROR_RATIO:g} x reference error + "
                    f"{self.floor_eps:.3g} eps x max|float64|{self._depth_text()}{where}; ")
        if self.rule == "ground truth in steps":
            a, b = self.noise or (0.0, 0.0)
            return (f"kernel error {self.kernel_error:.3g} steps of {self.dtype} vs float64 (per element; a step: the "
                    f"{self.dtype} spacing at the float64 value), bound there {self.bound:.3g} steps = "
                    f"{NARROW_RATIO:g} x reference noise {self.reference_error:.3g} ({a:.3g} + {b:.3g} x |float64|: "
                    f"its error beyond its own rounding) + {FLOOR_STEPS:g} steps, kernel error / bound "
                    f"{self.margin:.3g}{where}; ")
        if self.rule == "depth":
            return (f"no float64 ground truth ({self.note}): |kernel - reference| bound {self.bound:.3g} from "
                    f"reduction depth{where}; ")
        return f"{where[2:]}; " if where else ""


def compare(path: str, actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance | None,
            truth: np.ndarray | None = None, depth: int = 1, note: str | None = None,
            shadow: np.ndarray | None = None, dots: np.ndarray | None = None) -> Comparison:
    """Compare one output with its expected value.

    ``tolerance`` (an explicit ``pv.Tolerance``) wins; else ``truth`` (the float64 ground
    truth) selects the precision oracle, with ``shadow`` (the reference carried in float32,
    for a narrow float output) measuring the reference's noise, and ``dots`` (the float64
    evaluation with its dot operands rounded to the narrow input dtype: ``Truth.dots``)
    counting as the reference's error too; else the bound grows with
    ``depth`` (``note`` says why there is no ground truth). Integers and bool are exact;
    NaN/inf positions must match ``expected`` both ways.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    base = {"path": path, "shape": tuple(actual.shape), "dtype": str(actual.dtype)}
    if actual.shape != expected.shape:
        return Comparison(**base, bad=None, problem=f"shape {actual.shape} != expected {expected.shape}")
    if actual.dtype != expected.dtype:
        return Comparison(**base, bad=None, problem=f"dtype {actual.dtype} != expected {expected.dtype}")
    if not _is_float(actual.dtype):
        bad = actual != expected
        wide = expected.astype(np.float64)
        diff = np.abs(actual.astype(np.float64) - wide)
        with np.errstate(divide="ignore", invalid="ignore"):  # relative to a 0: inf when they differ
            rel = np.where(diff == 0, 0.0, diff / np.abs(wide))
        return _summarise(base, bad, diff, rel, ulp_distance(actual, expected), finite=bad.size,
                          margin=np.inf if bad.any() else 0.0)
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    special = ~np.isfinite(a) | ~np.isfinite(e)
    same_special = (np.isnan(a) & np.isnan(e)) | ((a == e) & np.isinf(e))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # relative to a 0: inf when they differ
        diff = np.where(special, 0, np.abs(a - e))
        rel = np.where(diff == 0, 0.0, diff / np.abs(e))
    t = None if truth is None or np.shape(truth) != actual.shape else np.asarray(truth, np.float64)
    if tolerance is None and t is not None:
        w = None if shadow is None or np.shape(shadow) != actual.shape else np.asarray(shadow, np.float64)
        d = None if dots is None or np.shape(dots) != actual.shape else np.asarray(dots, np.float64)
        close, extra = _against_truth(a, e, t, w, d, special, actual.dtype, depth)
    elif tolerance is None:
        close, extra = _by_depth(a, e, diff, special, actual.dtype, depth, note)
    else:
        allowed = tolerance.atol + tolerance.rtol * np.abs(e)
        close = diff <= allowed
        extra = {"rule": "tolerance", "worst": _worst(diff, a, e, None), "margin": _margin(diff, allowed, special)}
    bad = np.where(special, ~same_special, ~close)
    scale = float(np.abs(np.where(special, 0.0, e)).max(initial=0.0))
    significant = ~special & (np.abs(e) >= SIGNIFICANT * scale)  # not dominated by cancellation
    ulp = np.where(significant, ulp_distance(actual, expected), 0)
    mismatched = special & ~same_special
    return _summarise(base, bad, diff, np.where(significant, rel, 0), ulp, finite=int((~special).sum()), scale=scale,
                      nonfinite=_nonfinite(a[mismatched], e[mismatched], None if t is None else t[mismatched],
                                           bad.size), **extra)


def _against_truth(a: np.ndarray, e: np.ndarray, t: np.ndarray, w: np.ndarray | None, d: np.ndarray | None,
                   special: np.ndarray, dtype: np.dtype, depth: int = 1) -> tuple[np.ndarray, dict]:
    """The precision oracle (``precision.py``): per element for narrow floats, else max norms."""
    usable = ~special & np.isfinite(t)
    if precision.is_narrow(dtype):
        close, extra = precision.by_element(a, e, t, w, usable, dtype, d)
    else:
        close, extra = precision.by_norm(a, e, t, usable, dtype, d, depth)
        extra["floor_eps"] = precision.floor_eps(depth)
    at = extra.pop("at")
    extra["worst"] = None if at is None else (at, (float(a[at]), float(e[at]), float(t[at])))
    # Where the float64 truth itself is not finite (while both outputs are), it cannot judge
    # the element: the kernel is held to the reference by the dtype's table instead.
    tol = default_tolerance(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        by_table = np.abs(a - e) <= tol.atol + tol.rtol * np.abs(e)
    return np.where(usable, close, special | by_table), extra


def _by_depth(a: np.ndarray, e: np.ndarray, diff: np.ndarray, special: np.ndarray, dtype: np.dtype,
              depth: int, note: str | None) -> tuple[np.ndarray, dict]:
    """No ground truth: the dtype's default tolerance plus a term growing with sqrt(depth)."""
    tol = default_tolerance(dtype)
    scale = float(np.abs(np.where(special, 0.0, e)).max(initial=0.0))
    grown = FALLBACK_EPS * _eps(dtype) * np.sqrt(max(depth, 1)) * scale
    bound = tol.atol + tol.rtol * np.abs(e) + grown
    return diff <= bound, {"rule": "depth", "bound": float(np.max(bound, initial=0.0)),
                           "worst": _worst(diff, a, e, None), "note": note or "none given",
                           "margin": _margin(diff, bound, special)}


def _margin(err: np.ndarray, allowed: np.ndarray, special: np.ndarray) -> float:
    """The largest err / allowed over the elements finite on both sides (inf where an error
    meets an allowance of 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(special | (err == 0), 0.0, err / allowed)
    return float(ratio.max(initial=0.0))


_CLASSES = ("finite", "NaN", "inf", "-inf")


def _classes(x: np.ndarray) -> np.ndarray:
    """Index into _CLASSES of each element."""
    return np.where(np.isnan(x), 1, np.where(np.isposinf(x), 2, np.where(np.isneginf(x), 3, 0)))


def _nonfinite(a: np.ndarray, e: np.ndarray, t: np.ndarray | None, size: int) -> tuple[str, ...]:
    """Phrases counting the NaN/inf disagreements of (kernel, reference) pairs, most
    frequent first (then in order of appearance); the float64 truth is named where it
    agrees with the reference."""
    if not a.size:
        return ()
    kernel, reference = _classes(a), _classes(e)
    pairs, first, counts = np.unique(kernel * 4 + reference, return_index=True, return_counts=True)
    phrases = []
    order = sorted(zip(pairs.tolist(), counts.tolist(), first.tolist(), strict=True), key=lambda p: (-p[1], p[2]))
    for pair, count, _ in order:
        k, r = divmod(pair, 4)
        group = kernel * 4 + reference == pair
        who = "float64" if t is not None and bool(np.all(_classes(t[group]) == r)) else "the reference"
        phrases.append(f"{count} of {_elements(size)} {_CLASSES[k]} where {who} is {_CLASSES[r]}")
    return tuple(phrases)


def _elements(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


def _eps(dtype: np.dtype) -> float:
    return float(ml_dtypes.finfo(dtype).eps)


def _worst(err: np.ndarray, a: np.ndarray, e: np.ndarray, t: np.ndarray | None) -> tuple | None:
    if not err.size or not err.max() > 0:
        return None
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    return (tuple(int(i) for i in idx), (float(a[idx]), float(e[idx]), None if t is None else float(t[idx])))


def _summarise(base: dict, bad: np.ndarray, diff: np.ndarray, rel: np.ndarray, ulp: np.ndarray,
               **extra: object) -> Comparison:
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)) if bad.any() else None
    return Comparison(
        **base,
        bad=bad,
        max_abs=float(diff.max(initial=0.0)),
        max_rel=float(rel.max(initial=0.0)),
        max_ulp=int(ulp.max(initial=0)),
        first_bad=first,
        **extra,  # type: ignore[arg-type]
    )
