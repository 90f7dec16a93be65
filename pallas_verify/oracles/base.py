"""What every oracle shares: a Finding about a case, and bitwise comparison of outputs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pallas_verify.case import Case
from pallas_verify.findings import Finding, Kind

__all__ = ["bitwise_differences", "bitwise_equal", "case_finding"]


def case_finding(case: Case, kind: Kind, message: str, **evidence: object) -> Finding:
    """A finding of ``kind`` about ``case`` (its kernel, backend, config, mode, transform)."""
    return Finding(
        kind=kind,
        kernel=case.spec.name,
        backend=case.backend,
        message=message,
        config=dict(case.config),
        mode=dict(case.mode),
        transform=case.transform,
        evidence=evidence,
    )


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise: same shape, dtype and bits (NaN equals NaN of the same payload)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.itemsize in (1, 2, 4, 8) and a.dtype == b.dtype and a.shape == b.shape:
        view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return a.view(view) == b.view(view)
    return np.zeros(a.shape, bool)


def bitwise_differences(paths: Sequence[str], one: Sequence[np.ndarray], two: Sequence[np.ndarray]) -> list[str]:
    """One line per output whose bits differ: how many elements, and the first index."""
    lines = []
    for path, a, b in zip(paths, one, two, strict=True):
        same = bitwise_equal(a, b)
        if not same.all():
            idx = tuple(int(i) for i in np.unravel_index(int(np.argmin(same)), same.shape))
            lines.append(f"{path}: {int((~same).sum())}/{same.size} elements differ, first at {idx}")
    return lines
