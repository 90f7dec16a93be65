"""Dimension semantics: which grid axes may run in parallel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from hypothesis import strategies as st

from strategies._validation import check_int
from strategies.errors import InvalidStrategyType, InvalidStrategyValue

__all__ = ["SEMANTICS", "dimension_semantics", "unsafe_dimension_semantics"]

Semantic = Literal["parallel", "arbitrary"]
SEMANTICS: tuple[str, ...] = get_args(Semantic)


def _check_reductions(where: str, num_axes: int, reduction_axes: Sequence[int]) -> tuple[int, ...]:
    if not isinstance(reduction_axes, Sequence) or isinstance(reduction_axes, str):
        raise InvalidStrategyType(
            f"{where}(reduction_axes={reduction_axes!r}): expected a tuple of grid axis "
            "indices, e.g. reduction_axes=(2,)."
        )
    for axis in reduction_axes:
        check_int(where, "reduction_axes", axis, min_value=0, max_value=num_axes - 1)
    if len(set(reduction_axes)) != len(reduction_axes):
        raise InvalidStrategyValue(
            f"{where}(reduction_axes={tuple(reduction_axes)!r}): contains duplicates."
        )
    return tuple(reduction_axes)


def _prefixes(num_axes: int, max_parallel: int) -> st.SearchStrategy[tuple[str, ...]]:
    """Parallel prefixes of length 0..max_parallel; shrinks toward 0 (all arbitrary)."""
    return st.integers(0, max_parallel).map(
        lambda p: ("parallel",) * p + ("arbitrary",) * (num_axes - p)
    )


def dimension_semantics(
    *, num_axes: int, reduction_axes: Sequence[int] = ()
) -> st.SearchStrategy[tuple[str, ...]]:
    """Correct ``dimension_semantics`` tuples for a grid of ``num_axes`` axes.

    Parallel axes form a prefix of the grid (TPU interpret mode and multi-core TPUs need
    it) and every axis in ``reduction_axes`` (an accumulator revisits its output block
    there) and after it stays ``"arbitrary"``.

    Shrinks toward all ``"arbitrary"`` (the pallas_call default, one core's order).

    Example: ``dimension_semantics(num_axes=3, reduction_axes=(2,))`` draws
    ("arbitrary",)*3, ("parallel", "arbitrary", "arbitrary"), ("parallel", "parallel",
    "arbitrary").
    """
    where = "dimension_semantics"
    num_axes = check_int(where, "num_axes", num_axes, min_value=0)
    reductions = _check_reductions(where, num_axes, reduction_axes)
    return _prefixes(num_axes, min(reductions, default=num_axes))


def unsafe_dimension_semantics(
    *, num_axes: int, reduction_axes: Sequence[int] = ()
) -> st.SearchStrategy[tuple[str, ...]]:
    """Like ``dimension_semantics``, but the parallel prefix may cover reduction axes:
    for conformance work that checks a backend flags a reduction wrongly marked
    ``"parallel"`` (the prefix rule still holds, so the error is the reduction's alone).

    Shrinks toward all ``"arbitrary"``.

    Example: ``unsafe_dimension_semantics(num_axes=2, reduction_axes=(1,))`` may draw
    ("parallel", "parallel").
    """
    where = "unsafe_dimension_semantics"
    num_axes = check_int(where, "num_axes", num_axes, min_value=0)
    _check_reductions(where, num_axes, reduction_axes)
    return _prefixes(num_axes, num_axes)
