"""A static check of in-place kernels: reads of an aliased input after its elements are written.

With ``input_output_aliases={i: o}`` the input and the output are one buffer on a chip,
so a kernel that reads elements of the input after a grid step wrote them back through
the output reads the new values (or races with the write-back). The interpreters run
the steps one at a time, without the pipeline's prefetch, and the HLO interpreter on one
core in row-major order: they show such a read only when their own order exposes it
(docs/sanitizer-signals.md). This module finds such reads without running the kernel.

The model is the one the Pallas TPU pipeline follows:

- a core runs its grid points in row-major order; with several cores the leading
  "parallel" dimensions (flattened) are split into contiguous chunks, one per core,
  and the cores run at the same time;
- an input block is fetched for a step only when its index differs from the previous
  step's on the same core; the fetch for step s is issued during step s - 1 (prefetch)
  and waited at the start of step s;
- an output block is written back when the next step on its core has another index (or
  at the core's last step), right after the body of its last step.

So a fetch for step s reads what a write-back from step b < s on the same core may have
already written (for b = s - 1 the two copies are in flight together); a fetch on one
core of elements another core writes back reads them at a time nothing orders. Either is
an ``alias_hazard``. Reads at or before the step that writes the block back (an in-place
update, or an accumulation over consecutive "arbitrary" steps) are clean.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.grid.points import block_indices
from pallas_verify.grid.trace import BlockOperand, PallasCall

__all__ = ["ALIAS_HAZARD", "AliasHazard", "alias_hazards", "core_of", "element_boxes"]

ALIAS_HAZARD = "alias_hazard"
#: Core counts the check splits the parallel sub-grid over (1 is the plain row-major walk).
CORE_COUNTS = (1, 2)
# Pairs of (read event, write event) of differently cut operands: compared in chunks of
# _CHUNK; above _MAX_PAIRS the pair is skipped with a reason.
_MAX_PAIRS = 200_000_000
_CHUNK = 2_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class AliasHazard:
    """One aliased input/output pair whose pipeline reads elements already written back.

    ``kind`` is ``alias_hazard``, or ``skipped`` (with the reason in ``message``) for a
    pair whose accesses cannot be located statically.
    """

    kind: str
    message: str
    call: str
    operand: str
    block: tuple[int, ...] | None = None
    grid_points: tuple[tuple[int, ...], ...] = ()


def core_of(call: PallasCall, points: np.ndarray, cores: int) -> np.ndarray:
    """The core that runs each grid point when the leading parallel dims are split ``cores`` ways."""
    lead = 0
    while lead < len(call.semantics) and call.semantics[lead] == "parallel":
        lead += 1
    if cores == 1 or lead == 0:
        return np.zeros(len(points), np.int64)
    sizes = call.grid[:lead]
    flat = np.ravel_multi_index(tuple(points[:, :lead].T), sizes) if len(points) else np.zeros(0, np.int64)
    chunk = -(-int(np.prod(sizes)) // cores)
    return flat // chunk


def element_boxes(operand: BlockOperand, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The [lo, hi) element ranges (N, rank) of ``operand``'s window at each index row."""
    shape = np.array(operand.array_shape, np.int64)
    block = np.array(operand.block_shape, np.int64)
    lo = indices.astype(np.int64) * block
    hi = lo + block
    for d, window in enumerate(operand.element_window):
        if window is not None:
            lo[:, d] = indices[:, d]
            hi[:, d] = indices[:, d] + window
    return np.clip(lo, 0, shape), np.clip(hi, 0, shape)


def alias_hazards(call: PallasCall, points: np.ndarray,
                  evaluated: Mapping[str, np.ndarray] | None = None) -> list[AliasHazard]:
    """Hazards of every aliased (input, output) pair of ``call`` (its grid is ``points``);
    ``evaluated`` holds operands' block indices already computed (by name)."""
    found = []
    for i, o in call.aliases:
        source, target = call.inputs[i], call.outputs[o]
        if {source.memory_space, target.memory_space} & _jax_compat.UNWINDOWED_SPACES:
            continue  # pl.ANY/HBM operands: the kernel's own DMAs, which no index map describes
        if not all(len(o.element_window) == len(o.array_shape) for o in (source, target)):
            found.append(AliasHazard(kind="skipped", call=call.name, operand=f"{source.name} aliased to {target.name}",
                                     message=(f"static check skipped for {call.name}: the block shape of {source.name} "
                                              f"or {target.name} has a dimension that is neither a block nor a "
                                              "pl.Element window, so its elements cannot be located statically")))
            continue
        hazard = _pair_hazard(call, source, target, points, evaluated or {})
        if hazard is not None:
            found.append(hazard)
    return found


@dataclasses.dataclass(frozen=True)
class _Events:
    """Fetches of the input and write-backs of the output for one split over cores."""

    core: np.ndarray  # per event
    step: np.ndarray  # the step on its core (the fetch's consumer, or the write-back's last step)
    point: np.ndarray  # the grid point of that step
    lo: np.ndarray
    hi: np.ndarray
    block: np.ndarray


def _events(operand, points, blocks, core, *, write: bool) -> _Events:
    n = len(points)
    step = np.zeros(n, np.int64)
    new_run = np.ones(n, bool)
    if n > 1:
        same_core = core[1:] == core[:-1]
        same_block = np.all(blocks[1:] == blocks[:-1], axis=1)
        new_run[1:] = ~(same_core & same_block)
        starts = np.r_[0, np.nonzero(~same_core)[0] + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, n]))
        step = np.arange(n) - first
    keep = np.r_[new_run[1:], True] if write else new_run  # a write-back at a run's last step
    lo, hi = element_boxes(operand, blocks[keep])
    return _Events(core[keep], step[keep], points[keep], lo, hi, blocks[keep])


