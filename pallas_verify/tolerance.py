"""Dtype-aware tolerances, ULP distance, and element-wise comparison of outputs.

Default tolerances per dtype follow (and are at least as careful as) the table that
``torch.testing.assert_close`` uses: floating point compares with
``|actual - expected| <= atol + rtol * |expected|``; integers and bool compare exactly.
NaN and inf positions must match in both directions: a NaN where the reference has a
number is a mismatch, and so is a number where the reference has NaN.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from pallas_verify.spec import Tolerance

__all__ = ["Comparison", "compare", "default_tolerance", "ulp_distance"]

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
      max_abs, max_rel, max_ulp: largest errors over the elements where both sides are
        finite (NaN/inf mismatches are counted in ``bad`` only).
      first_bad: index of the first bad element in row-major order, or None.
    """

    path: str
    shape: tuple[int, ...]
    dtype: str
    bad: np.ndarray | None
    problem: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: int = 0
    first_bad: tuple[int, ...] | None = None

    @property
    def n_bad(self) -> int:
        return int(self.bad.sum()) if self.bad is not None else 0

    @property
    def ok(self) -> bool:
        return self.problem is None and self.n_bad == 0

    def describe(self) -> str:
        """One line: shape, dtype, count and share of bad elements, worst errors, first bad."""
        head = f"{self.path}: shape={self.shape} dtype={self.dtype}"
        if self.problem:
            return f"{head}: {self.problem}"
        size = max(int(np.prod(self.shape)), 1)
        return (
            f"{head}: {self.n_bad}/{size} bad ({100 * self.n_bad / size:.3g}%), "
            f"max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}, "
            f"max ULP {self.max_ulp}, first bad at {self.first_bad}"
        )


def compare(path: str, actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance | None) -> Comparison:
    """Compare one output with its expected value under ``tolerance`` (None: by dtype)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    base = {"path": path, "shape": tuple(actual.shape), "dtype": str(actual.dtype)}
    if actual.shape != expected.shape:
        return Comparison(**base, bad=None, problem=f"shape {actual.shape} != expected {expected.shape}")
    if actual.dtype != expected.dtype:
        return Comparison(**base, bad=None, problem=f"dtype {actual.dtype} != expected {expected.dtype}")
    tol = tolerance or default_tolerance(actual.dtype)
    if not _is_float(actual.dtype):
        bad = actual != expected
        wide = expected.astype(np.float64)
        diff = np.abs(actual.astype(np.float64) - wide)
        with np.errstate(divide="ignore", invalid="ignore"):  # relative to a 0: inf when they differ
            rel = np.where(diff == 0, 0.0, diff / np.abs(wide))
        return _summarise(base, bad, diff, rel, ulp_distance(actual, expected))
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        rel = diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
        close = diff <= tol.atol + tol.rtol * np.abs(e)
    same_special = (np.isnan(a) & np.isnan(e)) | ((a == e) & np.isinf(e))
    special = np.isnan(a) | np.isnan(e) | np.isinf(a) | np.isinf(e)
    bad = np.where(special, ~same_special, ~close)
    finite = ~special
    ulp = np.where(finite, ulp_distance(actual, expected), 0)
    return _summarise(base, bad, np.where(finite, diff, 0), np.where(finite, rel, 0), ulp)


def _summarise(base: dict, bad: np.ndarray, diff: np.ndarray, rel: np.ndarray, ulp: np.ndarray) -> Comparison:
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)) if bad.any() else None
    return Comparison(
        **base,
        bad=bad,
        max_abs=float(diff.max(initial=0.0)),
        max_rel=float(rel.max(initial=0.0)),
        max_ulp=int(ulp.max(initial=0)),
        first_bad=first,
    )
