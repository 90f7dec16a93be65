"""A watchdog for semaphore deadlocks in TPU interpret mode (JAX 0.12 internals)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from pallas_verify._jax_compat.errors import DEADLOCK_MARKER

__all__ = ["DeadlockError", "deadlock_watch"]

# --- Deadlocks in TPU interpret mode -------------------------------------------------
# `Semaphore.wait` polls forever (shared_memory.py), calling `shared_memory.check_failed()`
# every 0.1 s. A watchdog that sees every core of the kernel inside a wait whose count is
# short and that has no DMA task queued (and nothing changed for a poll interval) knows no
# one can ever signal: it records a failure through `set_failed`, so each waiting core
# raises from `check_failed` and the run ends with an error that names the waits.
_POLL_S = 0.5


class DeadlockError(RuntimeError):
    """Every core of a TPU interpret mode kernel waits on a semaphore nothing can signal."""


class _Watch:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiters: dict[int, tuple[Any, int, int, bool, Any]] = {}
        self.running = 0  # per-core threads of a multi-core kernel inside their run
        self.progress = 0  # signals, queued DMAs, finished waits and runs
        self.active = 0  # deadlock_watch contexts open
        self.thread: threading.Thread | None = None


_WATCH = _Watch()


def _bump(fn: Any, *, counts_running: bool = False) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with _WATCH.lock:
            _WATCH.progress += 1
            _WATCH.running += counts_running
        try:
            return fn(*args, **kwargs)
        finally:
            with _WATCH.lock:
                _WATCH.progress += 1
                _WATCH.running -= counts_running

    return wrapped


def _install_watch() -> None:
    from jax._src.pallas.mosaic.interpret import shared_memory, thread_map

    semaphore = shared_memory.Semaphore
    original_wait = semaphore.wait

    def wait(self: Any, value: Any, global_core_id: Any, *, has_tasks: bool = False, logging_info: Any = None) -> Any:
        key = threading.get_ident()
        with _WATCH.lock:
            _WATCH.waiters[key] = (self, int(value), int(global_core_id), has_tasks, logging_info)
        try:
            return original_wait(self, value, global_core_id, has_tasks=has_tasks, logging_info=logging_info)
        finally:
            with _WATCH.lock:
                _WATCH.waiters.pop(key, None)
                _WATCH.progress += 1

    semaphore.wait = wait
    semaphore.signal = _bump(semaphore.signal)
    semaphore.enqueue_task = _bump(semaphore.enqueue_task)
    thread_map._run_jaxpr = _bump(thread_map._run_jaxpr, counts_running=True)
    _WATCH.thread = threading.Thread(target=_watch_loop, name="pallas-verify-deadlock-watch", daemon=True)
    _WATCH.thread.start()


def _snapshot() -> tuple[Any, ...] | None:
    """The state of a deadlock (every core waits, none can be signalled), or None."""
    with _WATCH.lock:
        if not _WATCH.active or not _WATCH.waiters:
            return None
        waiters = list(_WATCH.waiters.values())
        running, progress = _WATCH.running, _WATCH.progress
    memory = waiters[0][0].shared_memory
    if any(w[0].shared_memory is not memory for w in waiters):
        return None
    one_device_all_running = running > 0 and memory.num_devices == 1 and len(waiters) >= running
    if len(waiters) < memory.num_cores and not one_device_all_running:
        return None
    stuck = []
    for sem, value, core, has_tasks, info in waiters:
        with sem.cv:
            count, queued = int(sem.count_by_core[core]), len(sem.tasks[core])
        if count >= value or queued:
            return None
        stuck.append((id(sem), sem.id, core, value, count, has_tasks, _where(info)))
    return (id(memory), running, progress, tuple(sorted(stuck)))


def _where(info: Any) -> str:
    try:
        return info.get_source_info_str() if info is not None and info.source_info else ""
    except Exception:  # a location is a courtesy in the message, never a reason to miss the deadlock
        return ""


def _watch_loop() -> None:
    previous = None
    while True:
        time.sleep(_POLL_S)
        current = _snapshot()
        if current is not None and current == previous:
            _abort(current)
            current = None
        previous = current


def _abort(state: tuple[Any, ...]) -> None:
    with _WATCH.lock:
        waiters = list(_WATCH.waiters.values())
    if not waiters:
        return
    memory = waiters[0][0].shared_memory
    waits = []
    for _, sem_id, core, value, count, has_tasks, where in state[3]:
        what = "DMA semaphore" if has_tasks else "semaphore"
        at = f" at {where}" if where else ""
        waits.append(f"core {core} waits on {what} {sem_id} for {value} (its count is {count}){at}")
    message = (
        f"{DEADLOCK_MARKER}: every running core of the kernel is blocked in a semaphore wait that "
        f"nothing in flight can signal ({'; '.join(waits)}). A wait needs a matching signal or DMA "
        "started before it on some core: check the slot/semaphore each copy uses and that every "
        "wait has its start."
    )
    memory.set_failed(DeadlockError(message), top_level=False)


@contextlib.contextmanager
def deadlock_watch() -> Iterator[None]:
    """Inside: a TPU interpret mode run whose cores all wait on semaphores nothing can
    signal fails with an error containing DEADLOCK_MARKER (within about a second)."""
    with _WATCH.lock:
        if _WATCH.thread is None:
            _install_watch()
        _WATCH.active += 1
    try:
        yield
    finally:
        with _WATCH.lock:
            _WATCH.active -= 1
