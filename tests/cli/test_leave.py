"""A command's process ends with its status once it owes nothing (``exits.leave``): its exit
hooks run, its output flushed, a running thread waited for; the interpreter's teardown skipped."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent('''
    import atexit, sys, threading, time
    from pallas_verify.exits import leave

    class TornDown:  # says so when the interpreter tears this module's globals down
        def __del__(self):
            print("torn down", flush=True)

    KEPT = TornDown()
    atexit.register(lambda: print("hook ran", end="", flush=True))
    sys.stdout.write("written, not flushed; ")
    if sys.argv[1] == "thread":
        threading.Thread(target=lambda: (time.sleep(0.5), print("thread done; ", end=""))).start()
    leave(int(sys.argv[2]))
''')


@pytest.mark.parametrize("status", [0, 1, 130])
def test_leave_runs_the_exit_hooks_flushes_and_skips_the_teardown(tmp_path, status):
    script = tmp_path / "leave.py"
    script.write_text(_SCRIPT)
    run = subprocess.run([sys.executable, str(script), "alone", str(status)], capture_output=True, text=True, timeout=120)
    assert run.returncode == status, run.stderr
    assert run.stdout == "written, not flushed; hook ran"  # no "torn down": the teardown was skipped


def test_leave_waits_for_a_running_thread_as_an_ordinary_exit_does(tmp_path):
    script = tmp_path / "leave.py"
    script.write_text(_SCRIPT)
    run = subprocess.run([sys.executable, str(script), "thread", "4"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 4, run.stderr
    assert run.stdout.startswith("written, not flushed; thread done; hook ran")
    assert "torn down" in run.stdout  # the ordinary exit, teardown included
