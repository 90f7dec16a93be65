"""Which grid orders and core assignments TPU interpret mode actually ran.

TPU interpret mode calls a run's recorder (``_jax_compat.tpu_run_params(recorder=)``) for
every grid point, in the order it runs them: the order of "parallel" dimensions is
permuted by ``random_seed`` and the permuted points are split between
``num_cores_or_threads`` cores. ``RECORDER`` is one function for every run (the params
are part of jax's trace cache key: a new callable per run would retrace every case); it
appends to the list ``recording()`` opened. A run's schedule is its tuple of
``(grid point, core)``.

``Coverage`` folds the schedules of a search into the figure the report carries: how
many distinct schedules (orders with their core assignment) and distinct orders ran, over
how many runs and grids, on which cores. ``cores_named`` names, for blamed grid points,
the core that ran each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pallas_verify import _jax_compat

__all__ = ["MAX_POINTS", "RECORDER", "Coverage", "Schedule", "cores_named", "recording"]

Schedule = tuple[tuple[tuple[int, ...], int], ...]

#: Grid points kept per run; a longer run is recorded up to here (its order then counts
#: as the order of its first MAX_POINTS points).
MAX_POINTS = 4096

# The list being recorded into: the interpreter calls RECORDER from XLA's callback
# threads, so it is one list for the process (cases run one at a time per process).
_CURRENT: list[list[tuple[tuple[int, ...], int]] | None] = [None]
_LOCK = threading.Lock()


def _record(point: tuple[int, ...], core: int) -> None:
    with _LOCK:
        points = _CURRENT[0]
        if points is not None and len(points) < MAX_POINTS:
            points.append((point, core))
    _jax_compat.on_grid_point(point, core)  # the sweep a memory watch attributes this core's accesses to


#: The recorder of every TPU interpret run pallas-verify makes: ``(grid point, core)``.
RECORDER = _record


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[tuple[int, ...], int]]]:
    """Collect the (grid point, core) pairs ``RECORDER`` sees meanwhile."""
    points: list[tuple[tuple[int, ...], int]] = []
    with _LOCK:
        saved, _CURRENT[0] = _CURRENT[0], points
    try:
        yield points
    finally:
        with _LOCK:
            _CURRENT[0] = saved


@dataclasses.dataclass
class Coverage:
    """Schedules one search ran (its base runs and reruns alike).

    Attributes:
      runs: runs that recorded at least one grid point.
      points: grid points run, over all runs.
    """

    runs: int = 0
    points: int = 0
    _schedules: set[Schedule] = dataclasses.field(default_factory=set, repr=False)
    _orders: set[tuple[tuple[int, ...], ...]] = dataclasses.field(default_factory=set, repr=False)
    _grids: set[frozenset[tuple[int, ...]]] = dataclasses.field(default_factory=set, repr=False)
    _cores: set[int] = dataclasses.field(default_factory=set, repr=False)

    def add(self, schedule: Schedule | None) -> None:
        if not schedule:
            return
        self.runs += 1
        self.points += len(schedule)
        self._schedules.add(schedule)
        self._orders.add(tuple(p for p, _ in schedule))
        self._grids.add(frozenset(p for p, _ in schedule))
        self._cores.update(c for _, c in schedule)

    def figure(self) -> dict[str, Any]:
        """The report's figure: ``runs``, ``points``, distinct ``grids``, distinct
        ``orders`` (grid point sequences), distinct ``schedules`` (orders with the core of
        each point), and the ``cores`` that ran a point."""
        return {"runs": self.runs, "points": self.points, "grids": len(self._grids), "orders": len(self._orders),
                "schedules": len(self._schedules), "cores": sorted(self._cores)}


def cores_named(schedule: Sequence[Sequence[Any]], writers: Sequence[Sequence[Any]]) -> str | None:
    """``"block (1, 0) was written on core 1 (grid point (1, 0))"`` for blamed blocks and
    their writer grid points, from a run's schedule; None when one core ran everything."""
    core_of: Mapping[tuple[int, ...], int] = {tuple(p): int(c) for p, c in schedule}
    if len(set(core_of.values())) < 2:
        return None
    parts = []
    for block, points in writers:
        ran = [(tuple(p), core_of[tuple(p)]) for p in points if tuple(p) in core_of]
        if ran:
            on = ", ".join(f"core {c} (grid point {p})" for p, c in ran[:4])
            parts.append(f"block {tuple(block)} was written on {on}")
    return "; ".join(parts) or None
