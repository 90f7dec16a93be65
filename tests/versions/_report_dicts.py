"""Report dicts built by hand, as report.json holds them, for the comparison's tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def report(cells: Mapping[tuple[str, str], str], findings: Sequence[Mapping[str, Any]] = (),
           **top: Any) -> dict[str, Any]:
    """A report: ``cells`` maps (kernel, column) to ``status`` or ``status: reason``;
    ``top`` adds or replaces top-level keys."""
    kernels: dict[str, dict[str, Any]] = {}
    for (kernel, column), text in cells.items():
        status, _, reason = text.partition(": ")
        backend, _, transform = column.partition("+")
        entry = kernels.setdefault(kernel, {"name": kernel, "features": [], "platforms": ["tpu"], "results": {}})
        entry["results"][column] = {"backend": backend, "transform": transform or None, "status": status,
                                    "reason": reason}
    return {"version": 1, "seed": 0, "profile": "ci", "kernels": list(kernels.values()), "backends": ["interpret"],
            "findings": [dict(f) for f in findings], "invalid_specs": [], "run": {}, **top}


def finding(kind: str, kernel: str, backend: str = "interpret", message: str = "",
            transform: str | None = None) -> dict[str, Any]:
    """A finding; its message, unless given, is ``KIND in KERNEL`` over two lines."""
    return {"kind": kind, "kernel": kernel, "backend": backend, "transform": transform,
            "message": message or f"{kind} in {kernel}\nsecond line", "config": {}, "mode": {}, "evidence": {}}
