"""Grids that cover an array exactly once for a block shape, with common index_maps."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any, Literal, get_args

from hypothesis import strategies as st

from strategies._budget import Block, points
from strategies._validation import check_choices, check_shape
from strategies.blocks import block_shapes

__all__ = ["LAYOUTS", "Tiling", "cdiv_grid", "grids"]

Layout = Literal["row_major", "transposed", "reduction_last"]
LAYOUTS: tuple[str, ...] = get_args(Layout)
"""Grid layouts, simplest first. ``row_major``: grid axis i walks array dim i.
``transposed``: grid axes reversed (the last array dim varies slowest).
``reduction_last``: row-major, and the last grid axis is a reduction (an output that
drops the last array dim keeps its block across that axis)."""


def cdiv_grid(array_shape: Sequence[int], block_shape: Sequence[Block]) -> tuple[int, ...]:
    """``tuple(pl.cdiv(a, b))`` over the dims; a squeezed (None) block dim counts as 1."""
    return tuple(points(a, b) for a, b in zip(array_shape, block_shape, strict=True))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tiling:
    """An array, a block shape, and the grid and index_map that walk its blocks.

    Attributes:
      array_shape: shape of the array.
      block_shape: block shape (None marks a squeezed dim).
      layout: one of LAYOUTS.
    """

    array_shape: tuple[int, ...]
    block_shape: tuple[Block, ...]
    layout: Layout = "row_major"

    @property
    def grid(self) -> tuple[int, ...]:
        """The ``pl.cdiv`` grid, in this layout's axis order."""
        grid = cdiv_grid(self.array_shape, self.block_shape)
        return grid[::-1] if self.layout == "transposed" else grid

    @property
    def reduction_axes(self) -> tuple[int, ...]:
        """Grid axes along which an output block is revisited (must stay arbitrary)."""
        return (len(self.array_shape) - 1,) if self.layout == "reduction_last" else ()

    def index_map(self, *grid_indices: Any) -> tuple[Any, ...]:
        """Block index of the array at a grid point (usable as a BlockSpec index_map)."""
        if self.layout == "transposed":
            return tuple(reversed(grid_indices))
        return tuple(grid_indices)

    def out_index_map(self, *grid_indices: Any) -> tuple[Any, ...]:
        """Block index of an output that drops the reduced dims (``reduction_last``);
        the same as ``index_map`` for the other layouts."""
        if self.layout == "reduction_last":
            return tuple(grid_indices[:-1])
        return self.index_map(*grid_indices)

    def grid_points(self) -> Iterator[tuple[int, ...]]:
        """Every grid point, in the order Pallas runs them sequentially."""
        return itertools.product(*(range(g) for g in self.grid))


def grids(
    *,
    array_shape: Sequence[int],
    backend: str = "mosaic_tpu",
    dtype: Any = "float32",
    layouts: Sequence[str] = LAYOUTS,
    max_grid_points: int | None = None,
) -> st.SearchStrategy[Tiling]:
    """Tilings of ``array_shape``: a block shape valid for ``backend``'s family, a layout,
    and the ``pl.cdiv`` grid that covers every element exactly once. ``max_grid_points``
    bounds the grid's size (TPU interpret mode costs about 10 ms per grid point).

    Shrinks toward one block (grid of ones) and the first of ``layouts``.

    Example::

        tiling = data.draw(grids(array_shape=(64, 256), max_grid_points=8))
        spec = pl.BlockSpec(tiling.block_shape, tiling.index_map)
        pl.pallas_call(kernel, grid=tiling.grid, in_specs=[spec], out_specs=spec, ...)
    """
    shape = check_shape("grids", "array_shape", array_shape)
    chosen = check_choices("grids", "layouts", layouts, LAYOUTS)
    blocks = block_shapes(
        backend=backend, array_shape=shape, dtype=dtype, max_grid_points=max_grid_points
    )
    return st.builds(
        lambda block, layout: Tiling(array_shape=shape, block_shape=block, layout=layout),
        blocks,
        st.sampled_from(chosen),
    )
