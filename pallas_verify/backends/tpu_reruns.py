"""TPU interpret mode's metamorphic reruns, one table: per rerun, the finding kind it can
show, the knobs it changes and how it picks their other values, the kernel fact it needs
(``_jax_compat.kernel_facts``), the memory-watch fact that settles it
(``MemoryWatch.saw``), and why it is skipped or settled.

``TpuInterpret.variants`` (the reruns of a mode), ``races_possible``, which reruns a run
needs (``kinds_of``, ``settle``), the reruns' notes (``reruns.RerunTally``) and the kind a
difference only the knobs together show is named by (``joint_kind``) all derive from it.
Whether a rerun compiles anew or is applied to the base run's compile is the backend's
``recompiles``: its knobs against ``_jax_compat.run_time_knobs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pallas_verify import _jax_compat
from pallas_verify.findings import Kind

__all__ = ["RACE_DETECTION", "RERUNS", "SKIPPED_CHECKS", "RerunEntry", "joint_kind", "kinds_of", "races_possible",
           "settle", "variants"]

#: What the race rerun sets over the base mode: race detection on 2 cores.
RACE_DETECTION: dict[str, Any] = {"detect_races": True, "num_cores_or_threads": 2}


@dataclasses.dataclass(frozen=True)
class RerunEntry:
    """One metamorphic rerun.

    Attributes:
      kind: the finding kind it can show.
      knobs: the InterpretParams fields it changes.
      change: their values in the rerun, given the base run's mode.
      quiet: it runs with race detection off (the base run already did it).
      applies: whether a base run in a mode needs it at all.
      needs: the kernel fact without which it cannot change the outputs.
      settled_by: the memory-watch fact without which it could not (None: none settles it).
      skipped: why a kernel without ``needs`` is not rerun.
      settled: why a watched run settles it.
    """

    kind: Kind
    knobs: tuple[str, ...]
    change: Callable[[Mapping[str, Any]], dict[str, Any]]
    needs: str
    skipped: str
    settled_by: str | None = None
    settled: str = ""
    quiet: bool = True
    applies: Callable[[Mapping[str, Any]], bool] = lambda mode: True


def _other_choice(knob: str, mode: Mapping[str, Any]) -> str:
    """The next value of an InterpretParams Literal field after the one in ``mode``."""
    from strategies import literal_choices

    choices = literal_choices("tpu")[knob]  # upstream default first
    current = mode.get(knob, choices[0])
    return choices[(choices.index(current) + 1) % len(choices)]


def _next_seed(mode: Mapping[str, Any]) -> int:
    return (mode.get("random_seed") or 0) + 1


def _cores(mode: Mapping[str, Any]) -> int:
    return mode.get("num_cores_or_threads", 1)


#: The reruns, in the order a difference only the knobs together show is named by
#: (``joint_kind``): the fill first, whose knob reaches the least of a kernel.
RERUNS: tuple[RerunEntry, ...] = (
    RerunEntry(kind="uninitialized_read", knobs=("uninitialized_memory",),
               change=lambda mode: {"uninitialized_memory": _other_choice("uninitialized_memory", mode)},
               needs=_jax_compat.FILL_REACHES,
               skipped="no scratch buffer, run_scoped allocation or block overhanging its array",
               settled_by="fill",
               settled="its base run read no memory before something wrote it (no fill reached the kernel)"),
    RerunEntry(kind="dma_ordering", knobs=("dma_execution_mode",),
               change=lambda mode: {"dma_execution_mode": _other_choice("dma_execution_mode", mode)},
               needs=_jax_compat.EXPLICIT_DMA, skipped="no explicit DMA (dma_start)"),
    RerunEntry(kind="grid_order", knobs=("random_seed", "num_cores_or_threads"),
               change=lambda mode: {"random_seed": _next_seed(mode), "num_cores_or_threads": 1 if _cores(mode) > 1 else 2},
               needs=_jax_compat.PARALLEL_GRID, skipped="no 'parallel' grid dimension of more than one step",
               settled_by="order",
               settled="in its base run no sweep of the parallel grid axes read memory another sweep wrote, nor "
                       "overwrote HBM another sweep wrote or read"),
    # The base run looked for no race between cores: a rerun does, on 2 cores in another
    # grid order, judged by its race reports alone.
    RerunEntry(kind="race", knobs=("detect_races", "num_cores_or_threads", "random_seed"),
               change=lambda mode: {**RACE_DETECTION, "random_seed": _next_seed(mode)}, quiet=False,
               applies=lambda mode: not (mode.get("detect_races") and _cores(mode) > 1),
               needs=_jax_compat.PARALLEL_GRID,
               skipped="no 'parallel' grid dimension of more than one step to split over two cores",
               settled_by="order", settled="in its base run no two sweeps of the parallel grid axes touched the same HBM"),
)
_BY_KIND: dict[str, RerunEntry] = {entry.kind: entry for entry in RERUNS}

#: Checks of a run itself that the backend leaves out where nothing can trip them, and why.
SKIPPED_CHECKS: dict[str, str] = {
    "race": "nothing runs concurrently: no DMA, and no 'parallel' grid dimension split over two cores",
}


def variants(mode: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The reruns of a base run in ``mode``: (kind, the mode with the rerun's knobs changed)."""
    quiet = {**mode, "detect_races": False}
    return [(e.kind, {**(quiet if e.quiet else mode), **e.change(mode)}) for e in RERUNS if e.applies(mode)]


