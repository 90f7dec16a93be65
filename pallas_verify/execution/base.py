"""The Executor interface and its unit of work.

A unit of work (``Work``) is plain data, so it crosses a pipe or a cluster: a spec by
reference, the backends, a seed and an example count (the configs and inputs are drawn
from the seed), a mode, the example database's address, and the name of the function
that runs it (``entry``, ``"module:function"``). An Executor runs units where it can
(worker processes here, Ray tasks on a cluster) and hands back each one's outcome
(``Done``) as soon as it finishes: its result dict, or a ``crash`` / ``timeout`` /
``exception`` result when the unit died, hung or raised.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import itertools
import socket
import traceback
from collections.abc import Mapping
from typing import Any

__all__ = ["Done", "Executor", "Work", "lost", "run_entry"]

_IDS = itertools.count(1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Work:
    """One unit of work; every field is plain, picklable data.

    Attributes:
      entry: ``"module:function"`` called with this Work in the worker; returns a dict.
      kind: what the entry does with it (``"slice"``, ``"verify"``, ``"replay"``).
      spec_ref: the spec by reference (``loader.spec_ref``); "" for a replay.
      backends: backend names the unit runs on.
      seed: the seed its configs and inputs are drawn from; None: a fresh one.
      max_examples: examples to draw.
      mode: "" for the backends' own mode draws, else the name of a fixed mode.
      hardware: ``"tpu:<chip>"`` / ``"gpu:<gpu>"`` when the unit must run on that
        real accelerator; None when any CPU will do.
      limit_s: wall-time limit of the whole unit (hang -> ``timeout``).
      params: the entry's other arguments (time limits, paths, database address).
      env: environment variables the worker must have before jax loads.
      tag: the driver's key for the unit (which cell it serves); never read by workers.
      uid: unique per unit within a process.
    """

    entry: str
    kind: str
    spec_ref: str = ""
    backends: tuple[str, ...] = ()
    seed: int | None = None
    max_examples: int | None = None
    mode: str = ""
    hardware: str | None = None
    limit_s: float = 600.0
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tag: str = ""
    uid: int = dataclasses.field(default_factory=lambda: next(_IDS))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Done:
    """The outcome of one unit.

    Attributes:
      work: the unit.
      result: the entry's dict, or ``{"kind": crash|timeout|exception, "error": ...,
        "traceback": ...}`` when it did not return.
      node: where it ran (``host`` locally, ``host:nodeid`` on Ray).
      seconds: wall time from submission to outcome.
      attempts: how many times it was started (more than 1 after its node died).
    """

    work: Work
    result: dict[str, Any]
    node: str
    seconds: float
    attempts: int = 1


def lost(kind: str, message: str, traceback: str = "") -> dict[str, Any]:
    """The result of a unit that did not return: a crash, a timeout or an exception."""
    return {"kind": kind, "error": message, "traceback": traceback[-4000:]}


def run_entry(work: Work) -> dict[str, Any]:
    """Call the unit's entry function in this process (the worker side of every executor);
    an exception it raises is the unit's ``exception`` result."""
    module, _, name = work.entry.partition(":")
    try:
        return getattr(importlib.import_module(module), name)(work)
    except Exception as exc:
        return lost("exception", f"{type(exc).__name__}: {exc}", traceback.format_exc())


def host() -> str:
    return socket.gethostname()


class Executor(abc.ABC):
    """Runs units of work and reports each outcome as it finishes.

    Use as a context manager; ``close`` stops every worker. ``submit`` never blocks:
    call it while ``free()`` is positive. ``poll`` returns the units finished since the
    last call (waiting up to ``timeout_s`` for the first). ``cancel`` stops every unit
    still running (SIGINT, end of budget) and returns them.
    """

    name: str = ""
    retried: int = 0  # units started again elsewhere after their node died

    @abc.abstractmethod
    def slots(self) -> int:
        """How many units run at once."""

    @abc.abstractmethod
    def offers(self, hardware: str) -> str | None:
        """None when some worker has the accelerator ``hardware``, else the reason."""

    @abc.abstractmethod
    def submit(self, work: Work) -> None: ...

    @abc.abstractmethod
    def poll(self, timeout_s: float) -> list[Done]: ...

    @abc.abstractmethod
    def running(self) -> list[Work]: ...

    @abc.abstractmethod
    def cancel(self) -> list[Work]: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def free(self) -> int:
        return self.slots() - len(self.running())

    def accepts(self, hardware: str | None) -> bool:
        """Whether a unit needing ``hardware`` (None: a CPU) can start now."""
        return self.free() > 0

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
