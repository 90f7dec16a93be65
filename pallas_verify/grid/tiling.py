"""Mosaic TPU's block-shape rules, checked statically for kernels that target TPU.

The interpreters run any block shape; Mosaic TPU (``mosaic_tpu:*``, and a chip) rejects
blocks that do not tile its vector registers. Its rules are JAX's, read in one place
(``_jax_compat.mosaic_block_problem``; the lowerings they apply to,
``_jax_compat.MOSAIC_TPU_SITES``). A violation is a ``compile_error`` of the kernel,
found by the static check on every backend (backend ``static``), so a kernel that targets
TPU fails on the interpreters too, not only where a Mosaic compile runs. Calls with Triton
or Mosaic GPU compiler params, specs that do not target TPU, and specs that declare every
``mosaic_tpu`` target unsupported are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from pallas_verify import _jax_compat
from pallas_verify.grid.check import GridIssue
from pallas_verify.grid.trace import BlockOperand, PallasCall
from pallas_verify.spec import KernelSpec

__all__ = ["KIND", "tiling_issues"]

KIND = "compile_error"


def _suggestion(block: tuple[int, ...], array: tuple[int, ...]) -> str:
    if len(block) < 2:
        return ""
    fixed = list(block)
    sublanes, lanes = _jax_compat.TPU_TILE
    for dim, unit in ((-1, lanes), (-2, sublanes)):
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
    if call.lowering not in _jax_compat.MOSAIC_TPU_SITES:
        return None
    bad = []
    for operand in (*call.inputs, *call.outputs):
        name, dtype = _operand_dtype(call, operand)
        problem = _jax_compat.mosaic_block_problem(operand.block_shape, operand.array_shape, dtype, operand.memory_space)
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
