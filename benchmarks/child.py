"""A child Python process that answers JSON-line requests with JSON-line events.

Reading waits with a time limit, so a child stuck in a kernel that never returns is
noticed and killed; the next request starts a fresh child.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
import time
from typing import Any

__all__ = ["ChildProcess", "Silent"]


class Silent(Exception):
    """The child sent no event within the time limit (it was killed)."""


@dataclasses.dataclass
class ChildProcess:
    """``python -m MODULE`` with JSON lines in both directions; started lazily."""

    module: str
    start_timeout_s: float = 300.0
    _proc: subprocess.Popen[bytes] | None = None
    _buffer: bytes = b""
    starts: int = 0

    def _start(self) -> None:
        self.close()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._buffer = b""
        self.starts += 1
        event = self.next_event(self.start_timeout_s)
        if event.get("event") != "ready":
            raise RuntimeError(f"child {self.module} did not start: its first event was {event!r}")

    def send(self, request: dict[str, Any]) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._proc is not None
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        self._proc.stdin.flush()

    def next_event(self, timeout_s: float) -> dict[str, Any]:
        """The next event; kills the child and raises Silent when none comes in time."""
        assert self._proc is not None
        assert self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0.0))
            if not ready:
                self.close()
                raise Silent(f"no event from {self.module} within {timeout_s:.1f} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self._proc.wait()
                self.close()
                raise RuntimeError(f"child {self.module} exited with code {code}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
        self._proc = None
