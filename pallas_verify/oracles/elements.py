"""Which elements of a mismatching output are wrong, and by how much: a mismatch's
element-level evidence, small enough for the report.

Each bad output is seen as a 2-D array (its leading dimensions flattened into rows; a
vector is one row), max-pooled so neither side exceeds ``MAX_SIDE``. A cell holds the
largest error of its elements in units of the bound the output was judged by: above 1 is
over it. Where the kernel and the reference disagree on a NaN or an infinity the cell is
None (JSON null). The worst few elements come with the kernel's, the reference's and the
float64 ground truth's values there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pallas_verify.spec import Tolerance
from pallas_verify.tolerance import Comparison, default_tolerance

__all__ = ["MAX_SIDE", "WORST", "element_evidence"]

MAX_SIDE = 64
WORST = 5


def _units(c: Comparison, a: np.ndarray, e: np.ndarray, t: np.ndarray | None,
           tolerance: Tolerance | None) -> tuple[np.ndarray, str]:
    """Each element's error in units of its bound, and what the unit is."""
    if a.dtype.kind not in "fc":
        return (a != e).astype(np.float64), "1 where the value differs (exact)"
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if tolerance is None and c.rule == "ground truth" and c.bound > 0 and t is not None:
            return np.abs(a64 - t) / c.bound, f"the bound on |kernel - float64|, {c.bound:.3g}"
        tol = tolerance or default_tolerance(a.dtype)
        allowed = np.maximum(tol.atol + tol.rtol * np.abs(e64), np.finfo(np.float64).tiny)
        name = "the spec's tolerance" if tolerance is not None else f"the {a.dtype} table's tolerance"
        return np.abs(a64 - e64) / allowed, f"{name}: atol {tol.atol:.3g} + rtol {tol.rtol:.3g} x |reference|"


def _as_2d(x: np.ndarray) -> np.ndarray:
    if x.ndim == 0:
        return x.reshape(1, 1)
    return x.reshape(1, -1) if x.ndim == 1 else x.reshape(-1, x.shape[-1])


def _pooled(units: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    fy, fx = (max(1, math.ceil(n / MAX_SIDE)) for n in units.shape)
    h, w = math.ceil(units.shape[0] / fy), math.ceil(units.shape[1] / fx)
    padded = np.zeros((h * fy, w * fx))
    padded[: units.shape[0], : units.shape[1]] = units
    return padded.reshape(h, fy, w, fx).max(axis=(1, 3)), (fy, fx)


def _round(v: float) -> float | None:
    return None if not math.isfinite(v) else float(f"{v:.4g}")


def element_evidence(c: Comparison, actual: Any, expected: Any, truth: Any = None,
                     tolerance: Tolerance | None = None) -> dict[str, Any] | None:
    """The element-level picture of one output that failed (None when it did not, or
    differs in shape or dtype): ``path``, ``shape``, ``pool`` (elements per cell, rows and
    columns of the 2-D view), ``unit``, ``errors`` (cells, rows of lists) and ``worst``."""
    if c.bad is None or not c.bad.any():
        return None
    a, e = np.asarray(actual), np.asarray(expected)
    t = None if truth is None or np.shape(truth) != a.shape else np.asarray(truth, np.float64)
    units, unit = _units(c, a, e, t, tolerance)
    with np.errstate(invalid="ignore"):
        nonfinite = c.bad & (~np.isfinite(a.astype(np.float64)) | ~np.isfinite(e.astype(np.float64)))
    units = np.where(nonfinite, np.inf, np.nan_to_num(units, nan=np.inf))
    pooled, pool = _pooled(_as_2d(units))
    worst = []
    for flat in _worst(units, c.bad):
        at = np.unravel_index(int(flat), a.shape)
        worst.append({"index": [int(i) for i in at], "kernel": _value(a[at]), "reference": _value(e[at]),
                      "float64": None if t is None else _value(t[at]), "error": _round(float(units[at]))})
    return {"path": c.path, "shape": list(a.shape), "pool": list(pool), "unit": unit,
            "errors": [[_round(float(v)) for v in row] for row in pooled], "worst": worst}


def _worst(units: np.ndarray, bad: np.ndarray) -> list[int]:
    """The flat indices of the worst bad elements: the largest finite errors first, then up
    to two NaN/inf disagreements (so that those do not hide every finite error)."""
    finite = bad & np.isfinite(units)
    keys = np.where(finite, units, -1.0).ravel()
    if keys.size > WORST:  # the WORST largest in linear time, the first index of equal ones first
        kth = np.partition(keys, keys.size - WORST)[keys.size - WORST]
        above = np.flatnonzero(keys > kth)
        top = [*above.tolist(), *np.flatnonzero(keys == kth)[: WORST - above.size].tolist()]
    else:
        top = list(range(keys.size))
    order = sorted(top, key=lambda i: (-keys[i], i))
    nonfinite = np.flatnonzero(bad & ~np.isfinite(units))[:2]
    chosen = [int(i) for i in order[: WORST - len(nonfinite)] if finite.flat[i]]
    return chosen + [int(i) for i in nonfinite][: WORST - len(chosen)]


def _value(x: Any) -> float | int | str:
    """An element's value as JSON: a float at its own dtype's shortest repr (3.5048852 for a
    float32, not 3.504885196685791), a NaN or an infinity as text."""
    if isinstance(x, np.floating) and np.isfinite(x):
        return float(np.format_float_positional(x, unique=True, trim="-"))
    v = x.item() if hasattr(x, "item") else x
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v if isinstance(v, (int, float)) else str(v)
