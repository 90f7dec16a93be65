"""The process primitive under every worker: a deadline kill takes the whole tree, a death
says its signal or exit code with the tail of stderr, and a death wakes ``ready``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from pallas_verify.execution.process import Child, Death, ready

# A spec file whose import (the worker's "import" task) starts a process tree and hangs.
SPAWNS = """
import subprocess, sys, time
kids = [subprocess.Popen(["sleep", "600"]), subprocess.Popen(["sleep", "600"], start_new_session=True)]
open({out!r}, "w").write(" ".join(str(k.pid) for k in kids))
time.sleep(600)
"""
LAST_WORDS = "import os, sys\nprint('planted last words', file=sys.stderr, flush=True)\n{end}\n"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _importing(tmp_path: Path, text: str, **options) -> Child:
    spec_file = tmp_path / "planted.py"
    spec_file.write_text(text)
    child = Child("cases", **options)
    child.send({"task": "import", "ref": str(spec_file)})
    return child


@pytest.mark.parametrize("own_group", [True, False], ids=["own_group", "parent_group"])
def test_a_deadline_kill_takes_the_whole_tree(tmp_path, own_group):
    pids = tmp_path / "pids"
    child = _importing(tmp_path, SPAWNS.format(out=str(pids)), own_group=own_group)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        kids = [int(p) for p in pids.read_text().split()]
        assert all(_alive(k) for k in kids)
        started = time.perf_counter()
        assert child.wait(started, limit_s=0.3) == 0.0  # the limit, reached busy or not
        assert time.perf_counter() - started < 5
    finally:
        child.kill()
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in (child.pid, *kids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child.pid)
    assert not any(_alive(k) for k in kids)  # its child, and the one in a session of its own


@pytest.mark.parametrize(("end", "how"), [("os.abort()", "killed by signal SIGABRT"),
                                          ("sys.exit(3)", "exited with code 3")])
def test_a_death_says_its_signal_or_exit_code_and_the_tail_of_stderr(tmp_path, end, how):
    child = _importing(tmp_path, LAST_WORDS.format(end=end))
    assert child.wait(time.perf_counter(), limit_s=60) is None  # the pipe ended
    with pytest.raises(EOFError):
        child.recv()
    death = child.death()
    assert death.how() == how
    assert "planted last words" in death.tail
    assert death.describe("worker process").startswith(f"worker process {how}; stderr tail:\n")
    child.kill()  # a second stop is nothing


def test_a_child_killed_from_outside_wakes_ready_and_its_death_names_the_signal():
    child, other = Child("cases"), Child("cases")
    try:
        assert ready([child, other], 0.2) == []
        os.kill(child.pid, signal.SIGKILL)
        started = time.monotonic()
        assert ready([child, other], 30) == [child]
        assert time.monotonic() - started < 10
        assert child.death(wait_s=5).how(was=True) == "was killed by signal SIGKILL"
    finally:
        child.kill()
        other.kill()


def test_death_wording():
    assert Death(code=None).how() == "stopped answering"
    assert Death(code=-signal.SIGSEGV).signal == "SIGSEGV"
    assert Death(code=0, tail=()).describe("it") == "it exited with code 0"
