"""Worker processes: run cases where a hang or an abort cannot take the run down.

A worker is a fresh Python process (``process.Child`` serving ``cases``) that loads specs
by reference and runs cases on request over a private pipe. The parent waits with a
timeout: a worker that does not answer in time is killed (``timeout``), one that dies is
reported (``crash``, with its signal or exit code and the tail of its stderr), and either
way the next case gets a fresh worker.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import os
import sys
import time
from typing import Any

from pallas_verify.case import Case, Outcome
from pallas_verify.execution.process import Child

__all__ = ["PARALLEL_RUNS_ENV", "Pending", "Worker", "hand_on", "handed", "shared_worker", "shared_workers_files", "static_tracer_slot"]

#: How many runs share this host's cores, set by an executor in its worker processes
#: (pytest-xdist says it in PYTEST_XDIST_WORKER_COUNT).
PARALLEL_RUNS_ENV = "PV_PARALLEL_RUNS"


def _case_request(spec_ref: str, case: Case) -> dict[str, Any]:
    return {"spec": spec_ref, "backend": case.backend, "config": dict(case.config), "inputs": case.inputs,
            "mode": dict(case.mode), "transform": case.transform}


@dataclasses.dataclass
class Pending:
    """A request sent to a worker whose answer is not collected yet."""

    started: float
    failed: bool = False  # the worker was gone before the request reached it


@dataclasses.dataclass
class Worker:
    """One worker process, started lazily (or ahead of its first request: ``prestart``)
    and restarted after a timeout or a crash. It joins the process group of the process
    that starts it (see ``lifeline``); ``env``: variables it gets beside ours."""

    timeout_s: float = 120.0
    env: dict[str, str] | None = None
    #: What the running process fixed for its life at a compile (Mosaic GPU's target, e.g.
    #: ``mosaic_gpu:h100``), set by its user; None for a new process.
    fixed: str | None = None
    _child: Child | None = None
    _awaiting: Pending | None = None  # the request whose answer is not collected yet

    @property
    def pid(self) -> int | None:
        """The worker process's id, None while none runs."""
        return None if self._child is None else self._child.pid

    @property
    def running(self) -> bool:
        """Whether the worker process is started and alive."""
        return self._child is not None and self._child.alive()

    def run(self, spec_ref: str, case: Case, *, timeout_s: float | None = None,
            idle_after_s: float | None = None) -> Outcome:
        """Run ``case`` (its spec loaded from ``spec_ref``) in the worker.

        The case is stopped at ``timeout_s``, or earlier when, past ``idle_after_s``, the
        worker uses no CPU (a hang, not a slow computation; see caselimit.py).
        """
        return self.collect(self.submit_case(spec_ref, case), timeout_s=timeout_s, idle_after_s=idle_after_s)

    def submit_case(self, spec_ref: str, case: Case) -> Pending:
        """Start running ``case`` (see ``run``) without waiting; ``collect`` the Outcome."""
        return self.submit(_case_request(spec_ref, case))

    def submit(self, request: dict[str, Any]) -> Pending:
        """Send one request (a case, or a ``task`` such as the static check) without waiting
        for the answer; ``collect`` it before the next ``submit`` (the worker answers one
        request at a time; a submit over an uncollected answer restarts the worker)."""
        if self._awaiting is not None:  # its caller was interrupted: that answer would be taken for this one
            self.close()
        self.prestart()
        # A long-lived worker must see import paths added since it started (pytest's
        # rootdir, a spec file's folder), or "module:NAME" references would not load.
        request = {**request, "sys_path": [p for p in sys.path if p]}
        pending = self._awaiting = Pending(started=time.perf_counter())
        try:
            self._child.send(request)
        except (EOFError, OSError):
            pending.failed = True
        return pending

    def prestart(self) -> None:
        """Start the process now unless one runs: it starts and imports what every request
        needs (``pallas_verify._worker``) while the caller does its own work."""
        if self._child is None or not self._child.alive():
            self.close()
            self._child = Child("cases", env=self.env, own_group=False)

    def collect(self, pending: Pending, *, timeout_s: float | None = None,
                idle_after_s: float | None = None) -> Any:
        """The answer to a submitted request, or an Outcome saying it timed out or crashed;
        the time limit counts from the submission."""
        start = pending.started
        if pending is not self._awaiting:
            return Outcome(crashed="the worker was restarted before it answered this request",
                           seconds=time.perf_counter() - start)
        self._awaiting = None
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            if pending.failed:
                raise BrokenPipeError
            assert self._child is not None
            idle = self._child.wait(start, limit, idle_after_s)
            if idle is None:
                return self._child.recv()
        except (EOFError, OSError):
            return Outcome(crashed=self._death(), seconds=time.perf_counter() - start)
        except BaseException:  # interrupted while waiting: its answer would be taken for the next request's
            self.close()
            raise
        self.close()
        seconds = time.perf_counter() - start
        why = (f"its worker process used no CPU for {idle:.1f} s past the idle limit"
               if idle else f"it reached the time limit of {limit:g} s")
        return Outcome(timed_out=True, seconds=seconds, diagnostics=why)

    def _death(self) -> str:
        assert self._child is not None
        death = self._child.death()
        self.close()
        return death.describe("worker process")

    def close(self) -> None:
        """Stop the worker (killing it if it is stuck)."""
        if self._child is not None:
            self._child.kill()
        self._child = None
        self._awaiting = None
        self.fixed = None