def _pair_hazard(call, source, target, points, evaluated) -> AliasHazard | None:
    pair = f"{source.name} aliased to {target.name}"
    reads_at, writes_at = (evaluated[o.name] if o.name in evaluated else block_indices(call, o, points)
                           for o in (source, target))
    tiled = (source.block_shape == target.block_shape and source.array_shape == target.array_shape
             and not any(w is not None for w in (*source.element_window, *target.element_window)))
    for cores in CORE_COUNTS:
        core = core_of(call, points, cores)
        if cores > 1 and core.max(initial=0) == 0:
            continue  # nothing to split: the same walk as one core
        reads = _events(source, points, reads_at, core, write=False)
        writes = _events(target, points, writes_at, core, write=True)
        if not tiled and len(reads.core) * len(writes.core) > _MAX_PAIRS:
            return AliasHazard(kind="skipped", call=call.name, operand=pair, message=(
                f"static check skipped for {call.name}: {pair} has {len(reads.core)} input fetches and "
                f"{len(writes.core)} output write-backs with different windows, too many to "
                "compare pairwise; check a smaller grid"))
        hit = _first_conflict(reads, writes, tiled=tiled)
        if hit is not None:
            return _hazard(call, (source, target), reads, writes, *hit, cores=cores)
    return None


def _first_conflict(reads: _Events, writes: _Events, *, tiled: bool) -> tuple[int, int] | None:
    """(read event, write event) of the first read that sees a write-back it may not see.

    ``tiled``: both operands cut the array into the same blocks, so element ranges
    overlap exactly when they are equal (grouped in one pass instead of pairwise).
    """
    if tiled:
        return _first_conflict_tiled(reads, writes)
    chunk = max(1, _CHUNK // max(len(writes.core), 1))
    for start in range(0, len(reads.core), chunk):
        part = slice(start, start + chunk)
        lo, hi = reads.lo[part, None], reads.hi[part, None]
        overlap = np.all((lo < writes.hi[None]) & (writes.lo[None] < hi), axis=2)
        other_core = reads.core[part, None] != writes.core[None]
        bad = overlap & (other_core | (reads.step[part, None] > writes.step[None]))
        if bad.any():
            r, w = np.argwhere(bad)[0]
            return start + int(r), int(w)
    return None


def _first_conflict_tiled(reads: _Events, writes: _Events) -> tuple[int, int] | None:
    n = len(reads.core)
    ids = np.unique(np.concatenate([reads.lo, writes.lo]), axis=0, return_inverse=True)[1].reshape(-1)
    rid, wid = ids[:n], ids[n:]
    cores = int(max(reads.core.max(initial=0), writes.core.max(initial=0))) + 1
    never = np.iinfo(np.int64).max
    first = np.full((int(ids.max(initial=0)) + 1, cores), never)  # first write-back step per block and core
    np.minimum.at(first, (wid, writes.core), writes.step)
    written = first < never
    by_others = written[rid].sum(axis=1) - written[rid, reads.core] > 0
    bad = by_others | (first[rid, reads.core] < reads.step)
    if not bad.any():
        return None
    r = int(np.argmax(bad))
    culprit = (wid == rid[r]) & ((writes.core != reads.core[r]) | (writes.step < reads.step[r]))
    return r, int(np.argmax(culprit))


def _hazard(call, operands, reads, writes, r, w, *, cores) -> AliasHazard:
    source, target = operands
    pair = f"{source.name} aliased to {target.name}"
    written = tuple(int(v) for v in writes.block[w])
    wrote_at = tuple(int(v) for v in writes.point[w])
    read_at = tuple(int(v) for v in reads.point[r])
    lo, hi = np.maximum(reads.lo[r], writes.lo[w]), np.minimum(reads.hi[r], writes.hi[w])
    elements = ", ".join(f"{a}:{b}" for a, b in zip(lo, hi, strict=True))
    if reads.core[r] == writes.core[w]:
        where = "on one core" if cores == 1 else f"on core {reads.core[r]} of {cores}"
        if reads.step[r] == writes.step[w] + 1:
            order = (f"the fetch for {read_at} is issued during {wrote_at} (prefetch), while that "
                     "step's write-back of the block may be in flight")
        else:
            order = f"{read_at} runs after {wrote_at} has written the block back"
        when = f"{where}, {order}"
        fix = ("Read the neighbouring blocks from a separate (un-aliased) input, or order the grid so "
               "that every block is read before the step that writes it back (an 'arbitrary' axis "
               "whose steps read before they write).")
    else:
        when = (f"with the leading 'parallel' dimension(s) split over {cores} cores, grid point "
                f"{read_at} runs on core {reads.core[r]} while {wrote_at} writes the block back on "
                f"core {writes.core[w]}, and nothing orders the two")
        fix = ("Read the neighbouring blocks from a separate (un-aliased) input, or mark the axis "
               "'arbitrary' so one core runs it in order and reads each block before writing it.")
    return AliasHazard(
        kind=ALIAS_HAZARD,
        call=call.name,
        operand=pair,
        block=written,
        grid_points=(wrote_at, read_at),
        message=(
            f"{call.name}: {pair} (input_output_aliases: one buffer on a chip). Grid point "
            f"{wrote_at} writes block {written} of {target.name} (elements [{elements}]) "
            f"and grid point {read_at} reads those elements through the input: {when}. On "
            "a chip the read sees the new values or races with the write-back; the interpreters "
            f"run the steps one at a time and may not show it. {fix}"
        ),
    )
