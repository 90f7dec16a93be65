"""Mosaic TPU's block-shape rules, checked statically for kernels that target TPU.

The interpreters run any block shape; Mosaic TPU (``mosaic_tpu:*``, and a chip) rejects
blocks that do not tile its vector registers. Its lowering (JAX 0.12,
``pallas/mosaic/lowering.py: _check_block_mappings``) requires, for every input and output
block outside SMEM and semaphore memory:

- rank >= 2: the last block dimension a multiple of 128 or equal to the array's, and the
  second-to-last a multiple of 8 or equal to the array's (a squeezed dimension counts as
  1). The same for every dtype: bfloat16, int8 and float8 blocks of (8, 128) compile.
- rank 1: the block equal to the array, or a multiple of 1024, or a power of two of at
  least 128 x (32 / bits of the dtype): 128 for 32-bit types and bool, 256 for 16-bit,
  512 for 8-bit types.
- rank 0: only in SMEM.
- memory space ANY or HBM: the whole array (the kernel copies what it needs itself).

``tests/grid/test_tiling.py`` checks these rules against real deviceless Mosaic compiles
(libtpu 0.0.50.1) on every TPU chip of the registry. A violation is a ``compile_error``
of the kernel, found by the static check on every backend (backend ``static``), so a
kernel that targets TPU fails on the interpreters too, not only where a Mosaic compile
runs. Calls with Triton or Mosaic GPU compiler params, specs that do not target TPU, and
specs that declare every ``mosaic_tpu`` target unsupported are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from pallas_verify.grid.check import GridIssue
from pallas_verify.grid.trace import BlockOperand, PallasCall
from pallas_verify.spec import KernelSpec

__all__ = ["KIND", "block_problem", "tiling_issues"]

KIND = "compile_error"
_LANES, _SUBLANES = 128, 8
_MOSAIC_TPU_LOWERINGS = ("default", "mosaic_tpu")
_BITS = {"bool": 32, "int4": 4, "uint4": 4}


def _bits(dtype: str) -> int | None:
    if dtype in _BITS:
        return _BITS[dtype]
    digits = "".join(c for c in dtype.split("_")[0] if c.isdigit())
    return int(digits) if digits else None


def block_problem(block: Sequence[int], array: Sequence[int], dtype: str, memory_space: str = "default") -> str | None:
    """Why Mosaic TPU rejects ``block`` of an ``array``-shaped operand (None when it accepts it)."""
    block, array = tuple(block), tuple(array)
    if memory_space in ("semaphore_mem", "semaphore"):
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


def _suggestion(block: tuple[int, ...], array: tuple[int, ...]) -> str:
    if len(block) < 2:
        return ""
    fixed = list(block)
    for dim, unit in ((-1, _LANES), (-2, _SUBLANES)):
        if fixed[dim] != array[dim] and fixed[dim] % unit:
            fixed[dim] = min(array[dim], -(-fixed[dim] // unit) * unit)
    return f" (e.g. block {tuple(fixed)})"


def _operand_dtype(call: PallasCall, operand: BlockOperand) -> tuple[str, str]:
    """(the kernel parameter's name, its dtype) for ``operand``, as far as the trace knows."""
    index = call.num_prefetch + operand.index + (len(call.inputs) if operand.is_output else 0)
    if index < len(call.params):
        name, _, _, dtype = call.params[index]
        return name, dtype
    return "", "float32"


def _call_issue(call: PallasCall) -> GridIssue | None:
    if call.lowering not in _MOSAIC_TPU_LOWERINGS:
        return None
    bad = []
    for operand in (*call.inputs, *call.outputs):
        name, dtype = _operand_dtype(call, operand)
        if dtype.startswith("key<"):  # a PRNG key array: Mosaic checks its physical layout
            continue
        problem = block_problem(operand.block_shape, operand.array_shape, dtype, operand.memory_space)
        if problem is not None:
            label = f"{name} ({operand.name})" if name else operand.name
            bad.append((operand, f"block {operand.block_shape} of {label}, array {operand.array_shape} {dtype}: "
                                 f"{problem}{_suggestion(operand.block_shape, operand.array_shape)}"))
    if not bad:
        return None
    return GridIssue(
        kind=KIND, call=call.name, operand=bad[0][0].name,
        message=(f"{call.name}: Mosaic TPU cannot compile this kernel's blocks (its block-shape rules, checked "
                 f"statically; the interpreters run them): " + "; and ".join(text for _, text in bad)
                 + ". Pick blocks that tile (8, 128) or cover whole dimensions, or declare the kernel "
                 "unsupported on mosaic_tpu:* if it never targets a TPU."),
    )


def tiling_issues(spec: KernelSpec, calls: Sequence[PallasCall]) -> list[GridIssue]:
    """Mosaic TPU's block-shape violations of ``calls`` when ``spec`` targets TPU (see the module docstring)."""
    from pallas_verify.backends.families import TPU_CHIPS

    if "tpu" not in spec.platforms or all(spec.unsupported_reason(f"mosaic_tpu:{c.name}") for c in TPU_CHIPS):
        return []
    return [issue for call in calls if (issue := _call_issue(call)) is not None]
