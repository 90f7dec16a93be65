"""Workers forked by the fork server (``execution.forkserver``), for a process that can no
longer fork them itself: each is the server's child, yet has the requester's working
directory, import path, environment and process group; its exit status comes back through
the server; and nothing the server forked outlives the requester."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pallas_verify.execution import forkserver

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fork server runs on Linux only")


def _run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat")
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


# A process that has started a backend: it cannot fork, so its workers come from its server.
STARTED = r'''
import os, signal, sys, time
from pallas_verify._env import configure

configure()
import jax.numpy as jnp

jnp.ones(2).block_until_ready()
from pallas_verify.execution import forked, forkserver
from pallas_verify.execution.process import Child

assert not forked.forkable(None)
'''

WHERE = STARTED + r'''
folder = os.path.realpath(sys.argv[1])
os.chdir(folder)
open("here.py", "w").write("import os\nraise RuntimeError(f'in {os.getcwd()} with {os.environ[\"MARK\"]}')\n")
os.environ["MARK"] = "set-after-the-server-started"
for own_group in (False, True):
    child = Child("cases", own_group=own_group, env={"EXTRA": "1"})
    assert isinstance(child._proc, forkserver.Served), type(child._proc)
    child.send({"task": "import", "ref": "here.py"})  # a path relative to our working directory
    said = child.recv()["error"]
    print(f"in {folder} with set-after-the-server-started" in said, os.path.realpath(f"/proc/{child.pid}/cwd") == folder,
          os.getpgid(child.pid) == (child.pid if own_group else os.getpgrp()), flush=True)
    child.kill()
'''


def test_a_served_worker_has_the_requesters_folder_path_environment_and_group(tmp_path):
    run = _run(WHERE, str(tmp_path), MARK="before")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["True"] * 6, (run.stdout, run.stderr[-3000:])


DEATHS = STARTED + r'''
from pallas_verify.execution.process import ready

folder = sys.argv[1]
for end, how in (("os.abort()", "killed by signal SIGABRT"), ("sys.exit(3)", "exited with code 3")):
    planted = os.path.join(folder, "planted.py")
    open(planted, "w").write(f"import os, sys\nprint('planted last words', file=sys.stderr, flush=True)\n{end}\n")
    child = Child("cases")
    child.send({"task": "import", "ref": planted})
    assert child.wait(time.perf_counter(), limit_s=60) is None
    death = child.death()
    assert death.how() == how, death
    assert "planted last words" in death.tail, death.tail

child, other = Child("cases"), Child("cases")
os.kill(child.pid, signal.SIGKILL)
assert ready([child, other], 30) == [child]
assert child.death(wait_s=5).how(was=True) == "was killed by signal SIGKILL"
other.send({"task": "modules"})
assert any(f.endswith("jax/__init__.py") for f in other.recv())
print(other.pid, forkserver._SERVERS[0].proc.pid, flush=True)
time.sleep(600)
'''


def test_exit_statuses_come_back_and_nothing_outlives_the_requester(tmp_path):
    """Deaths are reported as a spawned worker's are; SIGKILL the requester, and its server
    and the worker it forked are gone soon after."""
    with subprocess.Popen([sys.executable, "-c", DEATHS, str(tmp_path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as requester:
        try:
            line = requester.stdout.readline()
            assert line, requester.stderr.read()[-3000:]
            worker, server = map(int, line.split())
            assert _parent(worker) == server
        finally:
            requester.kill()
    assert _gone(server, 10) and _gone(worker, 10)


NESTED = STARTED + r'''
# A worker that asks for a worker of its own (as a campaign's unit worker asks for case
# workers) gets it from the same server, over the socket the server gave it at its fork.
asks = os.path.join(sys.argv[1], "asks.py")
open(asks, "w").write(
    "import builtins\n"
    "from pallas_verify.execution import forkserver\n"
    "from pallas_verify.execution.process import Child\n"
    "builtins.kept = inner = Child('cases')\n"
    "raise RuntimeError(f'{type(inner._proc).__name__} {inner.pid} {forkserver._SERVERS[0].proc is None}')\n")
outer = Child("cases")
outer.send({"task": "import", "ref": asks})
kind, inner, inherited = outer.recv()["error"].split(": ")[-1].split(";")[0].split()
print(kind, inherited, outer.pid, inner, forkserver._SERVERS[0].proc.pid, flush=True)
time.sleep(600)
'''


def test_a_served_worker_asks_the_same_server_and_its_workers_go_with_it(tmp_path):
    with subprocess.Popen([sys.executable, "-c", NESTED, str(tmp_path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as requester:
        try:
            line = requester.stdout.readline()
            assert line, requester.stderr.read()[-3000:]
            kind, inherited, outer, inner, server = line.split()
            assert (kind, inherited) == ("Served", "True")
            assert _parent(int(inner)) == _parent(int(outer)) == int(server)
            os.kill(int(outer), signal.SIGKILL)  # the server kills what the dead requester asked for
            assert _gone(int(inner), 5)
            assert not _gone(int(server), 0.5), "the server still serves its own requester"
        finally:
            requester.kill()


FORKABLE = r'''
import sys
from pathlib import Path

from pallas_verify._env import COMPILE_CACHE_ENV, configure

configure()
from pallas_verify._worker import preload

preload()
from pallas_verify._jax_compat import compile_cache
from pallas_verify.execution import forked, forkserver
from pallas_verify.execution.process import Child

assert forked.forkable(None)
compile_cache.enable(Path(sys.argv[1]))  # as a command does before its workers start
units = Child("units")  # it will want case workers once its backend runs: from a server forked from here
compiler = Child("cases", env={COMPILE_CACHE_ENV: "off"})  # must not inherit our cache: a clean server's
cases = Child("cases")  # straight from here, as before
servers = forkserver._SERVERS
print(type(units._proc).__name__, type(servers[0].proc).__name__, servers[0].clean,
      type(compiler._proc).__name__, type(servers[1].proc).__name__, servers[1].clean, type(cases._proc).__name__)
for child in (units, compiler, cases):
    child.kill()
'''


def test_a_process_that_can_fork_forks_its_server_and_a_compiler_gets_a_clean_one(tmp_path):
    run = _run(FORKABLE, str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["Served", "Forked", "False", "Served", "Popen", "True", "Forked"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="counting the processes a command starts needs strace")
def test_a_campaign_command_starts_no_python_for_its_workers(tmp_path):
    """Its unit workers come from a server forked from it, and their case workers from the same."""
    trace = tmp_path / "trace"
    run = subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(trace),
                          sys.executable, "-m", "pallas_verify.cli", "fuzz", "reference_kernels.elementwise:RAGGED_ADD",
                          "--backends", "interpret", "--budget", "60s", "--max-slices", "2", "--workers", "2",
                          "--slice-examples", "2", "--seed", "1", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["kernels"][0]["results"]["interpret"]["status"] == "pass"
    assert "pallas_verify._worker" not in trace.read_text()


SPAWNS = STARTED + r'''
def started(**env):
    child = Child("cases", env=env)
    child.send({"task": "modules"})
    child.recv()
    child.kill()
    return type(child._proc).__name__


print(started(JAX_ENABLE_X64="1"))  # read at import: the server's imports did not see it
print(started())
first = forkserver._SERVERS[0].proc.pid
os.kill(first, signal.SIGKILL)
time.sleep(0.5)
print(started(), forkserver._SERVERS[0].proc.pid != first)  # the worker is lost with it; a new server serves

forkserver._close()
forkserver._COMMAND = ("-c", "import sys; sys.exit('planted: the server cannot start')")
print(started(), started())  # spawned, and said once on stderr
'''


def test_a_worker_is_spawned_where_the_server_cannot_serve_it():
    run = _run(SPAWNS)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["Popen", "Served", "Served", "True", "Popen", "Popen"]
    assert run.stderr.count("spawned from now on") == 1, run.stderr[-3000:]
    assert "planted: the server cannot start" in run.stderr


def test_the_server_is_stopped_at_exit():
    run = _run(STARTED + "child = Child('cases'); print(forkserver._SERVERS[0].proc.pid); child.kill()\n")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _gone(int(run.stdout), 5)


def test_a_worker_asked_of_the_server_within_this_session_serves():
    """In this test process (pytest's, which has started a backend): a case worker from the server."""
    import jax.numpy as jnp

    from pallas_verify.execution.isolation import Worker

    jnp.ones(2).block_until_ready()
    worker = Worker(timeout_s=60)
    try:
        worker.prestart()
        assert isinstance(worker._child._proc, forkserver.Served)
        loaded = worker.collect(worker.submit({"task": "modules"}))
        assert any(f.endswith("jax/__init__.py") for f in loaded)
    finally:
        worker.close()
