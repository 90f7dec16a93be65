"""A worker forked from this process where that is safe: the same child as a spawned one,
without the second of CPU its start spends importing.

A spawned worker (``process.Child``) is a fresh Python that imports jax, Pallas and the
backends before its first request: about a second of CPU per worker, paid again by every
command, plugin session and campaign driver that starts one. Where this process has
imported them already and nothing forbids it (``forkable``), ``start`` forks it instead,
and the child makes itself what a spawned worker is before it serves: the process group
it is given, stdin and stdout on /dev/null, stderr to the parent's file, the worker's
environment, none of the parent's descriptors but its own pipe's, none of its signal
handlers, exit hooks or shared workers (``isolation``), and it exits without running the parent's
cleanup. ``Forked`` is its handle, as ``subprocess.Popen`` is a spawned one's.

A fork is safe only before JAX starts a backend (its client starts threads that a fork
does not carry) and while this process runs one Python thread (a thread holding a lock at
the fork would leave it held in the child; native threads such as BLAS's reinitialise at
fork). An environment extra that JAX reads at import time cannot reach a forked child, nor
can a compilation cache turned off once this process turned it on. Where this process
cannot fork a worker, its fork server does (``forkserver``); a worker given such an extra
is spawned. ``PALLAS_VERIFY_FORK=0`` spawns every worker.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Mapping

from pallas_verify._env import COMPILE_CACHE_ENV, turned_off

__all__ = ["FORK_ENV", "Forked", "become_worker", "forkable", "start"]

#: ``0`` (``off``, ``false``, ``no``): spawn every worker.
FORK_ENV = "PALLAS_VERIFY_FORK"
_ENTRY = "pallas_verify._worker"  # what a worker runs (``process.Child``'s command line)
_SIGNALS = tuple(s for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                              signal.SIGCHLD, signal.SIGALRM) if s is not None)


def forkable(extra_env: Mapping[str, str] | None) -> bool:
    """Whether a worker with ``extra_env`` may be forked from this process now."""
    if turned_off(os.environ.get(FORK_ENV)) or sys.platform != "linux":
        return False
    if any(k == COMPILE_CACHE_ENV or k.startswith("JAX_") for k in extra_env or {}):
        return False
    if "jax.experimental.pallas" not in sys.modules or threading.active_count() != 1:
        return False
    from pallas_verify._jax_compat import backends_started

    return not backends_started()


class Forked:
    """A forked child, waited for as ``subprocess.Popen`` waits for a spawned one."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone, its status unknown (as Popen says it: 0)
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return code


def start(role: str, read_fd: int, write_fd: int, stderr_fd: int, env: Mapping[str, str], *,
          own_group: bool) -> Forked:
    """Fork a worker serving ``role`` on the pipe ``read_fd``/``write_fd`` (the child's
    ends), its stderr to ``stderr_fd``, its environment ``env``; its handle."""
    env = dict(env)
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        # Python warns of any fork while a native thread (BLAS's) runs; see the module doc.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        become_worker(role, read_fd, write_fd, stderr_fd, env, own_group=own_group)
    if own_group:  # the child does it too: whichever runs first, no kill of the group misses it
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
    return Forked(pid)


def become_worker(role: str, read_fd: int, write_fd: int, stderr_fd: int, env: Mapping[str, str], *,
                  own_group: bool, keep: tuple[int, ...] = ()) -> None:
    """The child's side (of this fork, or of the fork server's, which ``keep``s the worker's
    socket to it): never returns."""
    code = 0
    try:
        gc.freeze()  # the parent's garbage is never collected here: its finalizers would close our files
        if own_group:
            os.setpgid(0, 0)
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(stderr_fd, 2)
        _close_all_but((read_fd, write_fd, *keep))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        import atexit
        import faulthandler

        faulthandler.disable()
        atexit._clear()
        os.environ.clear()
        os.environ.update(env)
        # The import path the parent gives a spawned worker (a fork server's is older).
        sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        sys.argv = [sys.executable, "-m", _ENTRY, role, str(read_fd), str(write_fd)]
        # The entry module by name, as a spawned worker's command line names it.
        importlib.import_module(_ENTRY).serve_role(role, read_fd, write_fd)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # said on stderr, which the parent's death report reads
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _close_all_but(keep: tuple[int, ...]) -> None:
    low = 3
    for fd in sorted(set(keep)):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
