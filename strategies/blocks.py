"""Block shapes valid by construction for each compiler family's BlockSpec rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from strategies._budget import Block, Budget, budgeted_blocks
from strategies._dtypes import as_dtype, family_of, preferred_sublane_tile, storage_bits
from strategies._ints import cdiv, next_pow2
from strategies._validation import check_bool, check_int, check_optional_int, check_shape
from strategies.errors import InvalidStrategyValue

__all__ = [
    "TPU_LANES",
    "TPU_RANK1_CHUNK",
    "TRITON_MAX_BLOCK_ELEMENTS",
    "block_shapes",
    "mosaic_gpu_block_shapes",
    "preferred_sublane_tile",
    "tpu_block_shapes",
    "triton_block_shapes",
]

TPU_LANES = 128
TPU_SUBLANES = 8
TPU_RANK1_CHUNK = TPU_SUBLANES * TPU_LANES
TRITON_MAX_BLOCK_ELEMENTS = 2**20  # Triton's TRITON_MAX_TENSOR_NUMEL
GPU_MINOR_BYTES = 16


def _dedup(blocks: Sequence[Block]) -> tuple[Block, ...]:
    return tuple(dict.fromkeys(blocks))


def _tiled(dim: int, tile: int) -> tuple[Block, ...]:
    """The full dim, then multiples of ``tile`` from one block down to one tile."""
    return _dedup([dim, *(k * tile for k in range(cdiv(dim, tile), 0, -1))])


def _leading(dim: int, allow_squeezed: bool) -> tuple[Block, ...]:
    """Any size from the full dim down to 1, then (if allowed) squeezed."""
    return (*range(dim, 0, -1), *((None,) if allow_squeezed else ()))


def _tpu_rank1(dim: int, dtype: np.dtype) -> tuple[Block, ...]:
    """Full dim, multiples of 8*128, or powers of two >= 128 * (32 // bits)."""
    min_tiling = TPU_LANES * (32 // storage_bits(dtype))
    chunks = {k * TPU_RANK1_CHUNK for k in range(1, cdiv(dim, TPU_RANK1_CHUNK) + 1)}
    powers = {1 << j for j in range(min_tiling.bit_length() - 1, next_pow2(dim).bit_length())}
    powers.add(min_tiling)
    return _dedup([dim, *sorted(chunks | powers, reverse=True)])


def _checked_budget(where: str, budget: Budget) -> Budget:
    """``budget`` if some blocking fits it, else an error naming the budgets."""
    needed = budget.min_points(0, budget.max_elements)
    if needed is None:
        raise InvalidStrategyValue(
            f"{where}(max_block_elements={budget.max_elements!r}): no valid block of "
            f"array_shape={budget.shape} is that small. Raise max_block_elements."
        )
    if budget.max_points is not None and needed > budget.max_points:
        raise InvalidStrategyValue(
            f"{where}(max_grid_points={budget.max_points!r}): array_shape={budget.shape} "
            f"needs at least {needed} grid points with valid blocks. Pass "
            f"max_grid_points={needed} or more, or a smaller array_shape."
        )
    return budget


def _budget_args(where: str, max_grid_points: Any, max_block_elements: Any) -> tuple:
    return (
        check_optional_int(where, "max_grid_points", max_grid_points, min_value=1),
        check_optional_int(where, "max_block_elements", max_block_elements, min_value=1),
    )


def tpu_block_shapes(
    *,
    array_shape: Sequence[int],
    dtype: Any = "float32",
    sublane_tile: int | None = None,
    allow_squeezed: bool = False,
    max_grid_points: int | None = None,
    max_block_elements: int | None = None,
) -> st.SearchStrategy[tuple[int | None, ...]]:
    """Block shapes the Mosaic TPU lowering accepts for an array of ``array_shape``.

    Rank >= 2: the last dim is the full dim or a multiple of 128; the second-to-last is
    the full dim or a multiple of ``sublane_tile`` (default: the dtype's preferred tile,
    8 for 32-bit, 16 for 16-bit, 32 for 8-bit; it must be a multiple of 8); leading dims
    are any size, or None (squeezed, ``pl.Squeezed()``) when ``allow_squeezed``. Rank 1:
    the full dim, a multiple of 8*128, or a power of two >= 128 * (32 // bits). A block
    may overhang the array's end (the last block is then partial). At most
    ``max_grid_points`` grid points and ``max_block_elements`` elements per block.

    Shrinks toward the full-array block (one block); then toward bigger blocks.

    Example: ``tpu_block_shapes(array_shape=(100, 300))`` draws (100, 300), (8, 128),
    (104, 256), ...
    """
    where = "tpu_block_shapes"
    shape = check_shape(where, "array_shape", array_shape)
    np_dtype = as_dtype(where, "dtype", dtype)
    if np_dtype.itemsize > 4:
        raise InvalidStrategyValue(
            f"{where}(dtype={dtype!r}): Mosaic TPU has no 64-bit vectors. Pass a dtype of "
            "32 bits or less, e.g. dtype='float32'."
        )
    tile = preferred_sublane_tile(np_dtype) if sublane_tile is None else sublane_tile
    check_int(where, "sublane_tile", tile, min_value=TPU_SUBLANES)
    if tile % TPU_SUBLANES:
        raise InvalidStrategyValue(
            f"{where}(sublane_tile={tile!r}): must be a multiple of {TPU_SUBLANES}, "
            f"e.g. sublane_tile={TPU_SUBLANES * cdiv(tile, TPU_SUBLANES)}."
        )
    squeezed = check_bool(where, "allow_squeezed", allow_squeezed)
    if len(shape) == 1:
        options = [_tpu_rank1(shape[0], np_dtype)]
    else:
        lead = [_leading(d, squeezed) for d in shape[:-2]]
        options = [*lead, _tiled(shape[-2], tile), _tiled(shape[-1], TPU_LANES)]
    budget = Budget(shape, options, *_budget_args(where, max_grid_points, max_block_elements))
    return budgeted_blocks(_checked_budget(where, budget))


def triton_block_shapes(
    *,
    array_shape: Sequence[int],
    max_grid_points: int | None = None,
    max_block_elements: int = TRITON_MAX_BLOCK_ELEMENTS,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Block shapes the Pallas Triton lowering accepts: every dim a power of two, from
    the smallest power of two covering the dim down to 1, with at most
    ``max_block_elements`` (default 2**20, Triton's limit) elements per block and at
    most ``max_grid_points`` grid points.

    Shrinks toward one block per dim (the power of two covering it); then bigger blocks.

    Example: ``triton_block_shapes(array_shape=(100, 300))`` draws (128, 512), (32, 64), ...
    """
    where = "triton_block_shapes"
    shape = check_shape(where, "array_shape", array_shape)
    options = [[1 << j for j in range(next_pow2(d).bit_length() - 1, -1, -1)] for d in shape]
    budget = Budget(shape, options, *_budget_args(where, max_grid_points, max_block_elements))
    return budgeted_blocks(_checked_budget(where, budget))


def mosaic_gpu_block_shapes(
    *,
    array_shape: Sequence[int],
    dtype: Any = "float32",
    max_grid_points: int | None = None,
    max_block_elements: int | None = None,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Block shapes for Mosaic GPU (TMA) copies: the minor dim a multiple of 16 bytes
    (4 float32, 8 bfloat16, 16 int8 elements), up to the multiple covering the dim; the
    other dims any size from the full dim down to 1.

    Shrinks toward one block (minor dim rounded up to 16 bytes); then bigger blocks.

    Example: ``mosaic_gpu_block_shapes(array_shape=(10, 30), dtype="bfloat16")`` draws
    (10, 32), (3, 8), ...
    """
    where = "mosaic_gpu_block_shapes"
    shape = check_shape(where, "array_shape", array_shape)
    unit = max(1, GPU_MINOR_BYTES // as_dtype(where, "dtype", dtype).itemsize)
    minor = [k * unit for k in range(cdiv(shape[-1], unit), 0, -1)]
    options = [*(_leading(d, False) for d in shape[:-1]), minor]
    budget = Budget(shape, options, *_budget_args(where, max_grid_points, max_block_elements))
    return budgeted_blocks(_checked_budget(where, budget))


def block_shapes(
    *,
    backend: str,
    array_shape: Sequence[int],
    dtype: Any = "float32",
    max_grid_points: int | None = None,
) -> st.SearchStrategy[tuple[int | None, ...]]:
    """The block shapes of ``backend``'s family (``"mosaic_tpu"``, ``"triton"``,
    ``"mosaic_gpu"``; a ``":chip"`` suffix is ignored), with their defaults.

    Shrinks like the family's strategy: toward one block.

    Example: ``block_shapes(backend="triton", array_shape=(64, 64))``.
    """
    family = family_of("block_shapes", backend)
    if family == "mosaic_tpu":
        return tpu_block_shapes(
            array_shape=array_shape, dtype=dtype, max_grid_points=max_grid_points
        )
    if family == "triton":
        as_dtype("block_shapes", "dtype", dtype)
        return triton_block_shapes(array_shape=array_shape, max_grid_points=max_grid_points)
    return mosaic_gpu_block_shapes(
        array_shape=array_shape, dtype=dtype, max_grid_points=max_grid_points
    )
