"""The Executor interface and its unit of work.

A unit of work (``Work``) is plain data, so it crosses a pipe or a cluster: a spec by
reference, the backends, a seed and an example count (the configs and inputs are drawn
from the seed), a mode, the example database's address, and the name of the function
that runs it (``entry``, ``"module:function"``). An Executor runs units where it can
(worker processes here, Ray tasks on a cluster) and hands back, as soon as they happen:

- ``Update``: a value the unit sent while it ran (``emit``), such as a finding the moment
  it was seen, so a unit cancelled later keeps what it found;
- ``Done``: the unit's end, either the value its entry returned or a ``Failure`` saying
  why it did not return (its process died, it overran its limit, its node left, the entry
  raised, no node can run it). What a failure means for a campaign is decided once, by the
  campaign (``campaigns.units``), never here.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import itertools
import socket
import traceback
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["FAILURE_CAUSES", "Done", "Executor", "Failure", "Update", "Work", "emit", "run_entry"]

_IDS = itertools.count(1)

#: Why a unit did not return, as executors say it (``Failure.cause``).
FAILURE_CAUSES: Mapping[str, str] = {
    "died": "the process running the unit died (a signal, an exit, the out-of-memory killer)",
    "overran": "the unit ran past its time limit and was stopped",
    "node": "the cluster node running the unit left, or its result was lost with it",
    "raised": "the unit's entry raised an exception",
    "unplaceable": "no worker offers the hardware the unit needs",
    "executor": "the executor itself failed to run or collect the unit",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Work:
    """One unit of work; every field is plain, picklable data.

    Attributes:
      entry: ``"module:function"`` called with this Work in the worker; returns the
        unit's value (plain data).
      kind: what the entry does with it (``"slice"``, ``"verify"``, ``"replay"``).
      spec_ref: the spec by reference (``loader.spec_ref``); "" for a replay.
      backends: backend names the unit runs on.
      seed: the seed its configs and inputs are drawn from; None: a fresh one.
      max_examples: examples to draw.
      mode: "" for the backends' own mode draws, else the name of a fixed mode.
      hardware: ``"tpu:<chip>"`` / ``"gpu:<gpu>"`` when the unit must run on that
        real accelerator; None when any CPU will do.
      limit_s: wall-time limit of the whole unit (past it: a ``Failure("overran")``).
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
class Failure:
    """Why a unit did not return a value.

    Attributes:
      cause: a ``FAILURE_CAUSES`` key.
      message: what happened, in a line or two (signal, exit code, limit, node).
      exception: for ``raised``: the exception's class and base class names, most
        derived first (``("ConnectionError", "OSError", ...)``), so the driver can judge
        it without unpickling it.
      errno: for ``raised``: the OSError's errno, if any.
      traceback: the worker's traceback, if any (its last 4000 characters).
    """

    cause: str
    message: str
    exception: tuple[str, ...] = ()
    errno: int | None = None
    traceback: str = ""

    def __post_init__(self) -> None:
        if self.cause not in FAILURE_CAUSES:
            raise ValueError(f"Failure cause={self.cause!r} is not one of {tuple(FAILURE_CAUSES)}")

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        """The failure of an entry that raised ``exc``."""
        names = tuple(dict.fromkeys(f"{c.__module__}.{c.__qualname__}".removeprefix("builtins.")
                                    for c in type(exc).__mro__ if c not in (object, BaseException)))
        return cls(cause="raised", message=f"{type(exc).__name__}: {exc}", exception=names,
                   errno=exc.errno if isinstance(exc, OSError) else None,
                   traceback="".join(traceback.format_exception(exc))[-4000:])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Done:
    """The end of one unit.

    Attributes:
      work: the unit.
      value: what its entry returned (None when it did not return).
      failure: why it did not return, or None.
      node: where it ran (``host`` locally, ``host:nodeid`` on Ray; "" when unknown).
      seconds: wall time from submission to its end.
    """

    work: Work
    value: Any = None
    failure: Failure | None = None
    node: str = ""
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Update:
    """A value a running unit sent with ``emit``, delivered before its ``Done``."""

    work: Work
    value: Any
    node: str = ""


_SINK: list[Callable[[Any], None]] = []


def emit(value: Any) -> None:
    """Send ``value`` (plain data) to the driver now, from inside a unit's entry; it
    arrives as an ``Update`` before the unit's ``Done``. Outside a unit it is dropped."""
    if _SINK:
        _SINK[-1](value)


def run_entry(work: Work, sink: Callable[[Any], None] | None = None) -> tuple[Any, Failure | None]:
    """Call the unit's entry in this process (the worker side of every executor), with
    ``emit`` sending to ``sink``: (its value, None), or (None, the Failure it raised)."""
    module, _, name = work.entry.partition(":")
    _SINK.append(sink or (lambda value: None))
    try:
        return getattr(importlib.import_module(module), name)(work), None
    except Exception as exc:
        return None, Failure.of(exc)
    finally:
        _SINK.pop()


def host() -> str:
    return socket.gethostname()


class Executor(abc.ABC):
    """Runs units of work and reports what they send and how they end, as it happens.

    Use as a context manager; ``close`` stops every worker. ``submit`` never blocks:
    call it while ``free()`` is positive. ``poll`` returns the updates and ends since the
    last call, in the order they happened (waiting up to ``timeout_s`` for the first).
    ``cancel`` stops every unit still running, with every process it started (SIGINT,
    end of budget), and returns them.
    """

    name: str = ""

    @abc.abstractmethod
    def slots(self) -> int:
        """How many units run at once."""

    @abc.abstractmethod
    def offers(self, hardware: str) -> str | None:
        """None when some worker has the accelerator ``hardware``, else the reason."""

    @abc.abstractmethod
    def submit(self, work: Work) -> None: ...

    @abc.abstractmethod
    def poll(self, timeout_s: float) -> list[Done | Update]: ...

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
