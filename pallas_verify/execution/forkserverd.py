"""The fork server's own side (``python -m pallas_verify._worker forks FD``; see
``forkserver`` for why it exists and for the requester's side).

It imports what every worker needs, then waits on its requesters' sockets: the first is
the process that started it; each worker it forks gets another, on which that worker may
ask for workers of its own. For each request it forks a worker (``_fork_one``: made what a
spawned worker is, in the requester's folder and process group) and answers its pid; when
a worker exits it sends the requester the exit status, and reaps the worker only once the
requester releases it. A requester that is gone takes the workers it asked for along; once
the first is gone, the server kills every worker it forked and exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Callable

from pallas_verify.execution.forked import become_worker
from pallas_verify.execution.forkserver import adopt, readable, recv, send
from pallas_verify.execution.lifeline import kill_tree

__all__ = ["serve"]

#: The server looks this often whether its requester is gone.
_WATCH_S = 0.5


def serve(fd: int, preload: Callable[[], None]) -> None:
    """The server's main (``_worker forks FD``): ``preload`` (the imports every worker
    needs), then fork a worker per request and send back its pid and, once it exited, its
    status; stop (with every worker) when the requester on the socket ``fd`` is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the requester's to handle
    parent = os.getppid()
    serving = _Serving(socket.socket(fileno=fd))
    preload()
    woken_r, woken_w = os.pipe()
    os.set_blocking(woken_w, False)
    signal.set_wakeup_fd(woken_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        while os.getppid() == parent:
            ready = readable([*serving.requesters, woken_r], _WATCH_S)
            if woken_r in ready:
                os.read(woken_r, 4096)
            serving.report_exits()
            for requester in set(ready) & set(serving.requesters):
                serving.answer(requester)
    except _Gone:
        pass
    finally:
        serving.stop()
        os._exit(0)


class _Gone(Exception):
    """The server's own requester is gone."""


class _Serving:
    """The server's state: a socket per requester (its own first, then one per worker it
    forked, which may ask for workers of its own), and the workers each requester asked for."""

    def __init__(self, first: socket.socket) -> None:
        self.first = first.fileno()
        self.requesters: dict[int, socket.socket] = {self.first: first}
        self.owner: dict[int, int] = {}  # a live worker's pid -> its requester's socket
        self.reported: set[int] = set()  # workers whose exit was sent, not yet released

    def answer(self, fd: int) -> None:
        """Serve one request of the requester on ``fd``; a requester gone takes its workers along."""
        try:
            request, fds = recv(self.requesters[fd])
        except (EOFError, OSError):
            if fd == self.first:
                raise _Gone from None
            self._drop(fd)
            return
        if "release" in request:
            self._reap(request["release"])
            with contextlib.suppress(OSError):
                send(self.requesters[fd], {"released": request["release"]})
            return
        try:
            pid, inherited = _fork_one(request, fds)
        except OSError as exc:  # no memory or no pids left: that worker is refused, the others go on
            with contextlib.suppress(OSError):
                send(self.requesters[fd], {"refused": f"fork failed: {exc}"})
            return
        self.owner[pid] = fd
        self.requesters[inherited.fileno()] = inherited
        with contextlib.suppress(OSError):
            send(self.requesters[fd], {"pid": pid})

    def report_exits(self) -> None:
        """Send the exit status of each worker that exited since to its requester, leaving it
        unreaped: its pid stays its own (no other process gets it) until the requester,
        told, releases it."""
        for pid in [pid for pid in self.owner if pid not in self.reported]:
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is None:
                continue
            self.reported.add(pid)
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            try:
                send(self.requesters[self.owner[pid]], {"exit": pid, "code": code})
            except (KeyError, OSError):  # its requester is gone: nobody releases it
                self._reap(pid)

    def _reap(self, pid: int) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        self.owner.pop(pid, None)
        self.reported.discard(pid)

    def _drop(self, fd: int) -> None:
        """A requester the server forked is gone: the workers it asked for go too (as a
        worker whose parent died does, ``lifeline``)."""
        self.requesters.pop(fd).close()
        for pid in [pid for pid, owner in self.owner.items() if owner == fd]:
            kill_tree(pid, leads_group=False)
            self._reap(pid)

    def stop(self) -> None:
        for pid in list(self.owner):
            kill_tree(pid, leads_group=False)


def _fork_one(request: dict, fds: list[int]) -> tuple[int, socket.socket]:
    """Fork the worker ``request`` asks for, on its descriptors ``fds``; its pid and the
    server's end of a socket the worker may ask for workers of its own on."""
    read_fd, write_fd, stderr_fd = fds
    own_group, pgid = request["own_group"], request["pgid"]
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = os.fork()
    except OSError:
        for descriptor in fds:
            os.close(descriptor)
        ours.close()
        theirs.close()
        raise
    if pid == 0:
        ours.close()
        adopt(theirs, request["fingerprint"], request["clean"])
        try:
            os.chdir(request["cwd"])
            if not own_group:
                os.setpgid(0, pgid)
        except OSError:
            pass  # the worker still serves; a vanished folder or group is the requester's
        become_worker(request["role"], read_fd, write_fd, stderr_fd, request["env"], own_group=own_group,
                      keep=(theirs.fileno(),))
    theirs.close()
    with contextlib.suppress(OSError):  # the child does it too: whichever runs first
        os.setpgid(pid, pid if own_group else pgid)
    for descriptor in fds:
        os.close(descriptor)
    return pid, ours
