"""JAX's persistent compilation cache, for the interpreters' and the references' compiles.

A second run of the same kernel (a CI run of a derandomized profile draws the same
examples every time) compiles what the first run compiled: the kernel under each
interpreter, the reference, its float64 ground truth, the metamorphic reruns. With the
cache on, each of those compiles is read back from the user's cache folder instead.

What keys an entry, and why a stale one is never used:

- JAX's key: the lowered program itself (the StableHLO module, so a kernel or reference
  whose body changed, or that runs under another interpreter mode compiled in, is
  another program), the jaxlib version, the platform and its version, XLA flags and
  the compile options. Source locations are not part of it.
- The folder: ``<root>/jax-<jax version>-<machine>``, the machine being the CPU's
  architecture, model and feature flags: an entry is native code for the CPU it was
  compiled on, and JAX's key names the platform (``cpu``) but not the CPU, so a cache
  folder shared between hosts (a home directory on NFS) must not hand one host's code
  to another.
- Python callbacks: TPU interpret mode (and every ``io_callback``) calls back into
  Python from the compiled program; the program names each callback only by its index
  in the lowering's list, and JAX binds the callbacks of the current lowering to an
  entry it loads. So what a callback does (the interpreter's memory model, a run-time
  knob such as the fill value or the DMA timing, pallas-verify's memory watch) is
  always the current code, never the cached one, and the cached code is only the
  program around the callbacks, which the key covers.

Entries are written atomically (a temporary file renamed into place), so a process
killed mid-write (a worker stopped at its time limit, a Ctrl-C) leaves no truncated
entry behind; an entry that cannot be read is a miss. The folder is bounded: a front
end (the CLI, the pytest plugin) trims it to ``MAX_BYTES`` when it starts, the least
recently used entries first (a hit refreshes an entry's time).

Only the processes that run the interpreters and the references use it (the CLI's or
pytest's, the interpreters' workers, a campaign's unit workers); a compile backend's
worker does not: its compile is the check it makes. The user's own JAX cache settings
win: with ``jax_compilation_cache_dir`` already set, or ``JAX_COMPILATION_CACHE_MAX_SIZE``
in the environment, JAX's own cache is left as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from jax._src.compilation_cache_interface import CacheInterface

__all__ = ["MAX_BYTES", "SUFFIX", "enable", "folder_for", "machine_key", "paused", "prune"]

#: The most bytes the folder of one JAX release and machine keeps (trimmed at a front end's start).
MAX_BYTES = 1 << 30
#: A trimmed folder keeps this share of MAX_BYTES, so that trimming is rare.
_KEEP = 0.75
#: The file name ending of an entry (JAX's file cache uses the same).
SUFFIX = "-cache"
#: A temporary file this old was left by a process that died while writing it.
_STALE_TMP_S = 3600.0

_lock = threading.Lock()
_enabled: list[Path | None] = []  # the folder enable() chose in this process (once)


def machine_key() -> str:
    """The CPU this process compiles for: its architecture and a short hash of its model and
    feature flags (``/proc/cpuinfo`` on Linux, ``platform.processor()`` elsewhere)."""
    described = platform.processor()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = ("model name", "flags", "Features", "CPU part", "cpu model")
        described = "\n".join(sorted({line for line in lines if line.split(":")[0].strip() in wanted}))
    return f"{platform.machine() or 'cpu'}-{hashlib.sha256(described.encode()).hexdigest()[:10]}"


def folder_for(root: Path) -> Path:
    """The cache folder of the installed JAX release on this machine, under ``root``."""
    import jax

    return root / f"jax-{jax.__version__}-{machine_key()}"


def enable(root: Path | None = None, *, trim: bool = False) -> Path | None:
    """Turn the persistent compilation cache on in this process (once; later calls return
    the first answer): in ``folder_for(root)``, ``root`` defaulting to where
    ``PALLAS_VERIFY_COMPILE_CACHE`` says (``_env.compile_cache_root``). ``trim``: bound the
    folder first (``prune``; front ends only). The folder in use, or None when the cache is
    off, the user's own JAX cache settings stand, or the folder cannot be made."""
    with _lock:
        if not _enabled:
            _enabled.append(_enable(root, trim=trim))
        return _enabled[0]


def _enable(root: Path | None, *, trim: bool) -> Path | None:
    import jax

    from pallas_verify._env import compile_cache_root

    root = compile_cache_root() if root is None else root
    if root is None or jax.config.jax_compilation_cache_dir or "JAX_COMPILATION_CACHE_MAX_SIZE" in os.environ:
        return None
    folder = folder_for(root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # no cache folder here (a read-only home): every compile is made, as without the cache
    if trim:
        prune(folder)
    for flag, value in (("jax_persistent_cache_min_compile_time_secs", 0.0),
                        ("jax_persistent_cache_min_entry_size_bytes", -1)):
        if flag.upper() not in os.environ:  # the user's setting wins
            jax.config.update(flag, value)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    _install(folder)
    return folder


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No persistent compilation cache inside (a benchmark's hand-written side, which has
    none); as it was after."""
    folder = _enabled[0] if _enabled else None
    if folder is None:
        yield
        return
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", True)
        compilation_cache.reset_cache()
        _install(folder)


def _install(folder: Path) -> None:
    """Make ``folder``'s atomic store (``_Store``) JAX's cache; where this JAX keeps its cache
    elsewhere, its own file cache in ``folder`` (set by the config above) serves."""
    from jax._src import compilation_cache

    store = _Store(folder)
    mutex = getattr(compilation_cache, "_cache_initialized_mutex", None)
    if mutex is None or not hasattr(compilation_cache, "_cache"):
        return
    with mutex:
        if not compilation_cache._cache_initialized:
            compilation_cache._cache = store
            compilation_cache._cache_initialized = True


class _Store(CacheInterface):
    """One file per entry: written to a temporary file and renamed into place, read back
    whole or not at all; a hit refreshes the entry's time (``prune`` keeps recent ones)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def get(self, key: str) -> bytes | None:
        entry = self._path / f"{key}{SUFFIX}"
        try:
            value = entry.read_bytes()
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.utime(entry)
        return value

    def put(self, key: str, value: bytes) -> None:
        entry = self._path / f"{key}{SUFFIX}"
        if entry.exists():
            return
        partial = self._path / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            partial.write_bytes(value)
            os.replace(partial, entry)
        except OSError:  # a full disk: the compile stands, uncached
            with contextlib.suppress(OSError):
                partial.unlink()


def prune(folder: Path, max_bytes: int = MAX_BYTES) -> int:
    """Trim ``folder`` to ``_KEEP`` of ``max_bytes`` once it holds more than ``max_bytes``,
    the least recently used entries first, and remove temporary files left by dead
    writers; the bytes removed."""
    entries, total, removed = [], 0, 0
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(folder) as listing:
        for item in listing:
            with contextlib.suppress(OSError):
                stat = item.stat()
                if item.name.endswith(SUFFIX):
                    entries.append((stat.st_mtime, item.path, stat.st_size))
                    total += stat.st_size
                elif item.name.endswith(".tmp") and now - stat.st_mtime > _STALE_TMP_S:
                    os.unlink(item.path)
    if total <= max_bytes:
        return 0
    for _, path, size in sorted(entries):
        if total <= _KEEP * max_bytes:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= size
            removed += size
    return removed
