"""The persistent compilation cache (``_jax_compat.compile_cache``): where it lives, how it
is switched off, how entries are written and trimmed, and that a fresh process reads back
what an earlier one compiled. JAX's cache is process-wide and set once, so what turns it on
runs in a fresh process; the suite itself runs with it off (conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pallas_verify._env import COMPILE_CACHE_ENV, compile_cache_root, user_cache_dir
from pallas_verify._jax_compat import compile_cache


@pytest.mark.parametrize(("value", "expected"), [
    (None, "user"), ("", "user"), ("off", None), ("OFF", None), ("0", None), ("false", None), ("no", None),
    ("/somewhere/cache", "/somewhere/cache"),
])
def test_the_variable_places_the_cache_or_turns_it_off(value, expected):
    environ = {"XDG_CACHE_HOME": "/xdg"} | ({} if value is None else {COMPILE_CACHE_ENV: value})
    root = compile_cache_root(environ)
    if expected == "user":
        assert root == user_cache_dir(environ) == Path("/xdg/pallas-verify")
    else:
        assert root == (None if expected is None else Path(expected))


def test_the_folder_names_the_jax_release_and_the_machine(tmp_path):
    import jax

    folder = compile_cache.folder_for(tmp_path)
    assert folder.parent == tmp_path
    assert folder.name == f"jax-{jax.__version__}-{compile_cache.machine_key()}"
    assert compile_cache.machine_key() == compile_cache.machine_key()  # stable within a machine


def test_an_entry_is_written_whole_and_a_hit_refreshes_its_time(tmp_path):
    store = compile_cache._Store(tmp_path)
    assert store.get("k") is None
    store.put("k", b"compiled")
    entry = tmp_path / f"k{compile_cache.SUFFIX}"
    assert entry.read_bytes() == b"compiled"
    assert [p.name for p in tmp_path.iterdir()] == [entry.name]  # no temporary file left behind
    os.utime(entry, (1_000_000, 1_000_000))
    store.put("k", b"other")  # an entry is never rewritten
    assert store.get("k") == b"compiled"
    assert entry.stat().st_mtime > 1_000_000


def test_trimming_removes_the_least_recently_used_and_dead_writers_files(tmp_path):
    for i in range(10):  # 10 entries of 100 bytes, entry 0 the least recently used
        entry = tmp_path / f"e{i}{compile_cache.SUFFIX}"
        entry.write_bytes(b"x" * 100)
        os.utime(entry, (1_000_000 + i, 1_000_000 + i))
    stale, fresh = tmp_path / ".k.1.2.tmp", tmp_path / ".k.3.4.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (1_000_000, 1_000_000))
    assert compile_cache.prune(tmp_path, max_bytes=2000) == 0  # under the bound: only the stale file goes
    assert not stale.exists() and fresh.exists()
    assert compile_cache.prune(tmp_path, max_bytes=800) == 400  # over it: down to 75% of it
    left = sorted(p.name for p in tmp_path.glob(f"*{compile_cache.SUFFIX}"))
    assert left == [f"e{i}{compile_cache.SUFFIX}" for i in range(4, 10)]


_COMPILE = textwrap.dedent("""
    import sys
    from pallas_verify._env import configure
    configure()
    import jax, numpy as np
    from jax._src import monitoring
    from pallas_verify._jax_compat import compile_cache
    hits = []
    monitoring.register_event_listener(
        lambda event, **_: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None)
    folder = compile_cache.enable(trim=True)
    assert compile_cache.enable() == folder  # once per process
    jax.jit(lambda x: x * 3 + 1)(np.ones(7, np.float32)).block_until_ready()
    print(folder, len(hits))
""")


def _fresh_process(tmp_path: Path, **env: str) -> tuple[str, int]:
    run = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True, timeout=300,
                         env={**os.environ, **env}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    folder, hits = run.stdout.split()
    return folder, int(hits)


def test_a_fresh_process_reads_back_what_an_earlier_one_compiled(tmp_path):
    root = tmp_path / "cache"
    first, hits = _fresh_process(tmp_path, **{COMPILE_CACHE_ENV: str(root)})
    assert Path(first) == compile_cache.folder_for(root) and hits == 0
    assert list(Path(first).glob(f"*{compile_cache.SUFFIX}"))
    second, hits = _fresh_process(tmp_path, **{COMPILE_CACHE_ENV: str(root)})
    assert second == first and hits == 1


def test_off_and_the_users_own_jax_cache_leave_jax_alone(tmp_path):
    folder, _ = _fresh_process(tmp_path, **{COMPILE_CACHE_ENV: "off"})
    assert folder == "None"
    own = tmp_path / "own"
    folder, _ = _fresh_process(tmp_path, **{COMPILE_CACHE_ENV: str(tmp_path / "ours"),
                                            "JAX_COMPILATION_CACHE_DIR": str(own)})
    assert folder == "None" and not (tmp_path / "ours").exists()
