"""The local executor: a pool of worker processes on this host.

Each worker is a spawned Python process that runs units (``base.run_entry``) until its
pipe closes; it ignores SIGINT (the driver decides when to stop). A worker that dies
yields a ``crash`` result, one that overruns its unit's ``limit_s`` is killed and yields
``timeout``; either way a fresh worker takes its place.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from multiprocessing.connection import Connection, wait
from typing import Any

from pallas_verify.execution.base import Done, Executor, Work, host, lost, run_entry
from pallas_verify.execution.isolation import PARALLEL_RUNS_ENV

__all__ = ["LocalExecutor"]


def _serve(conn: Connection, runs: int) -> None:
    """A worker process (one of ``runs`` on this host): run units until the parent closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from pallas_verify._env import configure

    os.environ[PARALLEL_RUNS_ENV] = str(runs)
    configure()
    while True:
        try:
            work = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(run_entry(work))


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
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
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

    def poll(self, timeout_s: float) -> list[Done]:
        busy = [s for s in self._slots if s.work is not None]
        if not busy:
            return []
        ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=timeout_s)
        finished = []
        for slot in list(self._slots):
            work = slot.work
            if work is None:
                continue
            seconds = time.monotonic() - slot.started
            healthy = False
            if slot.conn in ready:
                try:
                    result, healthy = slot.conn.recv(), True
                except (EOFError, OSError):
                    result = self._died(slot)
            elif slot.process.sentinel in ready:
                result = self._died(slot)
            elif seconds > work.limit_s:
                result = lost("timeout", f"the worker process did not finish the unit within {work.limit_s:.0f} s")
            else:
                continue
            if healthy:
                slot.work = None
            else:
                slot.kill()
                self._slots.remove(slot)
            finished.append(Done(work=work, result=result, node=host(), seconds=seconds))
        return finished

    @staticmethod
    def _died(slot: _Slot) -> dict[str, Any]:
        slot.process.join(timeout=5)
        code = slot.process.exitcode
        how = f" (exit code {code})" if code else ""
        return lost("crash", f"the worker process died{how}")

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
