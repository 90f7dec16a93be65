"""Helpers shared by the catalog that ``strategies`` does not provide.

Configs and inputs come from ``strategies`` (tiled configs, ragged sizes, block shapes,
arrays with edge values); what is left here is glue:

- ``without``: binds a kernel to the config keys it takes (configs also carry the sizes
  that only shape the inputs).
- ``array_tuples``: one ``strategies.arrays`` per input, as the tuple a spec's inputs
  strategy returns.
- ``seeded`` and ``normal``: standard-normal inputs from one drawn seed. The backward
  kernels (``transforms_*``) and the upstream wrappers keep them: gradients of norms and
  attention are checked against a reference VJP and need inputs away from the degenerate
  rows (all-zero rows, lone large values) that ``strategies.arrays`` deliberately draws.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

import strategies as pvs

__all__ = ["array_tuples", "normal", "seeded", "without"]

Maker = Callable[[np.random.Generator], tuple[np.ndarray, ...]]


def array_tuples(
    *shapes: Sequence[int], dtype: Any = "float32", max_edge_values: int = 4
) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """One ``strategies.arrays`` per shape (small values, a few edge values), as a tuple.

    Shrinks toward all-zero arrays. Kernels that accumulate pass ``max_edge_values=1``:
    two large edge values of opposite signs in one sum cancel catastrophically, and the
    kernel's blocked order of summation then legitimately differs from the reference's.
    """
    return st.tuples(*(pvs.arrays(shape=tuple(s), dtype=dtype, max_edge_values=max_edge_values)
                       for s in shapes))


def seeded(make: Maker) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """Arrays made by ``make(rng)`` from one drawn seed (shrinks towards seed 0)."""
    return st.integers(min_value=0, max_value=2**32 - 1).map(
        lambda seed: make(np.random.default_rng(seed))
    )


def normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Standard-normal values of ``shape`` cast to ``dtype`` (bf16 via ml_dtypes)."""
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def without(fn: Callable[..., Any], *keys: str) -> Callable[..., Any]:
    """``fn`` called without the config ``keys`` that only size the inputs (e.g. rows)."""

    @functools.wraps(fn)
    def call(*arrays: Any, **config: Any) -> Any:
        return fn(*arrays, **{k: v for k, v in config.items() if k not in keys})

    return call
