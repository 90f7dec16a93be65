"""Transforms applied to a kernel before it runs (``KernelSpec.transforms``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.spec import TRANSFORMS

__all__ = ["transformed"]


def transformed(fn: Callable[..., Any], transform: str | None, case: Any) -> Callable[..., Any]:
    """``fn`` under ``transform`` (None: ``fn`` itself)."""
    del case
    if transform is None:
        return fn
    raise InvalidArgument(f"transform={transform!r} is not one of {TRANSFORMS}.")
