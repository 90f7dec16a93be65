"""Tools to break a nightly campaign's infrastructure on purpose, and to see what is left.

- ``Tagged``: every process a campaign starts inherits an environment variable; after it
  ends, the live processes still carrying it are its orphans (found through /proc, so a
  process re-parented to init is found too).
- ``RedisServer``: a real ``redis-server`` on a loopback port that can be killed with
  SIGKILL and started again on the same port.
- ``small_folder``: a tmpfs of a few hundred kilobytes mounted on a folder, read-only or
  writable (then filled to the last byte with ``fill``). Root can write through any
  permission bits, so a read-only or full folder has to be a real mount; where mounting
  is not allowed ``Unavailable`` says why.
- ``run_cli`` / ``start_cli``: the ``pallas-verify`` command as a user runs it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pallas_verify.execution.lifeline import children as children_of
from pallas_verify.execution.lifeline import descendants

__all__ = [
    "TAG_ENV",
    "RedisServer",
    "Tagged",
    "Unavailable",
    "busy_unit_workers",
    "children_of",
    "command",
    "descendants",
    "fill",
    "run_cli",
    "small_folder",
    "start_cli",
    "wait_for",
]

TAG_ENV = "PV_FAULT_TAG"
PV = [sys.executable, "-m", "pallas_verify.cli"]


class Unavailable(Exception):
    """This machine cannot stage the fault (the message says why)."""


class Tagged:
    """A tag for the processes of one campaign: ``env`` to start them with, ``alive()``
    to list those still running."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "JAX_PLATFORMS": "cpu", TAG_ENV: self.tag, **extra}

    def alive(self) -> list[int]:
        """Live (not zombie) processes carrying the tag, but this one and those that live as
        long as it does: its resource tracker (multiprocessing's) and its fork server
        (``pallas_verify.execution.forkserver``)."""
        found = []
        needle = f"{TAG_ENV}={self.tag}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    continue
                state, parent = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:2]
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            ours = int(parent) == os.getpid() and (b"resource_tracker" in command or _name(int(entry)) == "pv-fork-server")
            if state == "Z" or ours:
                continue
            found.append(int(entry))
        return found

    def orphans(self, wait_s: float = 5.0) -> list[int]:
        """The tagged processes still alive ``wait_s`` after the campaign ended (killed after)."""
        deadline = time.monotonic() + wait_s
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return left

    @contextlib.contextmanager
    def here(self) -> Iterator[None]:
        """Tag this process's environment, so the processes it starts carry the tag."""
        old = os.environ.get(TAG_ENV)
        os.environ[TAG_ENV] = self.tag
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(TAG_ENV, None)
            else:
                os.environ[TAG_ENV] = old


class RedisServer:
    """A ``redis-server`` on a free loopback port, killable and restartable."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which("redis-server") is None:
            raise Unavailable("redis-server is not installed (apt-get install redis-server; `make test` does it)")
        self.workdir = workdir
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        import redis

        self.proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client, deadline = redis.Redis(host="127.0.0.1", port=self.port), time.monotonic() + 20
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, as when its host or container dies."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=20)
            self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


@contextlib.contextmanager
def small_folder(path: Path, *, size_kb: int = 512, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` mounted on ``path`` (read-only if asked); unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "pv-fault", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        raise Unavailable(f"cannot mount a small tmpfs here ({mounted.stderr.strip() or 'mount failed'}): "
                          "a full or read-only folder needs a real mount, since root writes through permissions")
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, capture_output=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path) -> int:
    """Fill the file system of ``folder`` to the last byte; the bytes written."""
    written = 0
    with open(folder / ".filler", "ab", buffering=0) as handle:
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    written += handle.write(b"\0" * size) or 0
                except OSError:
                    break
    return written


def run_cli(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PV, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def start_cli(args: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*PV, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    """Poll ``predicate`` until it is true; RuntimeError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def busy_unit_workers() -> list[int]:
    """Unit worker processes (``pallas_verify._worker units``) this process started, spawned
    or forked (named ``pv-worker-units``: a fork's command line is its parent's), that run
    a unit now: their case workers (which join their process group, whoever forked them)
    have started."""
    below = descendants(os.getpid())
    groups = {_group(pid) for pid in below if _name(pid) == "pv-worker-cases"}
    return [pid for pid in below if _name(pid) == "pv-worker-units" and pid in groups]


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
