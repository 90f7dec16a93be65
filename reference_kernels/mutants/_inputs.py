"""Input strategies shared by the mutants: seeded numpy arrays of fixed shapes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

__all__ = ["seeded_arrays"]


def seeded_arrays(
    shapes: Sequence[tuple[int, ...]], *, dtype: object = "float32", low: float | None = None
) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """Arrays of the given shapes drawn from one seed; shrinks towards seed 0.

    ``low=None`` draws standard normal values; a number draws uniform values in
    ``[low, low + 1)`` (e.g. ``low=0.0`` for positive inputs).
    """

    def build(seed: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        if low is None:
            return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)
        return tuple((rng.random(s) + low).astype(dtype) for s in shapes)

    return st.builds(build, st.integers(0, 2**32 - 1))
