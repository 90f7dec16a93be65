"""Workers forked from a process that has imported jax and Pallas (``execution.forked``):
the same child as a spawned one, said to have died the same way, killed with its tree the
same way, and never forked from a process once JAX has started a backend there, nor where
told not to."""

from __future__ import annotations

import os
import subprocess
import sys

from pallas_verify.execution.forked import FORK_ENV

# Run in a fresh process, as a command or a plugin session starts its workers: jax and
# Pallas imported, no backend started yet.
SCRIPT = r'''
import os, signal, sys, time
from pathlib import Path

from pallas_verify._env import configure

configure()
from pallas_verify._worker import preload

preload()
from pallas_verify.execution import forked
from pallas_verify.execution.process import Child, ready

folder = Path(sys.argv[1])
assert forked.forkable(None)
assert not forked.forkable({"JAX_ENABLE_X64": "1"}), "read at import: a fork cannot give it"

# A death by a signal and by an exit code, each with the tail of its stderr.
for end, how, own_group in (("os.abort()", "killed by signal SIGABRT", True),
                            ("sys.exit(3)", "exited with code 3", False)):
    planted = folder / "planted.py"
    planted.write_text(f"import os, sys\nprint('planted last words', file=sys.stderr, flush=True)\n{end}\n")
    child = Child("cases", own_group=own_group)
    assert isinstance(child._proc, forked.Forked), type(child._proc)
    assert (os.getpgid(child.pid) == child.pid) == own_group
    child.send({"task": "import", "ref": str(planted)})
    assert child.wait(time.perf_counter(), limit_s=60) is None
    death = child.death()
    assert death.how() == how, death
    assert "planted last words" in death.tail, death.tail

# A hang killed at its limit, with the process it started.
(folder / "hangs.py").write_text(
    "import subprocess, time\n"
    f"open({str(folder / 'pid')!r}, 'w').write(str(subprocess.Popen(['sleep', '600']).pid))\n"
    "time.sleep(600)\n")
child = Child("cases")
child.send({"task": "import", "ref": str(folder / "hangs.py")})
deadline = time.monotonic() + 60
while not ((folder / "pid").exists() and (folder / "pid").read_text()) and time.monotonic() < deadline:
    time.sleep(0.05)
assert child.wait(time.perf_counter(), limit_s=0.3) == 0.0
child.kill()
grandchild = int((folder / "pid").read_text())
deadline = time.monotonic() + 5
while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
stat = Path(f"/proc/{grandchild}/stat")
assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", "killed with the tree"

# A kill from outside wakes ``ready``; the other child still serves a request.
child, other = Child("cases"), Child("cases")
os.kill(child.pid, signal.SIGKILL)
assert ready([child, other], 30) == [child]
assert child.death(wait_s=5).how(was=True) == "was killed by signal SIGKILL"
other.send({"task": "modules"})
assert any(f.endswith("jax/__init__.py") for f in other.recv()), "a fork has the parent's imports"
other.kill()

# Once a backend runs, a worker is not forked from here but by the fork server.
import jax.numpy as jnp

from pallas_verify.execution import forkserver

jnp.ones(2).block_until_ready()
assert not forked.forkable(None)
served = Child("cases")
assert isinstance(served._proc, forkserver.Served)
served.kill()
print("forked workers: ok")
'''


def _run(tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


def test_a_forked_worker_serves_dies_and_is_killed_as_a_spawned_one(tmp_path):
    run = _run(tmp_path)
    assert run.returncode == 0 and "forked workers: ok" in run.stdout, run.stderr[-3000:]


def test_no_worker_is_forked_where_told_not_to():
    script = ("from pallas_verify._env import configure; configure()\n"
              "from pallas_verify._worker import preload; preload()\n"
              "from pallas_verify.execution import forked, process\n"
              "child = process.Child('cases'); print(forked.forkable(None), type(child._proc).__name__); child.kill()\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, FORK_ENV: "0"})
    assert run.stdout.split() == ["False", "Popen"], run.stderr[-3000:]
