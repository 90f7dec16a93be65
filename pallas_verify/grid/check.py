"""A static check of a kernel's grid: races, unwritten output blocks, revisits, OOB blocks.

The kernel is traced (nothing runs); every ``pallas_call`` in its jaxpr is found, and the
out_specs index maps are evaluated at every grid point. Issues are the finding kinds of
the house plan: ``race`` (an output block written from grid points that differ along a
parallel dimension), ``uninitialized_read`` (an output block no grid point writes),
``revisit`` (an output block whose visits are not consecutive in the grid's row-major
order, unless its BlockSpec's pipeline mode declares ``revisit=pl.RevisitMode.ANY``), ``out_of_bounds`` (a block index outside its array) and ``input_mutation``
(a kernel that writes into an un-aliased input left in HBM/ANY; semaphore operands,
which a kernel signals and waits on, are not data and never count); alias.py adds
``alias_hazard`` (an aliased input read after its elements were written back). An issue of kind
``skipped`` is not a finding: it says which part could not be checked and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pallas_verify.grid.alias import alias_hazards
from pallas_verify.grid.trace import (
    BlockOperand,
    PallasCall,
    block_indices,
    grid_mappings,
    grid_points,
)

__all__ = [
    "DEFAULT_MAX_POINTS",
    "SKIPPED",
    "BlockOperand",
    "GridIssue",
    "PallasCall",
    "block_indices",
    "check_call",
    "check_grid",
    "describe_points",
    "grid_mappings",
    "grid_points",
    "skipped",
]

DEFAULT_MAX_POINTS = 100_000
SKIPPED = "skipped"
NO_KERNEL = "no_kernel"  # the example ran no Pallas kernel at all: nothing to check, nothing Pallas tested
DOT_ROUNDING = "dot_rounding"  # a fact, not a problem: a call rounds dot operands to ``operand`` (grid.dots)
_MAX_LISTED = 4


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridIssue:
    """One problem found in a pallas_call's grid, or one part that was skipped.

    Attributes:
      kind: a finding kind (``race``, ``uninitialized_read``, ``revisit``,
        ``out_of_bounds``, ``input_mutation``, ``alias_hazard``) or ``skipped``.
      message: what is wrong and how to fix it, naming the operand, block and grid points.
      call: the kernel function's name inside the pallas_call.
      operand: e.g. ``"output 0"``; ``""`` when the issue concerns the whole call.
      block: the offending block index, if one.
      grid_points: some of the grid points involved (at most a few).
      grid, semantics: the call's grid and each dimension's semantics (a finding's, for
        its picture: ``reports.grid_picture``); ``()`` otherwise.
      block_counts: how many blocks ``operand`` has per dimension; None when the issue
        names no operand of the call (or it is not a finding).
    """

    kind: str
    message: str
    call: str
    operand: str = ""
    block: tuple[int, ...] | None = None
    grid_points: tuple[tuple[int, ...], ...] = ()
    grid: tuple[int, ...] = ()
    semantics: tuple[str, ...] = ()
    block_counts: tuple[int, ...] | None = None

    @property
    def is_finding(self) -> bool:
        return self.kind not in (SKIPPED, NO_KERNEL, DOT_ROUNDING)


def check_grid(
    kernel: Callable[..., Any],
    inputs: Sequence[Any],
    config: Mapping[str, Any],
    *,
    max_points: int = DEFAULT_MAX_POINTS,
) -> list[GridIssue]:
    """Static issues of every pallas_call in ``kernel(*inputs, **config)``."""
    issues: list[GridIssue] = []
    for call in grid_mappings(kernel, inputs, config):
        issues.extend(check_call(call, max_points=max_points))
    return issues


def check_call(call: PallasCall, *, max_points: int = DEFAULT_MAX_POINTS) -> list[GridIssue]:
    """Issues of one pallas_call (see :func:`check_grid`)."""
    issues = [_mutation_issue(call, index) for index in call.mutated_inputs]
    reason = _skip_reason(call, max_points)
    if reason is not None:
        return [*issues, skipped(call.name, reason)]
    points = grid_points(call.grid)
    evaluated: dict[str, np.ndarray] = {}  # operand name -> its block indices at every grid point
    for operand in (*call.inputs, *call.outputs):
        if operand.element_dims:
            issues.append(skipped(call.name, (
                f"{operand.name} has block dims {', '.join(operand.element_dims)}, whose windows start at "
                "element offsets the index_map computes; they are not judged statically (the dynamic "
                "searches run them)"), operand.name))
        if not operand.windowed:
            continue
        try:
            blocks = evaluated[operand.name] = block_indices(call, operand, points)
        except Exception as exc:  # an index map this check cannot evaluate: say so, never pass
            issues.append(skipped(call.name, (
                f"the index_map of {operand.name} could not be evaluated ({type(exc).__name__}: "
                f"{_first_line(exc)}); the dynamic searches still run it"), operand.name))
            continue
        issues.extend(_bounds_issues(call, operand, points, blocks))
        if operand.is_output:
            issues.extend(_output_issues(call, operand, points, blocks))
    issues.extend(GridIssue(**vars(h)) for h in alias_hazards(call, points, evaluated))
    return [_placed(call, i) for i in issues]


def _placed(call: PallasCall, issue: GridIssue) -> GridIssue:
    """A finding with its call's grid and semantics and its operand's block counts."""
    if not issue.is_finding:
        return issue
    counts = {o.name: tuple(int(c) for c in o.block_counts) for o in (*call.inputs, *call.outputs)}
    return dataclasses.replace(issue, grid=tuple(int(g) for g in call.grid), semantics=tuple(call.semantics),
                               block_counts=counts.get(issue.operand))


def skipped(call: str, reason: str, operand: str = "") -> GridIssue:
    """The issue saying which part of the static check did not run, and why."""
    return GridIssue(kind=SKIPPED, message=f"static check skipped for {call}: {reason}", call=call, operand=operand)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _skip_reason(call: PallasCall, max_points: int) -> str | None:
    if call.skip_reason is not None:
        return call.skip_reason
    size = int(np.prod(call.grid, dtype=np.int64))
    if size > max_points:
        return (
            f"grid too large: {call.name} has grid {call.grid} = {size} points, over "
            f"max_points={max_points}; raise max_points to check it"
        )
    return None


def _output_issues(call, operand, points, blocks) -> list[GridIssue]:
    return [
        *_race_issues(call, operand, points, blocks),
        *_unwritten_issues(call, operand, blocks),
        *_revisit_issues(call, operand, points, blocks),
    ]


def _group(rows: np.ndarray) -> np.ndarray:
    """Per row, the id of its distinct value (ids follow sorted order of the rows)."""
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)


def _more(count: int, what: str) -> str:
    return f" ({count - 1} more {what} of this operand have the same problem)" if count > 1 else ""


def _race_issues(call, operand, points, blocks) -> list[GridIssue]:
    parallel = [d for d, s in enumerate(call.semantics) if s == "parallel"]
    if not parallel:
        return []
    ids = _group(blocks)
    pairs = np.unique(np.stack([ids, _group(points[:, parallel])], axis=1), axis=0)
    writers = np.bincount(pairs[:, 0], minlength=int(ids.max()) + 1)
    racy = np.nonzero(writers > 1)[0]
    if not len(racy):
        return []
    pts = points[ids == racy[0]]
    block = _tuple(blocks[ids == racy[0]][0])
    names = ", ".join(_axis_name(call, d) for d in parallel if len(np.unique(pts[:, d])) > 1)
    if operand.is_output and operand.index in call.discarded:  # written from several cores, read by no one
        return [GridIssue(kind=SKIPPED, call=call.name, operand=operand.name, message=(
            f"{call.name}: {operand.name} is written at grid points {describe_points(pts, call)} along parallel "
            f"dimension(s) {names} (block {block}), a race between cores, but the function discards that output: "
            "nothing it writes reaches the result, so it is no finding (the buffer is scratch in all but name; "
            "pltpu.VMEM scratch_shapes say so)"))]
    return [
        GridIssue(
            kind="race",
            call=call.name,
            operand=operand.name,
            block=block,
            grid_points=_few(pts),
            message=(
                f"{call.name}: block {block} of {operand.name} is written at grid points "
                f"{describe_points(pts, call)}, which differ along parallel dimension(s) {names}; "
                "grid points of a parallel dimension may run concurrently on different cores"
                f"{_more(len(racy), 'blocks')}. Mark {names} 'arbitrary', or make the out_specs "
                "index_map depend on it."
            ),
        )
    ]


def _unwritten_issues(call, operand, blocks) -> list[GridIssue]:
    if operand.index in call.aliased_outputs:
        return []
    counts = operand.block_counts
    written = np.zeros(counts, bool)
    inside = np.all((blocks >= 0) & (blocks < np.array(counts)), axis=1)
    written[tuple(blocks[inside].T)] = True
    missing = np.argwhere(~written)
    if not len(missing):
        return []
    listed = ", ".join(str(_tuple(m)) for m in missing[:_MAX_LISTED])
    more = f" and {len(missing) - _MAX_LISTED} more" if len(missing) > _MAX_LISTED else ""
    return [
        GridIssue(
            kind="uninitialized_read",
            call=call.name,
            operand=operand.name,
            block=_tuple(missing[0]),
            message=(
                f"{call.name}: {len(missing)} of {written.size} blocks of {operand.name} "
                f"(shape {operand.array_shape}, block {operand.block_shape}) are written at no grid "
                f"point: {listed}{more}; they keep whatever the output buffer held. Cover every "
                "block with the grid and the out_specs index_map."
            ),
        )
    ]


def _revisit_issues(call, operand, points, blocks) -> list[GridIssue]:
    if operand.revisit_any:  # pl.Buffered(..., revisit=pl.RevisitMode.ANY): Pallas restores revisited blocks
        return []
    parallel = [d for d, s in enumerate(call.semantics) if s == "parallel"]
    keys = blocks if not parallel else np.concatenate([blocks, points[:, parallel]], axis=1)
    ids = _group(keys)
    order = np.argsort(ids, kind="stable")
    same = ids[order][1:] == ids[order][:-1]
    jumps = np.nonzero(same & (np.diff(order) > 1))[0]
    if not len(jumps):
        return []
    first, again = points[order[jumps[0]]], points[order[jumps[0] + 1]]
    mask = ids == ids[order[jumps[0]]]
    block = _tuple(blocks[mask][0])
    count = len(np.unique(ids[order[jumps]]))
    return [
        GridIssue(
            kind="revisit",
            call=call.name,
            operand=operand.name,
            block=block,
            grid_points=(_tuple(first), _tuple(again)),
            message=(
                f"{call.name}: block {block} of {operand.name} is visited at grid points "
                f"{describe_points(points[mask], call)}, not consecutively in row-major order: it "
                f"is left after {_tuple(first)} and revisited at {_tuple(again)}, so the earlier "
                f"visits' result is written back and then overwritten{_more(count, 'blocks')}. Put "
                "the grid dimensions the block does not depend on (the reduction axes) last."
            ),
        )
    ]


def _bounds_issues(call, operand, points, blocks) -> list[GridIssue]:
    counts = np.array(operand.block_counts)
    bad = np.any((blocks < 0) | (blocks >= counts), axis=1)
    if not bad.any():
        return []
    first = _tuple(blocks[bad][0])
    return [
        GridIssue(
            kind="out_of_bounds",
            call=call.name,
            operand=operand.name,
            block=first,
            grid_points=_few(points[bad]),
            message=(
                f"{call.name}: the index_map of {operand.name} gives block {first}, outside the "
                f"{tuple(int(c) for c in counts)} blocks of its array (shape {operand.array_shape}, "
                f"block {operand.block_shape}), at grid points {describe_points(points[bad], call)}. "
                "Clamp the index or shrink the grid."
            ),
        )
    ]


def _mutation_issue(call: PallasCall, index: int) -> GridIssue:
    operand = call.inputs[index]
    return GridIssue(
        kind="input_mutation",
        call=call.name,
        operand=operand.name,
        message=(
            f"{call.name}: the kernel writes into {operand.name} (shape "
            f"{operand.array_shape}, memory space {operand.memory_space}), an input that is "
            "not aliased to an output; on hardware this overwrites the caller's array. Write "
            "into an output, or declare the aliasing with input_output_aliases."
        ),
    )


def describe_points(points: np.ndarray, call: PallasCall | None = None) -> str:
    """Grid points compressed into boxes, e.g. ``(2, 0, k) for k in 0..3``."""
    boxes = _boxes([_tuple(p) for p in np.asarray(points)])
    names = [_axis_name(call, d) for d in range(np.asarray(points).shape[1])]
    parts = [_render_box(box, names) for box in boxes[:_MAX_LISTED]]
    if len(boxes) > _MAX_LISTED:
        rest = sum(int(np.prod([hi - lo + 1 for lo, hi in b])) for b in boxes[_MAX_LISTED:])
        parts.append(f"and {rest} more")
    return "; ".join(parts)


Box = tuple[tuple[int, int], ...]


def _boxes(points: list[tuple[int, ...]]) -> list[Box]:
    """Sorted distinct points as a list of boxes (a range per dimension)."""
    points = sorted(set(points))
    if not points or not points[0]:
        return [()] if points else []
    by_head: dict[int, list[tuple[int, ...]]] = {}
    for p in points:
        by_head.setdefault(p[0], []).append(p[1:])
    merged: list[tuple[int, int, list[Box]]] = []
    for head, tails in by_head.items():
        rest = _boxes(tails)
        if merged and merged[-1][1] == head - 1 and merged[-1][2] == rest:
            merged[-1] = (merged[-1][0], head, rest)
        else:
            merged.append((head, head, rest))
    return [((lo, hi), *box) for lo, hi, rest in merged for box in rest]


def _render_box(box: Box, names: list[str]) -> str:
    coords, ranges = [], []
    for (lo, hi), name in zip(box, names, strict=False):
        coords.append(str(lo) if lo == hi else name)
        if lo != hi:
            ranges.append(f"{name} in {lo}..{hi}")
    text = f"({', '.join(coords)}{',' if len(coords) == 1 else ''})"
    return f"{text} for {', '.join(ranges)}" if ranges else text


_AXIS_LETTERS = "ijklmnpqrs"


def _axis_name(call: PallasCall | None, dim: int) -> str:
    if call is not None and call.grid_names is not None:
        return str(call.grid_names[dim])
    return _AXIS_LETTERS[dim] if dim < len(_AXIS_LETTERS) else f"g{dim}"


def _tuple(row: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in row)


def _few(points: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(_tuple(p) for p in points[:_MAX_LISTED])
