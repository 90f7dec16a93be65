"""One child process: how every worker process of pallas-verify starts, talks, is waited
for, is stopped and says how it died.

Two workers ride on it: the case worker (``isolation.Worker``, role ``cases``: cases and
traces) and the local executor's unit worker (``local.LocalExecutor``, role ``units``).
A ``Child`` is ``python -m pallas_verify._worker ROLE READ_FD WRITE_FD``, which

- leads a process group of its own from birth, or joins its parent's (``own_group``: a
  case worker joins the group of the unit worker that started it, so that group still
  reaches it after that unit worker was SIGKILLed), and follows its parent
  (``lifeline.follow_parent``, set up with SIGINT left to the parent by
  ``connect_parent``, the child's side);
- talks over a duplex message pipe (``Channel``: two one-way OS pipes, pickled messages);
- is waited for with a deadline (``Child.wait``: until a message, the limit, or a stretch
  without CPU use past an idle limit; ``ready``: several children at once, their deaths
  included);
- is killed with its whole tree (``Child.kill``, ``lifeline.kill_tree``);
- reports how it died (``Child.death``: its signal or exit code, its stderr's tail).

Where this process has imported jax and Pallas and no backend runs yet, the child is a
fork of it instead (``forked``: the same child, without its second of imports); where it
cannot fork, the child is a fork of its fork server (``forkserver``), a clean process
started once.

Why ``subprocess.Popen`` of the entry module and not ``multiprocessing``'s spawn (which the
unit workers used): spawn's bootstrap re-imports the parent's ``__main__`` in every child
(a user's script without a main guard runs again; pytest's or the CLI's entry loads for
nothing) and starts a resource-tracker process beside the driver; Popen runs the entry
module and nothing of the parent. Popen puts the child in its process group before it
runs a line (``process_group=0``), where a child that calls ``setpgid`` itself leaves a
moment in which a kill of the group misses it. The child's stderr goes to a file the
parent reads back for the death report. And it is no slower: measured side by side
(``benchmarks.processes``, medians of 4 alternating runs on 2 shared cores), a unit worker
starts to its first unit's end in 144 ms (spawn: 162 ms), and a case worker's start
(272 ms, 270 ms before) and warm round trip (0.24 ms) are as they were.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from pathlib import Path
from typing import Any

from pallas_verify.execution import forked, forkserver
from pallas_verify.execution.caselimit import IDLE_S, SAMPLE_S, CpuMeter
from pallas_verify.execution.lifeline import follow_parent, kill_group, kill_tree

__all__ = ["ROLES", "Channel", "Child", "Death", "connect_parent", "import_path", "name_process", "ready",
           "worker_env"]

#: What a child serves (``pallas_verify._worker``).
ROLES = ("cases", "units")
#: Lines of a dead child's stderr its death report keeps, and the bytes read to find them.
TAIL_LINES, TAIL_BYTES = 12, 65536
#: Without pidfds (not Linux), ``ready`` wakes this often to see whether a child died.
_DEATH_POLL_S = 0.5


def import_path() -> str:
    """Our import path as a PYTHONPATH value, so a worker process (here, or a Ray worker)
    loads specs by reference as we do."""
    return os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))


def worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: ours, plus our import path (``import_path``) and ``extra``."""
    return {**os.environ, "PYTHONPATH": import_path(), **(extra or {})}


class Channel:
    """A duplex message channel over two one-way pipes (read fd, write fd)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.reader = Connection(read_fd, writable=False)
        self._w = Connection(write_fd, readable=False)

    def send(self, obj: Any) -> None:
        self._w.send(obj)

    def poll(self, timeout: float) -> bool:
        return self.reader.poll(timeout)

    def recv(self) -> Any:
        return self.reader.recv()

    def close(self) -> None:
        self.reader.close()
        self._w.close()


@dataclasses.dataclass(frozen=True)
class Death:
    """How a child ended: ``code`` its exit status (negative: the signal that killed it;
    None: it had not exited and was killed), ``tail`` the last lines of its stderr."""

    code: int | None
    tail: tuple[str, ...] = ()

    @property
    def signal(self) -> str | None:
        if self.code is None or self.code >= 0:
            return None
        try:
            return signal.Signals(-self.code).name
        except ValueError:
            return f"signal {-self.code}"

    def how(self, *, was: bool = False) -> str:
        """``killed by signal SIGABRT`` (with ``was``: ``was killed ...``), ``exited with code 3``
        or ``stopped answering``."""
        if self.signal is not None:
            return f"{'was ' if was else ''}killed by signal {self.signal}"
        return "stopped answering" if self.code is None else f"exited with code {self.code}"

    def describe(self, subject: str, *, was: bool = False) -> str:
        """``subject`` and how it ended, then its stderr's tail."""
        return f"{subject} {self.how(was=was)}" + ("; stderr tail:\n" + "\n".join(self.tail) if self.tail else "")


