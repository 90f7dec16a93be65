"""Small Hypothesis helpers shared by the catalog: seeded numpy inputs, tile-aligned sizes.

Arrays are never drawn element by element: a strategy draws one seed and numpy's
``default_rng`` fills the arrays, so an example costs one draw whatever its size and
shrinks towards seed 0.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

__all__ = ["multiples", "normal", "seeded", "uniform_ints", "without"]

Maker = Callable[[np.random.Generator], tuple[np.ndarray, ...]]


def seeded(make: Maker) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """Arrays made by ``make(rng)`` from one drawn seed (shrinks towards seed 0)."""
    return st.integers(min_value=0, max_value=2**32 - 1).map(
        lambda seed: make(np.random.default_rng(seed))
    )


def normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Standard-normal values of ``shape`` cast to ``dtype`` (bf16 via ml_dtypes)."""
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def uniform_ints(rng: np.random.Generator, shape: tuple[int, ...], *, low: int, high: int) -> np.ndarray:
    """int32 values uniform in ``[low, high)``."""
    return rng.integers(low, high, size=shape, dtype=np.int32)


def multiples(base: int, *, max_factor: int) -> st.SearchStrategy[int]:
    """``base * k`` for k in ``1..max_factor``; shrinks towards ``base``."""
    return st.integers(min_value=1, max_value=max_factor).map(lambda k: base * k)


def without(fn: Callable[..., Any], *keys: str) -> Callable[..., Any]:
    """``fn`` called without the config ``keys`` that only size the inputs (e.g. rows)."""

    @functools.wraps(fn)
    def call(*arrays: Any, **config: Any) -> Any:
        return fn(*arrays, **{k: v for k, v in config.items() if k not in keys})

    return call
