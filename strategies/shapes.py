"""Problem sizes that are ragged relative to a block: the sizes that break tiled kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from hypothesis import strategies as st

from strategies._ints import cdiv, primes_up_to
from strategies._validation import check_choices, check_int, check_optional_int, check_shape
from strategies.errors import InvalidStrategyValue

__all__ = ["RAGGED_KINDS", "array_shapes", "ragged_sizes"]

RaggedKind = Literal["exact", "short", "over", "small", "prime"]
RAGGED_KINDS: tuple[str, ...] = get_args(RaggedKind)
"""How a size relates to its block, simplest first: a whole number of blocks, one element
short of one, one element over one, smaller than one block, a prime."""


def _kind_sizes(kind: str, block: int, max_blocks: int) -> st.SearchStrategy[int] | None:
    """Sizes of one kind with ``1 <= size`` and ``cdiv(size, block) <= max_blocks``;
    None when the kind is impossible for this block and budget. Each shrinks to its
    smallest number of blocks."""
    if kind == "exact":
        return st.integers(1, max_blocks).map(lambda k: k * block)
    if kind == "short":
        low = 2 if block == 1 else 1
        return (
            None if low > max_blocks else st.integers(low, max_blocks).map(lambda k: k * block - 1)
        )
    if kind == "over":
        return (
            None if max_blocks < 2 else st.integers(1, max_blocks - 1).map(lambda k: k * block + 1)
        )
    if kind == "small":
        return None if block < 2 else st.integers(1, block - 1)
    primes = primes_up_to(max_blocks * block)
    return st.sampled_from(primes) if primes else None


def _feasible_kinds(
    where: str, kinds: Sequence[str], block: int, max_blocks: int
) -> dict[str, st.SearchStrategy[int]]:
    """The strategies of the kinds possible for this block and budget, in ``kinds`` order."""
    options = {kind: _kind_sizes(kind, block, max_blocks) for kind in kinds}
    feasible = {kind: strategy for kind, strategy in options.items() if strategy is not None}
    if not feasible:
        raise InvalidStrategyValue(
            f"{where}(kinds={tuple(kinds)!r}): no size of these kinds exists for "
            f"block={block} and max_blocks={max_blocks}. Add 'exact' to kinds, or raise "
            "block or max_blocks."
        )
    return feasible


def ragged_sizes(
    *, block: int, max_blocks: int = 4, kinds: Sequence[str] = RAGGED_KINDS
) -> st.SearchStrategy[int]:
    """Sizes of one array dimension, by turns ragged in each way relative to ``block``.

    Every size is >= 1 and needs at most ``max_blocks`` blocks (``cdiv(size, block) <=
    max_blocks``). Kinds (see RAGGED_KINDS): ``exact`` k*block, ``short`` k*block - 1,
    ``over`` k*block + 1, ``small`` below one block, ``prime``. Kinds impossible for this
    block and budget (``small`` with block=1, ``over`` with max_blocks=1) are left out.

    Shrinks toward ``block`` itself: kind ``exact`` (the first kind given), one block.

    Example: ``ragged_sizes(block=128, max_blocks=3)`` draws 128, 255, 257, 37, 101, ...
    """
    where = "ragged_sizes"
    block = check_int(where, "block", block, min_value=1)
    max_blocks = check_int(where, "max_blocks", max_blocks, min_value=1)
    kinds = check_choices(where, "kinds", kinds, RAGGED_KINDS)
    options = _feasible_kinds(where, kinds, block, max_blocks)
    return st.sampled_from(tuple(options)).flatmap(options.__getitem__)


def array_shapes(
    *,
    block_shape: Sequence[int],
    max_blocks: int = 4,
    kinds: Sequence[str] = RAGGED_KINDS,
    max_grid_points: int | None = None,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes whose every dimension is a ``ragged_sizes`` of the block's dimension.

    Each dimension needs at most ``max_blocks`` blocks and the whole grid
    (``prod(cdiv(shape, block_shape))``) at most ``max_grid_points`` points when given.

    When the grid budget leaves a dimension a single block, kinds that need two blocks
    (``over``; ``short`` with block 1) are skipped there, falling back to ``exact``.

    Shrinks toward ``block_shape`` itself: one block, no raggedness.

    Example: ``array_shapes(block_shape=(8, 128))`` draws (8, 128), (15, 257), (3, 131), ...
    """
    where = "array_shapes"
    block_shape = check_shape(where, "block_shape", block_shape)
    max_blocks = check_int(where, "max_blocks", max_blocks, min_value=1)
    kinds = check_choices(where, "kinds", kinds, RAGGED_KINDS)
    budget = check_optional_int(where, "max_grid_points", max_grid_points, min_value=1)
    for block in block_shape:
        _feasible_kinds(where, kinds, block, max_blocks)

    @st.composite
    def draw_shape(draw: st.DrawFn) -> tuple[int, ...]:
        remaining = budget
        shape = []
        for block in block_shape:
            cap = max_blocks if remaining is None else min(max_blocks, remaining)
            size = draw(
                ragged_sizes(block=block, max_blocks=cap, kinds=_kinds_for(kinds, block, cap))
            )
            shape.append(size)
            if remaining is not None:
                remaining //= cdiv(size, block)
        return tuple(shape)

    return draw_shape()


def _kinds_for(kinds: Sequence[str], block: int, max_blocks: int) -> tuple[str, ...]:
    """The kinds feasible under a reduced budget, falling back to 'exact' (always feasible)."""
    feasible = tuple(k for k in kinds if _kind_sizes(k, block, max_blocks) is not None)
    return feasible or ("exact",)
