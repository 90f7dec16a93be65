"""A fork server: one clean process that forks workers for a process that cannot fork them
itself (the requester's side; the server's own is ``forkserverd``).

A worker is forked straight from the process that wants it (``forked``) only while that
process has started no JAX backend and runs one Python thread, and only for a worker
that does not turn the compilation cache off. A pytest-xdist worker runs execnet's
thread; a test session or a campaign's driver starts the CPU backend early; a compiler's
worker turns the cache off. Each of these would spawn a fresh Python for every worker, a
second of CPU importing jax each time.

Such a process starts one server instead (``python -m pallas_verify._worker forks FD``, in
its process group), which imports what every worker needs (``_worker.preload``) and never
starts a backend, turns the compilation cache on or starts a thread. Every worker is then
a fork of it, made what a spawned worker is before it serves (``forked.become_worker``),
with the requester's working directory, import path, environment and process group. A
worker the server forked asks the same server for workers of its own (a campaign's unit
worker for its case workers), on a socket it is given at its fork (``adopt``). So a process
that can fork has its unit workers forked by a server too: one it forks from itself
(``_Server.start(here=True)``, no import), which inherits its compilation cache and so does not fork
a compiler's worker (a clean, spawned server does: ``_Server.clean``).

The server is the worker's parent: it sends the worker's exit status back, so ``Served``
waits for a worker as ``subprocess.Popen`` waits for a spawned one, and reaps it only once
the requester has the status, so that until then the pid (its kills, its pidfd) is the
worker's and no other process's, as a spawned child's is until it is reaped. Nothing
outlives its requester: when a requester is gone (its socket closed, or the server's
parent died), the server kills the workers it asked for.

A worker whose environment differs from the server's in a variable that jax reads at
import (``JAX_*``) is spawned as before, and so is every worker when the server cannot
start (said once on stderr) or where ``PALLAS_VERIFY_FORK=0`` turns forking off.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pallas_verify._env import COMPILE_CACHE_ENV, turned_off
from pallas_verify.execution.forked import FORK_ENV, Forked
from pallas_verify.execution.forked import start as forked_start

__all__ = ["IMPORT_TIME", "Served", "adopt", "fork", "readable", "recv", "send"]

#: The prefix of the variables jax reads when it is imported (its configuration flags). The
#: others it and its plugins read (``XLA_FLAGS``, ``TPU_*``, CUDA's) are read when a backend
#: starts, in the worker, after the fork; and a backend's start sets some of them in the
#: requester's environment (libtpu's ``TPU_LIBRARY_PATH``), which must not count as a change.
IMPORT_TIME = ("JAX_",)
#: How long the first fork waits for the server to start (import jax) before spawning.
_START_S = 120.0
_COMMAND = ("-m", "pallas_verify._worker", "forks")  # and the socket's descriptor
_HEAD = struct.Struct("!I")
_FDS = 3  # a request's descriptors: the worker's pipe ends (read, write) and its stderr


def fork(role: str, read_fd: int, write_fd: int, stderr_fd: int, env: Mapping[str, str],
         extra_env: Mapping[str, str] | None, *, own_group: bool, here: bool = False) -> Served | None:
    """A worker serving ``role`` forked by this process's server (see the module doc), or
    None where the server does not serve it (the caller spawns it). ``here``: this process
    may fork (``forked.forkable``), so a server it starts is a fork of it, not a new Python."""
    if sys.platform != "linux" or turned_off(os.environ.get(FORK_ENV)):
        return None
    if any(k.startswith(IMPORT_TIME) for k in extra_env or {}):
        return None
    clean = turned_off((extra_env or {}).get(COMPILE_CACHE_ENV))  # it must not inherit a cache turned on
    request = {"role": role, "env": dict(env), "own_group": own_group, "pgid": os.getpgrp(), "cwd": os.getcwd()}
    while (server := _server(_without(env, extra_env or {}), here=here, clean=clean)) is not None:
        try:
            return Served(server, server.fork({**request, "fingerprint": server.fingerprint, "clean": server.clean},
                                              (read_fd, write_fd, stderr_fd)))
        except _Refused:  # its fork failed (no memory, no pids): this worker is spawned, and says why if it fails too
            return None
        except (OSError, EOFError) as exc:
            if server.forks:  # it served before and died since (killed): a new one starts
                server.gone = True
                continue
            _give_up(server, f"the fork server stopped answering ({exc})")
    return None


class _Refused(Exception):
    """The server could not fork a worker (its ``os.fork`` failed); it still serves."""


class Served:
    """A worker the server forked, waited for as ``subprocess.Popen`` waits for a spawned one."""

    def __init__(self, server: _Server, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.code(self.pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.code(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
        return self.returncode


class _Server:
    """The requester's side: the socket to its server, and the server process where this
    process started it (``start``; a worker the server forked has a socket to it from birth)."""

    def __init__(self, sock: socket.socket, fingerprint: tuple[tuple[str, str], ...], *, clean: bool,
                 proc: subprocess.Popen | Forked | None = None, stderr: Any = None) -> None:
        self.fingerprint = fingerprint
        self.clean = clean  # its jax never had a compilation cache turned on: it may fork a compiler's worker
        self.proc, self.stderr = proc, stderr
        self._sock = sock
        self._lock = threading.Lock()
        self._codes: dict[int, int] = {}
        self.gone = False
        self.forks = 0  # workers it forked for this process

    @classmethod
    def start(cls, env: Mapping[str, str], *, here: bool = False) -> _Server:
        """Start a server with the environment ``env``: a new Python (clean), or with ``here``
        a fork of this process (which may fork: ``forked.forkable``), which has its imports
        and its compilation cache."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        stderr = tempfile.TemporaryFile()  # noqa: SIM115  (read back when it fails; closed in close())
        try:
            if here:
                proc: subprocess.Popen | Forked = forked_start("forks", theirs.fileno(), theirs.fileno(),
                                                               stderr.fileno(), env, own_group=False)
            else:
                proc = subprocess.Popen([sys.executable, *_COMMAND, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        except BaseException:
            ours.close()
            stderr.close()
            raise
        finally:
            theirs.close()
        return cls(ours, _fingerprint(env), clean=not (here and _cache_on_here()), proc=proc, stderr=stderr)

    @classmethod
    def inherited(cls, sock: socket.socket, fingerprint: tuple[tuple[str, str], ...], clean: bool) -> _Server:
        """The server that forked this process, on the socket it gave it."""
        return cls(sock, fingerprint, clean=clean)

    def fork(self, request: dict, fds: tuple[int, int, int]) -> int:
        with self._lock:
            send(self._sock, request, fds)
            while True:
                message = self._next(_START_S)
                if message is None:
                    raise TimeoutError(f"no answer in {_START_S:g} s")
                if "refused" in message:
                    raise _Refused(message["refused"])
                if "pid" in message:
                    self.forks += 1
                    return message["pid"]

    def code(self, pid: int, timeout: float | None) -> int | None:
        """``pid``'s exit status once the server has sent it, waiting up to ``timeout``
        (None: as long as it takes); 0 when the server is gone (its status unknown, as
        ``forked.Forked`` says it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while pid not in self._codes:
                if self.gone:
                    return 0
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    if self._next(left) is None:
                        return None
                except (OSError, EOFError):
                    self.gone = True
            code = self._codes.pop(pid)
            self._release(pid)
            return code

    def _release(self, pid: int) -> None:
        """Have the server reap ``pid`` now: once its status is known here it is gone, as a
        child ``subprocess.Popen`` waited for is."""
        try:
            send(self._sock, {"release": pid})
            while (message := self._next(_START_S)) is not None and message.get("released") != pid:
                pass
        except (OSError, EOFError):
            self.gone = True

    def _next(self, timeout: float | None) -> dict | None:
        """The next message that is not an exit status (those are kept), None at the
        timeout; EOFError when the server is gone."""
        while True:
            if not readable([self._sock.fileno()], timeout):
                return None
            message, _ = recv(self._sock)
            if "exit" not in message:
                return message
            self._codes[message["exit"]] = message["code"]
            return {}

    def close(self) -> str:
        """Stop asking (a server this process started stops, its workers with it); the tail
        of its stderr."""
        self.gone = True
        self._sock.close()
        if self.proc is None:
            return ""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.stderr.closed:
            return ""
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode(errors="replace").strip()
        self.stderr.close()
        return tail


_SERVERS: list[_Server] = []  # this process's: one, and a clean one beside a forked one that is not
_BROKEN: list[str] = []  # why the server could not serve, once it could not


def _server(env: Mapping[str, str], *, here: bool, clean: bool) -> _Server | None:
    """A server of this process for a worker of ``env`` (``clean``: that worker must not
    inherit a compilation cache turned on), started where none fits; None where none can
    serve it. ``here``: a server this process starts may be a fork of it."""
    if _BROKEN:
        return None
    for gone in [s for s in _SERVERS if s.gone]:  # it died: another one starts
        _SERVERS.remove(gone)
        gone.close()
    fingerprint = _fingerprint(env)
    if any(s.fingerprint != fingerprint for s in _SERVERS):
        return None  # its imports saw another environment: this worker is spawned
    fits = [s for s in _SERVERS if s.clean or not clean]
    if fits:
        return fits[0]
    try:
        started = _Server.start(env, here=here and not (clean and _cache_on_here()))
    except OSError as exc:
        _say_spawned(f"the fork server could not start ({exc})")
        return None
    _SERVERS.append(started)
    _stop_at_exit()
    return started


def _cache_on_here() -> bool:
    """Whether jax's persistent compilation cache is on in this process (a fork inherits it)."""
    jax = sys.modules.get("jax")
    return jax is not None and bool(jax.config.jax_compilation_cache_dir)


def _without(env: Mapping[str, str], extra_env: Mapping[str, str]) -> dict[str, str]:
    """A worker's environment ``env`` as it is without its own ``extra_env``: the server's."""
    base = {k: v for k, v in env.items() if k not in extra_env}
    return {**base, **{k: os.environ[k] for k in extra_env if k in os.environ}}


def _fingerprint(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in environ.items() if k.startswith(IMPORT_TIME)))


def _give_up(server: _Server, why: str) -> None:
    """Spawn every worker from now on, saying once why."""
    tail = server.close()
    _SERVERS.clear()
    _say_spawned(why + (f"\n{tail}" if tail else ""))


def _say_spawned(why: str) -> None:
    _BROKEN.append(why)
    print(f"pallas-verify: {why}; worker processes are spawned from now on (PALLAS_VERIFY_FORK=0 does so from "
          "the start)", file=sys.stderr)


_stopping: list[bool] = []


def _stop_at_exit() -> None:
    if not _stopping:
        _stopping.append(True)
        atexit.register(_close)


def _close() -> None:
    for server in _SERVERS:
        server.close()
    _SERVERS.clear()


def adopt(sock: socket.socket, fingerprint: tuple[tuple[str, str], ...], clean: bool) -> None:
    """In a worker the server just forked: ``sock`` is this process's way to the server that
    forked it (its workers then come from there too)."""
    _SERVERS.append(_Server.inherited(sock, fingerprint, clean))


def _forget_after_fork() -> None:
    """In a forked child: the parent's server is not the child's (its answers are the parent's)."""
    _SERVERS.clear()
    _stopping.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


# The socket between a requester and its server: pickled messages, each with its length in
# front; a fork request carries the worker's descriptors beside its first bytes.


def readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """Those of ``fds`` with something to read (or closed), waiting up to ``timeout``."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)]


def send(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    data = pickle.dumps(message)
    framed = _HEAD.pack(len(data)) + data
    sent = socket.send_fds(sock, [framed], list(fds)) if fds else sock.send(framed)
    sock.sendall(framed[sent:])


def recv(sock: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(sock, _HEAD.size, _FDS)
    head += _exactly(sock, _HEAD.size - len(head))
    (size,) = _HEAD.unpack(head)
    return pickle.loads(_exactly(sock, size)), fds


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the socket closed")
        data += chunk
    return data
