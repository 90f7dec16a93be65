"""Worker processes: run cases where a hang or an abort cannot take the run down.

A worker is a fresh Python process (``python -m pallas_verify._worker``) that loads specs
by reference and runs cases on request over a private pipe. The parent waits with a
timeout: a worker that does not answer in time is killed (``timeout``), one that dies is
reported (``crash``, with its signal or exit code and the tail of its stderr), and either
way the next case gets a fresh worker.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

from pallas_verify.case import Case, Outcome
from pallas_verify.execution.caselimit import IDLE_S, SAMPLE_S, CpuMeter

__all__ = ["PARALLEL_RUNS_ENV", "Pending", "Worker", "import_path", "shared_worker", "static_tracer_slot", "worker_env"]

#: How many runs share this host's cores, set by an executor in its worker processes
#: (pytest-xdist says it in PYTEST_XDIST_WORKER_COUNT).
PARALLEL_RUNS_ENV = "PV_PARALLEL_RUNS"


def import_path() -> str:
    """Our import path as a PYTHONPATH value, so a worker process (here, or a Ray worker)
    loads specs by reference as we do."""
    return os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))


def worker_env() -> dict[str, str]:
    """The environment of a worker: ours, plus our import path (``import_path``)."""
    return {**os.environ, "PYTHONPATH": import_path()}


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
    """One worker process, started lazily and restarted after a timeout or a crash."""

    timeout_s: float = 120.0
    _proc: subprocess.Popen[bytes] | None = None
    _conn: Connection | None = None
    _stderr: Any = None
    _awaiting: Pending | None = None  # the request whose answer is not collected yet

    def _start(self) -> None:
        self.close()
        parent_r, child_w = os.pipe()
        child_r, parent_w = os.pipe()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the worker; closed in close())
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pallas_verify._worker", str(child_r), str(child_w)],
            pass_fds=(child_r, child_w),
            env=worker_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
        os.close(child_r)
        os.close(child_w)
        self._conn = _Duplex(parent_r, parent_w)

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
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._conn is not None
        # A long-lived worker must see import paths added since it started (pytest's
        # rootdir, a spec file's folder), or "module:NAME" references would not load.
        request = {**request, "sys_path": [p for p in sys.path if p]}
        pending = self._awaiting = Pending(started=time.perf_counter())
        try:
            self._conn.send(request)
        except (EOFError, OSError, BrokenPipeError):
            pending.failed = True
        return pending

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
            assert self._conn is not None
            idle = self._await(start, limit, limit if idle_after_s is None else min(limit, idle_after_s))
            if idle is None:
                return self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            return Outcome(crashed=self._death(), seconds=time.perf_counter() - start)
        except BaseException:  # interrupted while waiting: its answer would be taken for the next request's
            self.close()
            raise
        self.close()
        seconds = time.perf_counter() - start
        why = (f"its worker process used no CPU for {idle:.1f} s past the idle limit"
               if idle else f"it reached the time limit of {limit:g} s")
        return Outcome(timed_out=True, seconds=seconds, diagnostics=why)

    def _await(self, start: float, limit: float, idle_after: float) -> float | None:
        """Wait for the answer: None once it is there, else the seconds the worker was
        seen idle past ``idle_after`` (0.0 when it reached ``limit`` busy)."""
        assert self._conn is not None
        assert self._proc is not None
        meter = CpuMeter(self._proc.pid)
        if self._conn.poll(max(0.0, min(limit, idle_after) - (time.perf_counter() - start))):
            return None
        idle = 0.0
        while (left := limit - (time.perf_counter() - start)) > 0:
            sample = min(SAMPLE_S, left)
            before = meter.seconds()
            if self._conn.poll(sample):
                return None
            idle = idle + sample if meter.idle(before, sample) else 0.0
            if idle >= IDLE_S:
                return idle
        return 0.0

    def _death(self) -> str:
        assert self._proc is not None
        code = self._proc.wait(timeout=30)
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-12:]
        self.close()
        how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return f"worker process {how}" + ("; stderr tail:\n" + "\n".join(tail) if tail else "")

    def close(self) -> None:
        """Stop the worker (killing it if it is stuck)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self._awaiting = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


class _Duplex:
    """A request/response channel over two one-way pipes (read fd, write fd)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r = Connection(read_fd, writable=False)
        self._w = Connection(write_fd, readable=False)

    def send(self, obj: Any) -> None:
        self._w.send(obj)

    def poll(self, timeout: float) -> bool:
        return self._r.poll(timeout)

    def recv(self) -> Any:
        return self._r.recv()

    def close(self) -> None:
        self._r.close()
        self._w.close()


_SHARED: dict[str, Worker] = {}


def shared_worker(slot: str) -> Worker:
    """A worker kept for the life of this process, shared by every run that names ``slot``.

    Interpreters share one: its jax import and jit caches then serve every spec and
    backend of a run (a conformance or fuzz run verifies many specs), instead of paying
    a fresh process start per spec and backend.
    """
    if slot not in _SHARED:
        _SHARED[slot] = Worker()
        if len(_SHARED) == 1:
            atexit.register(_close_shared)
    return _SHARED[slot]


def static_tracer_slot() -> str:
    """The shared worker the static check traces in: one of its own, which traces while the
    interpreters' worker runs the kernel, when this host has a core to spare for it (two
    per parallel run); else the interpreters' worker, one trace after the other, so that
    a host whose cores are all taken by parallel runs gets no extra process per run."""
    runs = max(_count(os.environ.get("PYTEST_XDIST_WORKER_COUNT")), _count(os.environ.get(PARALLEL_RUNS_ENV)), 1)
    return "tracer" if _cores() >= 2 * runs else "interpreters"


def _count(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _close_shared() -> None:
    for worker in _SHARED.values():
        worker.close()
    _SHARED.clear()
