"""One-line configs for the common tiled kernel: sizes, blocks, grid, semantics, dtype."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np
from hypothesis import strategies as st

from strategies._dtypes import as_dtype, family_of, preferred_sublane_tile
from strategies._ints import cdiv
from strategies._validation import check_bool, check_choice, check_int, check_optional_int
from strategies.blocks import TPU_LANES
from strategies.errors import InvalidStrategyType, InvalidStrategyValue
from strategies.semantics import dimension_semantics
from strategies.shapes import RAGGED_KINDS, _kinds_for, ragged_sizes

__all__ = ["AXIS_ROLES", "tiled_configs"]

Role = Literal["sublane", "lane", "leading"]
AXIS_ROLES: tuple[str, ...] = get_args(Role)
"""What an axis is in the arrays its blocks tile: the second-to-last dim of some array
(``sublane``), the last dim of some array (``lane``; it also satisfies ``sublane``), or
only leading dims (``leading``)."""
RESERVED_KEYS = ("grid", "dimension_semantics", "dtype")
TRITON_MIN_BLOCK = 16  # tl.dot needs every block dim >= 16


def _unit(family: str, role: str, dtype: np.dtype) -> int:
    """The smallest block of an axis of ``role`` that ``family`` accepts for ``dtype``."""
    if role == "leading":
        return 1
    if family == "mosaic_tpu":
        return TPU_LANES if role == "lane" else preferred_sublane_tile(dtype)
    if family == "triton":
        return TRITON_MIN_BLOCK
    return max(1, 16 // dtype.itemsize) if role == "lane" else 1


def _blocks(family: str, unit: int, max_block_tiles: int) -> st.SearchStrategy[int]:
    """unit * k for k in 1..max_block_tiles (Triton: k a power of two); shrinks to unit."""
    if family == "triton":
        return st.sampled_from([unit << j for j in range(max_block_tiles.bit_length())])
    return st.integers(1, max_block_tiles).map(lambda k: k * unit)


def _check_axes(where: str, axes: Any) -> dict[str, str]:
    if not isinstance(axes, Mapping) or not axes:
        raise InvalidStrategyType(
            f"{where}(axes={axes!r}): expected a non-empty dict of axis name to role "
            f"(one of {AXIS_ROLES}), e.g. axes={{'m': 'sublane', 'n': 'lane', 'k': 'lane'}}."
        )
    for name, role in axes.items():
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED_KEYS:
            raise InvalidStrategyValue(
                f"{where}(axes={dict(axes)!r}): axis name {name!r} must be an identifier "
                f"other than {RESERVED_KEYS}, since it becomes a config key."
            )
        if f"block_{name}" in axes:
            raise InvalidStrategyValue(
                f"{where}(axes={dict(axes)!r}): axis {f'block_{name}'!r} collides with the "
                f"block-size key of axis {name!r}. Rename one of them."
            )
        check_choice(where, f"axes[{name!r}]", role, AXIS_ROLES)
    return dict(axes)


def _check_dtypes(where: str, names: Any, family: str) -> tuple[np.dtype, ...]:
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise InvalidStrategyType(
            f"{where}(dtypes={names!r}): expected a non-empty tuple of dtype names, "
            "e.g. dtypes=('float32', 'bfloat16')."
        )
    checked = tuple(as_dtype(where, "dtypes", name) for name in names)
    if family == "mosaic_tpu" and any(d.itemsize > 4 for d in checked):
        raise InvalidStrategyValue(
            f"{where}(dtypes={tuple(names)!r}): Mosaic TPU has no 64-bit vectors. "
            "Pass dtypes of 32 bits or less."
        )
    return checked


def tiled_configs(
    *,
    axes: Mapping[str, str] | None = None,
    reduction_axes: Sequence[str] = (),
    backend: str = "mosaic_tpu",
    dtypes: Sequence[Any] = ("float32",),
    max_block_tiles: int = 2,
    max_blocks: int = 4,
    ragged: bool = True,
    max_grid_points: int | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Config dicts of a tiled kernel with one grid axis per entry of ``axes``.

    ``axes`` maps each problem axis, in grid order, to its role (AXIS_ROLES; default
    ``{"rows": "sublane", "cols": "lane"}``). For an axis ``a`` the config holds ``a``
    (the problem size) and ``block_a`` (its block size); then ``grid`` (``pl.cdiv`` of
    each), ``dimension_semantics`` (a parallel prefix before the first of
    ``reduction_axes``, which stay arbitrary) and ``dtype`` (a name from ``dtypes``).
    Blocks are valid for ``backend``'s family by construction: a multiple (Triton: a
    power-of-two multiple) of at most ``max_block_tiles`` of the role's unit: Mosaic TPU
    lane 128, sublane the dtype's sublane tile (8/16/32); Triton 16; Mosaic GPU lane 16
    bytes. Sizes are ``ragged_sizes`` of the block (``ragged=False``: whole blocks), with
    at most ``max_blocks`` blocks per axis and ``max_grid_points`` in all.

    Shrinks toward the first dtype, one unit per block, exactly one block per axis
    (the block is the whole array, no raggedness) and all-arbitrary semantics.

    Example (a matmul)::

        tiled_configs(axes={"m": "sublane", "n": "lane", "k": "lane"},
                      reduction_axes=("k",), dtypes=("float32", "bfloat16"))
        # {"m": 8, "n": 128, "k": 128, "block_m": 8, "block_n": 128, "block_k": 128,
        #  "grid": (1, 1, 1), "dimension_semantics": ("arbitrary",) * 3,
        #  "dtype": "float32"}   <- the minimal config
    """
    where = "tiled_configs"
    roles = _check_axes(where, {"rows": "sublane", "cols": "lane"} if axes is None else axes)
    family = family_of(where, backend)
    checked_dtypes = _check_dtypes(where, dtypes, family)
    if isinstance(reduction_axes, str) or not isinstance(reduction_axes, Sequence):
        raise InvalidStrategyType(
            f"{where}(reduction_axes={reduction_axes!r}): expected a tuple of axis names, "
            f"e.g. reduction_axes=({next(iter(roles))!r},)."
        )
    names = list(roles)
    reductions = tuple(
        names.index(check_choice(where, "reduction_axes", a, names)) for a in reduction_axes
    )
    tiles = check_int(where, "max_block_tiles", max_block_tiles, min_value=1)
    blocks_cap = check_int(where, "max_blocks", max_blocks, min_value=1)
    kinds = RAGGED_KINDS if check_bool(where, "ragged", ragged) else ("exact",)
    budget = check_optional_int(where, "max_grid_points", max_grid_points, min_value=1)
    semantics = dimension_semantics(num_axes=len(names), reduction_axes=reductions)

    @st.composite
    def draw_config(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(st.sampled_from(checked_dtypes))
        blocks = [draw(_blocks(family, _unit(family, roles[a], dtype), tiles)) for a in names]
        sizes, remaining = [], budget
        for block in blocks:
            cap = blocks_cap if remaining is None else min(blocks_cap, remaining)
            size = draw(
                ragged_sizes(block=block, max_blocks=cap, kinds=_kinds_for(kinds, block, cap))
            )
            sizes.append(size)
            remaining = None if remaining is None else remaining // cdiv(size, block)
        return {
            **dict(zip(names, sizes, strict=True)),
            **{f"block_{a}": b for a, b in zip(names, blocks, strict=True)},
            "grid": tuple(cdiv(s, b) for s, b in zip(sizes, blocks, strict=True)),
            "dimension_semantics": draw(semantics),
            "dtype": dtype.name,
        }

    return draw_config()