class Child:
    """One worker process serving ``role`` (see the module docstring); started at once."""

    def __init__(self, role: str, *, env: Mapping[str, str] | None = None, own_group: bool = True) -> None:
        if role not in ROLES:
            raise ValueError(f"role={role!r} is not one of {ROLES}")
        parent_r, child_w = os.pipe()
        child_r, parent_w = os.pipe()
        self.own_group = own_group
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the child; closed in kill())
        try:
            forkable = forked.forkable(env)
            served = None
            # A unit worker, which starts case workers of its own once its backend runs, comes
            # from the fork server even here: they then come from the same server.
            if not forkable or role == "units":
                served = forkserver.fork(role, child_r, child_w, self._stderr.fileno(), worker_env(env), env,
                                         own_group=own_group, here=forkable)
            if served is not None:
                self._proc: subprocess.Popen | forked.Forked | forkserver.Served = served
            elif forkable:  # this process's imports are the worker's: no second start (forked.py)
                self._proc = forked.start(role, child_r, child_w, self._stderr.fileno(), worker_env(env),
                                          own_group=own_group)
            else:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "pallas_verify._worker", role, str(child_r), str(child_w)],
                    pass_fds=(child_r, child_w), env=worker_env(env), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=self._stderr, process_group=0 if own_group else None)
        except BaseException:
            for fd in (parent_r, parent_w):
                os.close(fd)
            self._stderr.close()
            raise
        finally:
            os.close(child_r)
            os.close(child_w)
        self.pid = self._proc.pid
        self.channel = Channel(parent_r, parent_w)
        self._pidfd = _pidfd(self.pid)

    def send(self, obj: Any) -> None:
        """Send one message; OSError (BrokenPipeError) when the child is gone."""
        self.channel.send(obj)

    def recv(self) -> Any:
        """The next message; EOFError when the child is gone and nothing is left."""
        return self.channel.recv()

    def poll(self, timeout_s: float = 0.0) -> bool:
        """Whether a message (or the end of the pipe) is there, waiting up to ``timeout_s``."""
        return self.channel.poll(timeout_s)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def wait(self, started: float, limit_s: float, idle_after_s: float | None = None) -> float | None:
        """Wait for a message until ``limit_s`` after ``started`` (a ``time.perf_counter``):
        None once one is there (or the pipe ended); else the seconds the child was seen
        idle past ``idle_after_s`` (a hang: see ``caselimit``), 0.0 when it reached the limit busy."""
        idle_after = limit_s if idle_after_s is None else min(limit_s, idle_after_s)
        meter = CpuMeter(self.pid)
        if self.poll(max(0.0, idle_after - (time.perf_counter() - started))):
            return None
        idle = 0.0
        while (left := limit_s - (time.perf_counter() - started)) > 0:
            sample = min(SAMPLE_S, left)
            before = meter.seconds()
            if self.poll(sample):
                return None
            idle = idle + sample if meter.idle(before, sample) else 0.0
            if idle >= IDLE_S:
                return idle
        return 0.0

    def death(self, wait_s: float = 30.0) -> Death:
        """How the child ended, once its pipe ended or it was seen gone: waits up to
        ``wait_s`` for it to exit, then kills whatever it left (``kill``)."""
        try:
            code: int | None = self._proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            code = None
        tail = self._tail()
        self.kill()
        return Death(code=code, tail=tail)

    def kill(self) -> None:
        """Stop the child with its whole tree (a finished child: the group it led, whose
        members may outlive it), reap it and close its pipe; again: nothing."""
        if self._proc.returncode is None:  # not reaped: the pid is still this child's
            kill_tree(self.pid, leads_group=self.own_group)
            self._proc.wait()
        elif self.own_group:
            kill_group(self.pid)
        if not self._stderr.closed:
            self.channel.close()
            self._stderr.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None

    def _tail(self) -> tuple[str, ...]:
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - TAIL_BYTES))
        return tuple(self._stderr.read().decode(errors="replace").strip().splitlines()[-TAIL_LINES:])


def ready(children: Sequence[Child], timeout_s: float) -> list[Child]:
    """The children with a message waiting, an ended pipe, or that died, waiting up to
    ``timeout_s`` for the first."""
    handles: dict[Any, Child] = {}
    for child in children:
        handles[child.channel.reader] = child
        if child._pidfd is not None:
            handles[child._pidfd] = child
    if any(child._pidfd is None for child in children):
        timeout_s = min(timeout_s, _DEATH_POLL_S)
    woke = wait_for(list(handles), timeout=timeout_s)
    return [c for c in children if any(handles[h] is c for h in woke) or not c.alive()]


def connect_parent(argv: Sequence[str]) -> tuple[str, Channel]:
    """The child's side (``_worker ROLE READ_FD WRITE_FD``): its role and the channel to its
    parent. It follows its parent from now on, and leaves a terminal's Ctrl-C to it (the
    parent decides what stops: it keeps what finished, then closes its workers)."""
    follow_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    role, read_fd, write_fd = argv
    return role, Channel(int(read_fd), int(write_fd))


def name_process(name: str) -> None:
    """Call this process ``name`` where ``ps`` and ``top`` show its name (Linux's ``comm``,
    15 characters): a forked worker's command line is its parent's."""
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(name[:15])


def _pidfd(pid: int) -> int | None:
    """A file descriptor that becomes readable when ``pid`` exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