_SHARED: dict[str, Worker] = {}
#: The compiler worker one spec's sandbox handed on to the next (slot -> worker; one at most).
_HANDED: dict[str, Worker] = {}
_INHERITED: list[dict[str, Worker]] = []  # a forked child's copy of its parent's: kept, never used


def _forget_shared_after_fork() -> None:
    """In a forked child: the parent's shared and handed workers are not the child's to use
    or stop. They stay referenced (their files' finalizers never run here) but out of reach."""
    _INHERITED.extend([dict(_SHARED), dict(_HANDED)])
    _SHARED.clear()
    _HANDED.clear()


os.register_at_fork(after_in_child=_forget_shared_after_fork)


def shared_worker(slot: str) -> Worker:
    """A worker kept for the life of this process, shared by every run that names ``slot``.

    Interpreters share one: its jax import and jit caches then serve every spec and
    backend of a run (a conformance or fuzz run verifies many specs), instead of paying
    a fresh process start per spec and backend.
    """
    if slot not in _SHARED:
        _SHARED[slot] = Worker()
        _stopped_at_exit()
    return _SHARED[slot]


def hand_on(slot: str, worker: Worker) -> None:
    """Keep ``worker`` (a compiler's, of ``slot``) for the next spec's sandbox, which then
    saves a process start, in place of any kept before: one at a time. Stopped at exit."""
    _close_handed()
    _HANDED[slot] = worker
    _stopped_at_exit()


def handed(slot: str) -> Worker | None:
    """The worker of ``slot`` an earlier spec's sandbox handed on, taken (None if there is
    none); one of another slot is stopped."""
    worker = _HANDED.pop(slot, None)
    _close_handed()
    return worker


def shared_workers_files(timeout_s: float = 30.0) -> list[str] | None:
    """The module files loaded in the shared workers now running (a kept pass's files,
    ``passes.keep``); None when one of them is gone or does not answer."""
    files: list[str] = []
    for worker in _SHARED.values():
        if worker.pid is None:
            continue
        if not worker.running:
            return None
        answer = worker.collect(worker.submit({"task": "modules"}), timeout_s=timeout_s)
        if not isinstance(answer, list):
            return None
        files += answer
    return files


def static_tracer_slot() -> str:
    """The shared worker the static check traces in: one of its own, which traces while the
    interpreters' worker runs the kernel, when this host has a core to spare for it (two
    per parallel run, beside the cores other work keeps busy); else the interpreters'
    worker, one trace after the other, so that a host whose cores are all taken, by
    parallel runs or by other work, gets no extra process per run: a worker's start (its
    jax import) costs about a second of CPU, more than a short run's traces (TPU interpret
    mode's reruns take the same slot's answer)."""
    runs = max(_count(os.environ.get("PYTEST_XDIST_WORKER_COUNT")), _count(os.environ.get(PARALLEL_RUNS_ENV)), 1)
    return "tracer" if _cores() - _busy_cores() >= 2 * runs else "interpreters"


def _count(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@functools.cache
def _busy_cores() -> int:
    """The cores other work kept busy over the last minute (the load average), as this
    process first saw it: read once, so that its own run's load does not change its mind."""
    try:
        return round(os.getloadavg()[0])
    except OSError:  # no load average here
        return 0


@functools.cache
def _stopped_at_exit() -> None:
    """Stop the kept workers at exit (registered once, when the first is kept)."""
    atexit.register(_close_shared)


def _close_shared() -> None:
    for worker in _SHARED.values():
        worker.close()
    _SHARED.clear()
    _close_handed()


def _close_handed() -> None:
    for slot in list(_HANDED):
        _HANDED.pop(slot).close()
