"""The local executor: a pool of worker processes on this host.

Each worker is a spawned Python process that runs units (``base.run_entry``) until its
pipe closes. It leads a process group of its own, which the case workers it starts join,
ignores SIGINT (the driver decides when to stop) and exits when the driver is gone
(``lifeline``). A unit's ``emit`` travels over the same pipe ahead of its value. A worker
that dies yields a ``Failure("died")``, one that overruns its unit's ``limit_s`` is
killed with its whole group (``Failure("overran")``); either way a fresh worker takes its
place.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from multiprocessing.connection import Connection, wait
from typing import Any

from pallas_verify.execution.base import Done, Executor, Failure, Update, Work, host, run_entry
from pallas_verify.execution.isolation import PARALLEL_RUNS_ENV
from pallas_verify.execution.lifeline import follow_parent, kill_group, lead_group

__all__ = ["LocalExecutor"]


def _serve(conn: Connection, runs: int) -> None:
    """A worker process (one of ``runs`` on this host): run units until the parent closes the pipe."""
    lead_group()
    follow_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from pallas_verify._env import configure

    os.environ[PARALLEL_RUNS_ENV] = str(runs)
    configure()
    while True:
        try:
            work = conn.recv()
        except (EOFError, OSError):
            return
        value, failure = run_entry(work, sink=lambda update: conn.send(("update", update)))
        conn.send(("done", value, failure))


@dataclasses.dataclass
class _Slot:
    """One worker process and the unit it is running."""

    process: Any
    conn: Connection
    work: Work | None = None
    started: float = 0.0

    @classmethod
    def start(cls, runs: int) -> _Slot:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child, runs), daemon=True)
        process.start()
        child.close()
        return cls(process=process, conn=parent)

    def kill(self) -> None:
        """Stop the worker and every process it started (its process group)."""
        self.conn.close()
        if self.process.pid is not None:
            kill_group(self.process.pid)
        self.process.join(timeout=10)


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
        slot.conn.send(work)
        slot.work, slot.started = work, time.monotonic()

    def running(self) -> list[Work]:
        return [s.work for s in self._slots if s.work is not None]

    def poll(self, timeout_s: float) -> list[Done | Update]:
        busy = [s for s in self._slots if s.work is not None]
        if not busy:
            return []
        ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=timeout_s)
        out: list[Done | Update] = []
        for slot in busy:
            work = slot.work
            assert work is not None
            seconds = time.monotonic() - slot.started
            end: Done | None = None
            if slot.conn in ready or slot.process.sentinel in ready:
                end = self._drain(slot, work, seconds, out)
            elif seconds > work.limit_s:
                why = f"the worker process did not finish the unit within {work.limit_s:.0f} s"
                end = Done(work=work, failure=Failure(cause="overran", message=why), node=host(), seconds=seconds)
            if end is None:
                continue
            if end.failure is None or end.failure.cause == "raised":
                slot.work = None
            else:
                slot.kill()
                self._slots.remove(slot)
            out.append(end)
        return out

    def _drain(self, slot: _Slot, work: Work, seconds: float, out: list[Done | Update]) -> Done | None:
        """Every message the worker has sent (updates into ``out``); its Done, if it ended."""
        try:
            while slot.conn.poll(0):
                message = slot.conn.recv()
                if message[0] == "update":
                    out.append(Update(work=work, value=message[1], node=host()))
                else:
                    return Done(work=work, value=message[1], failure=message[2], node=host(), seconds=seconds)
        except (EOFError, OSError):
            return Done(work=work, failure=self._died(slot), node=host(), seconds=seconds)
        if slot.process.is_alive():
            return None
        return Done(work=work, failure=self._died(slot), node=host(), seconds=seconds)

    @staticmethod
    def _died(slot: _Slot) -> Failure:
        kill_group(slot.process.pid)  # the case workers it left behind
        slot.process.join(timeout=5)
        code = slot.process.exitcode
        if code is not None and code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}" if code is not None else "stopped answering"
        return Failure(cause="died", message=f"the worker process running the unit {how}")

    def cancel(self) -> list[Work]:
        stopped = [s.work for s in self._slots if s.work is not None]
        for slot in [s for s in self._slots if s.work is not None]:
            slot.kill()
            self._slots.remove(slot)
        return stopped

    def close(self) -> None:
        for slot in self._slots:
            slot.kill()
        self._slots = []