def kinds_of(facts: frozenset[str]) -> frozenset[str]:
    """The reruns whose knob can change the outputs of a kernel with ``facts``."""
    return frozenset(e.kind for e in RERUNS if e.needs in facts)


def settle(kinds: frozenset[str], saw: Mapping[str, bool] | None) -> tuple[frozenset[str], frozenset[str]]:
    """What a watched run (``MemoryWatch.saw``; None: not watched) says of the reruns
    ``kinds``: those that could change its outputs, and those it shows could not.

    A rerun settled by the fill is needed where the run read memory nothing wrote though
    the jaxpr showed no scratch or padding (an output block read before it is written).
    """
    if saw is None:
        return kinds, frozenset()
    shown = frozenset(k for k in kinds if _BY_KIND[k].settled_by is not None and not saw[_BY_KIND[k].settled_by])
    read_unwritten = frozenset(e.kind for e in RERUNS if e.settled_by == "fill" and saw["fill"])
    return (kinds - shown) | read_unwritten, shown


def watch_settles(kinds: frozenset[str]) -> bool:
    """Whether a watch of the run could settle any of the reruns ``kinds``."""
    return any(_BY_KIND[k].settled_by is not None for k in kinds)


def races_possible(facts: frozenset[str] | None, mode: Mapping[str, Any]) -> bool:
    """Whether anything in a kernel with ``facts`` runs concurrently under ``mode``: DMAs
    (their engines run beside the core) or a parallel grid axis split over several cores.
    With neither, TPU interpret mode's race detector cannot find a race."""
    if facts is None:
        return True
    return _jax_compat.EXPLICIT_DMA in facts or (_jax_compat.PARALLEL_GRID in facts and _cores(mode) > 1)


def joint_kind(kinds: Sequence[str]) -> str:
    """The kind a difference only the reruns ``kinds`` together show is named by: the first
    of them in ``RERUNS``."""
    return min(kinds, key=lambda k: [e.kind for e in RERUNS].index(k))


def reasons() -> dict[str, dict[str, str]]:
    """Why a rerun or check was left out, per way of leaving it out (``RerunTally.notes``)."""
    return {"rerun": {e.kind: e.skipped for e in RERUNS}, "check": dict(SKIPPED_CHECKS),
            "settled": {e.kind: e.settled for e in RERUNS if e.settled_by is not None}}
