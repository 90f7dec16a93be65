"""Mosaic TPU's block-shape rules: which blocks its lowering accepts.

The interpreters run any block shape; Mosaic TPU rejects blocks that do not tile its
vector registers. Its lowering (``pallas/mosaic/lowering.py: _check_block_mappings``, the
same in JAX 0.10, 0.11 and 0.12) requires, for every input and output block outside SMEM
and semaphore memory:

- rank >= 2: the last block dimension a multiple of 128 or equal to the array's, and the
  second-to-last a multiple of 8 or equal to the array's (a squeezed dimension counts as
  1). The same for every dtype: bfloat16, int8 and float8 blocks of (8, 128) compile.
- rank 1: the block equal to the array, or a multiple of 1024, or a power of two of at
  least 128 x (32 / bits of the dtype): 128 for 32-bit types and bool, 256 for 16-bit,
  512 for 8-bit types.
- rank 0: only in SMEM.
- memory space ANY or HBM: the whole array (the kernel copies what it needs itself).

A PRNG key array is checked in its physical layout, which its dtype's name does not
give: it is not judged here. ``tests/grid/test_tiling.py`` checks these rules against real
deviceless Mosaic compiles (libtpu 0.0.50.1) on every TPU chip of the registry.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MOSAIC_TPU_SITES", "TPU_TILE", "mosaic_block_problem"]

#: The lowerings (``kernel_site``) a pallas_call is compiled with by Mosaic TPU when it
#: targets a TPU: no compiler params, or ``pltpu.CompilerParams``.
MOSAIC_TPU_SITES = ("default", "mosaic_tpu")
#: (sublanes, lanes): the tile of a 32-bit array in a TPU's vector registers.
TPU_TILE = (8, 128)
_SUBLANES, _LANES = TPU_TILE
_BITS = {"bool": 32, "int4": 4, "uint4": 4}


def _bits(dtype: str) -> int | None:
    if dtype in _BITS:
        return _BITS[dtype]
    digits = "".join(c for c in dtype.split("_")[0] if c.isdigit())
    return int(digits) if digits else None


def mosaic_block_problem(block: Sequence[int], array: Sequence[int], dtype: str,
                         memory_space: str = "default") -> str | None:
    """Why Mosaic TPU rejects ``block`` of an ``array``-shaped operand of ``dtype`` (its
    name) in ``memory_space`` (as text), or None when it accepts it."""
    block, array = tuple(block), tuple(array)
    if memory_space in ("semaphore_mem", "semaphore") or dtype.startswith("key<"):
        return None
    if memory_space == "smem" and block == array:
        return None
    if memory_space in ("any", "hbm"):
        return None if block == array else f"a block in memory space {memory_space} must be the whole array {array}"
    if not block:
        return "a rank-0 block must be in SMEM"
    if len(block) == 1:
        bits = _bits(dtype) or 32
        least = _LANES * max(1, 32 // bits)
        (b,), (a,) = block, array
        if b == a or b % (_LANES * _SUBLANES) == 0 or (b >= least and b & (b - 1) == 0):
            return None
        return (f"a 1-D block must be the whole array ({a}), a multiple of {_LANES * _SUBLANES}, or a power of two "
                f"of at least {least} for {dtype}; it is {b}")
    wrong = []
    if block[-1] != array[-1] and block[-1] % _LANES:
        wrong.append(f"its last dimension {block[-1]} is neither a multiple of {_LANES} nor the array's {array[-1]}")
    if block[-2] != array[-2] and block[-2] % _SUBLANES:
        wrong.append(f"its second-to-last dimension {block[-2]} is neither a multiple of {_SUBLANES} nor the "
                     f"array's {array[-2]}")
    return "; ".join(wrong) or None
