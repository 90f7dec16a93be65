"""Blame: mismatching output elements -> output blocks -> the grid points that wrote them.

For each output of a kernel with bad elements, the pallas_call that produced it is found
(the call whose result the kernel returns, through jit and dtype casts), the bad elements
are mapped to that call's output blocks, and the out_specs index map is evaluated over
the grid to name the grid points that wrote each bad block. Outputs without a block
structure (pl.ANY outputs written by DMAs, outputs computed after the last pallas_call)
are described by the index ranges of their bad elements instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from pallas_verify.grid.check import DEFAULT_MAX_POINTS, describe_points
from pallas_verify.grid.trace import (
    BlockOperand,
    PallasCall,
    block_indices,
    grid_mappings,
    grid_points,
)

__all__ = ["Blame", "OutputBlame", "blame", "blame_outputs"]

_MAX_BLOCKS_NAMED = 4


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputBlame:
    """Where the bad elements of one output lie.

    Attributes:
      output: the kernel output's index (flattened output order).
      shape: the output's shape.
      n_bad: how many elements are bad.
      structure: ``"blocked"`` when the bad elements were mapped to blocks, else
        ``"unknown"`` (see ``message`` for why).
      call: the name of the kernel function of the pallas_call that produced the output.
      block_shape: the output's block shape (``None`` when structure is unknown).
      bad_blocks: every block index holding a bad element, sorted.
      writers: ``(block, grid points)`` for the first few bad blocks; the grid points are
        those whose out_specs index map selects the block (empty when never written,
        or when the grid was not enumerated).
      block_bad_count: bad elements per block, nested lists over the block grid.
      block_max_error: max abs error per block (``inf`` where a NaN/inf disagrees), nested
        lists; ``None`` when only a mask was given or the structure is unknown.
      bad_ranges: per dimension, the ranges (inclusive) of indices holding bad elements.
      message: the above in a sentence or two a kernel author can act on.
    """

    output: int
    shape: tuple[int, ...]
    n_bad: int
    structure: Literal["blocked", "unknown"]
    call: str | None
    block_shape: tuple[int, ...] | None
    bad_blocks: tuple[tuple[int, ...], ...]
    writers: tuple[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], ...]
    block_bad_count: list[Any] | None
    block_max_error: list[Any] | None
    bad_ranges: tuple[tuple[tuple[int, int], ...], ...]
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Blame:
    """The blame of every output with bad elements (outputs without any are left out)."""

    outputs: tuple[OutputBlame, ...]

    @property
    def message(self) -> str:
        return "\n".join(o.message for o in self.outputs)


def blame(
    kernel: Callable[..., Any],
    inputs: Sequence[Any],
    config: Mapping[str, Any],
    *,
    bad: Sequence[np.ndarray | None],
    errors: Sequence[np.ndarray | None] | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
) -> Blame:
    """Blame the bad elements of ``kernel(*inputs, **config)``'s outputs: ``bad`` is a
    boolean mask per output (``None`` for a good output), ``errors`` (optional) the
    absolute error per element of each (``tolerance.element_errors``)."""
    masks = [None if m is None else np.asarray(m, bool) for m in bad]
    return blame_outputs(grid_mappings(kernel, inputs, config), masks, errors, max_points=max_points)


def blame_outputs(
    calls: Sequence[PallasCall],
    masks: Sequence[np.ndarray | None],
    errors: Sequence[np.ndarray | None] | None = None,
    *,
    max_points: int = DEFAULT_MAX_POINTS,
) -> Blame:
    """Blame with the pallas_calls already found (see :func:`blame`)."""
    errors = errors if errors is not None else [None] * len(masks)
    found = []
    for k, (mask, err) in enumerate(zip(masks, errors, strict=True)):
        if mask is None or not mask.any():
            continue
        producer = next((c for c in reversed(calls) if c.output_for(k) is not None), None)
        found.append(_blame_one(k, mask, err, producer, max_points))
    return Blame(outputs=tuple(found))


def _blame_one(k, mask, err, call, max_points) -> OutputBlame:
    operand = call.output_for(k) if call is not None else None
    why = _why_unknown(k, mask, call, operand)
    if why is not None:
        return _unknown(k, mask, why)
    bad_idx = np.argwhere(mask)
    counts = _per_block(mask.astype(np.int64), operand, np.sum)
    max_err = None if err is None else _per_block(err, operand, np.max)
    blocks = tuple(tuple(int(v) for v in b) for b in np.argwhere(counts > 0))
    enumerated = call.skip_reason is None and int(np.prod(call.grid, dtype=np.int64)) <= max_points
    writers = _writers(call, operand, blocks[:_MAX_BLOCKS_NAMED], enumerated)
    return OutputBlame(
        output=k,
        shape=mask.shape,
        n_bad=int(mask.sum()),
        structure="blocked",
        call=call.name,
        block_shape=operand.block_shape,
        bad_blocks=blocks,
        writers=writers,
        block_bad_count=counts.tolist(),
        block_max_error=None if max_err is None else max_err.tolist(),
        bad_ranges=_ranges(bad_idx),
        message=_blocked_message(k, mask, call, operand, blocks, writers, enumerated, counts.size),
    )


def _per_block(values: np.ndarray, operand: BlockOperand, reduce) -> np.ndarray:
    """``reduce`` of ``values`` over each block (partial edge blocks padded with zeros)."""
    counts, block = operand.block_counts, operand.block_shape
    padded = np.zeros([c * b for c, b in zip(counts, block, strict=True)], values.dtype)
    padded[tuple(slice(0, n) for n in values.shape)] = values
    split = padded.reshape([d for c, b in zip(counts, block, strict=True) for d in (c, b)])
    return reduce(split, axis=tuple(range(1, split.ndim, 2)))


def _why_unknown(k, mask, call: PallasCall | None, operand: BlockOperand | None) -> str | None:
    if call is None or operand is None:
        return (
            f"output {k} is not the direct result of a pallas_call (it is computed after the "
            "kernel's last pallas_call, e.g. sliced, reshaped or combined)"
        )
    if not operand.windowed:
        return (
            f"output {k} comes from {operand.name} of {call.name}, which lives in memory space "
            f"{operand.memory_space!r} and is written by the kernel itself (e.g. by DMAs)"
        )
    if tuple(mask.shape) != operand.array_shape:
        return (
            f"output {k} has shape {tuple(mask.shape)} but {operand.name} of {call.name} has "
            f"shape {operand.array_shape}"
        )
    return None


def _unknown(k, mask, why) -> OutputBlame:
    idx = np.argwhere(mask)
    ranges = _ranges(idx)
    text = ", ".join(_render_ranges(r) for r in ranges)
    return OutputBlame(
        output=k,
        shape=mask.shape,
        n_bad=len(idx),
        structure="unknown",
        call=None,
        block_shape=None,
        bad_blocks=(),
        writers=(),
        block_bad_count=None,
        block_max_error=None,
        bad_ranges=ranges,
        message=(
            f"output {k}: {len(idx)} of {mask.size} elements are bad, at indices [{text}]; "
            f"the block structure is unknown because {why}."
        ),
    )


def _writers(call, operand, blocks, enumerated: bool):
    if not enumerated or not blocks:
        return tuple((b, ()) for b in blocks)
    points = grid_points(call.grid)
    written = block_indices(call, operand, points)
    return tuple(
        (b, tuple(tuple(int(v) for v in p) for p in points[np.all(written == b, axis=1)]))
        for b in blocks
    )


def _blocked_message(k, mask, call, operand, blocks, writers, enumerated, n_blocks) -> str:
    parts = []
    for block, points in writers:
        if points:
            parts.append(
                f"block {block}, written at grid points {describe_points(np.array(points), call)}"
            )
        else:
            parts.append(
                f"block {block}, written at no grid point" if enumerated else f"block {block}"
            )
    more = f"; and {len(blocks) - len(writers)} more blocks" if len(blocks) > len(writers) else ""
    if not enumerated:
        more += f" (grid points not enumerated: {call.skip_reason or 'grid too large'})"
    return (
        f"output {k} ({operand.name} of {call.name}, shape {operand.array_shape}, block "
        f"{operand.block_shape}): {int(mask.sum())} of {mask.size} elements are bad, in "
        f"{len(blocks)} of {n_blocks} blocks: bad elements lie in " + "; ".join(parts) + more + "."
    )


def _ranges(idx: np.ndarray) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per dimension, the distinct indices of ``idx`` (N, rank) as inclusive ranges."""
    out = []
    for d in range(idx.shape[1]):
        values = np.unique(idx[:, d])
        breaks = np.nonzero(np.diff(values) > 1)[0]
        starts = np.concatenate([[0], breaks + 1])
        ends = np.concatenate([breaks, [len(values) - 1]])
        out.append(
            tuple((int(values[s]), int(values[e])) for s, e in zip(starts, ends, strict=True))
        )
    return tuple(out)


def _render_ranges(ranges: tuple[tuple[int, int], ...], limit: int = 4) -> str:
    text = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in ranges[:limit]]
    if len(ranges) > limit:
        text.append(f"+{len(ranges) - limit} more ranges")
    return " ".join(text) if len(text) == 1 else "{" + ", ".join(text) + "}"
