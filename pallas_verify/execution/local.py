"""The local executor: a pool of worker processes on this host.

Each worker is a ``process.Child`` serving ``units``: it runs units (``base.run_entry``)
until its pipe closes. It leads a process group of its own, which the case workers it
starts join, ignores SIGINT (the driver decides when to stop) and exits when the driver is
gone (``lifeline``). A unit's ``emit`` travels over the same pipe ahead of its value. A
worker that dies yields a ``Failure("died")`` saying how (its signal or exit code, its
stderr's tail), one that overruns its unit's ``limit_s`` is killed with its whole tree
(``Failure("overran")``); either way a fresh worker takes its place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

from pallas_verify.execution.base import Done, Executor, Failure, Update, Work, host, run_entry
from pallas_verify.execution.isolation import PARALLEL_RUNS_ENV
from pallas_verify.execution.process import Channel, Child, ready

__all__ = ["LocalExecutor", "serve"]

#: Seconds a worker whose pipe ended is given to exit before it is killed (its death report).
_EXIT_S = 5.0


def serve(parent: Channel) -> None:
    """The worker side (``_worker units``): run units until the parent closes the pipe."""
    from pallas_verify._env import configure

    configure()
    while True:
        try:
            work = parent.recv()
        except (EOFError, OSError):
            return
        value, failure = run_entry(work, sink=lambda update: parent.send(("update", update)))
        parent.send(("done", value, failure))


@dataclasses.dataclass
class _Slot:
    """One worker process and the unit it is running."""

    process: Child
    work: Work | None = None
    started: float = 0.0

    @classmethod
    def start(cls, runs: int) -> _Slot:
        """A worker, one of ``runs`` on this host."""
        return cls(process=Child("units", env={PARALLEL_RUNS_ENV: str(runs)}))


class LocalExecutor(Executor):
    """``workers`` processes on this host (started on first use)."""

    name = "local"

    def __init__(self, workers: int = 2) -> None:
        self._workers = workers
        self._slots: list[_Slot] = []
        self._attached: frozenset[str] | None = None

    def slots(self) -> int:
        return self._workers

    def offers(self, hardware: str) -> str | None:
        if self._attached is None:
            from pallas_verify.backends.compiled import attached_targets

            self._attached = attached_targets()
        target = hardware.partition(":")[2]
        if target in self._attached:
            return None
        seen = ", ".join(sorted(self._attached)) or "none"
        return f"needs a real {hardware} attached to this host; attached accelerators: {seen}"

    def submit(self, work: Work) -> None:
        while len(self._slots) < self._workers:
            self._slots.append(_Slot.start(self._workers))
        slot = next((s for s in self._slots if s.work is None), None)
        if slot is None:
            raise RuntimeError(f"submit() with all {self._workers} workers busy; wait for poll() first.")
        with contextlib.suppress(OSError):  # a worker that died since: poll() reports it
            slot.process.send(work)
        slot.work, slot.started = work, time.monotonic()

    def running(self) -> list[Work]:
        return [s.work for s in self._slots if s.work is not None]

    def poll(self, timeout_s: float) -> list[Done | Update]:
        busy = [s for s in self._slots if s.work is not None]
        if not busy:
            return []
        woke = ready([s.process for s in busy], timeout_s)
        out: list[Done | Update] = []
        for slot in busy:
            work = slot.work
            assert work is not None
            seconds = time.monotonic() - slot.started
            end: Done | None = None
            if slot.process in woke:
                end = self._drain(slot, work, seconds, out)
            elif seconds > work.limit_s:
                why = f"the worker process did not finish the unit within {work.limit_s:.0f} s"
                end = Done(work=work, failure=Failure(cause="overran", message=why), node=host(), seconds=seconds)
            if end is None:
                continue
            if end.failure is None or end.failure.cause == "raised":
                slot.work = None
            else:
                slot.process.kill()
                self._slots.remove(slot)
            out.append(end)
        return out

    def _drain(self, slot: _Slot, work: Work, seconds: float, out: list[Done | Update]) -> Done | None:
        """Every message the worker has sent (updates into ``out``); its Done, if it ended."""
        try:
            while slot.process.poll():
                message = slot.process.recv()
                if message[0] == "update":
                    out.append(Update(work=work, value=message[1], node=host()))
                else:
                    return Done(work=work, value=message[1], failure=message[2], node=host(), seconds=seconds)
        except (EOFError, OSError):
            pass
        else:
            if slot.process.alive():
                return None
        death = slot.process.death(wait_s=_EXIT_S)  # also kills the case workers it left behind
        why = death.describe("the worker process running the unit", was=True)
        return Done(work=work, failure=Failure(cause="died", message=why), node=host(), seconds=seconds)

    def cancel(self) -> list[Work]:
        stopped = [s.work for s in self._slots if s.work is not None]
        for slot in [s for s in self._slots if s.work is not None]:
            slot.process.kill()
            self._slots.remove(slot)
        return stopped

    def close(self) -> None:
        for slot in self._slots:
            slot.process.kill()
        self._slots = []
