"""Spec files imported in a separate process first.

A spec file is the user's code: importing it may call ``sys.exit``, abort the
interpreter, or hang (waiting on input, a lock, a network). Imported straight into the
driver, any of these would end or stall the whole run, the other files' results with it.
``check_import`` imports the file (or module) in a worker process first and says, in one
line naming the file, what happened there: it exited, was killed by a signal, or did not
finish importing (idle, or past the limit). Only a file that imports there is imported
by the driver. A file that raises at import is left to the driver's own import, which
reports it as usual (``loader``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pallas_verify.case import Outcome
from pallas_verify.execution.isolation import Worker

__all__ = ["IMPORT_IDLE_S", "check_import", "start_import"]

#: An import that has used no CPU for a second after this many seconds is hung.
IMPORT_IDLE_S = 5.0


def check_import(ref: str, *, limit_s: float, worker: Worker | None = None) -> str | None:
    """None when ``ref`` (``FILE.py``, ``FILE.py::NAME``, ``MODULE[:NAME]``) imports in a
    worker process; else one line naming the file and what its import did there.

    ``limit_s``: the most seconds the import may take; one idle for a second past
    ``IMPORT_IDLE_S`` is stopped sooner. ``worker``: the process to import in (a fresh
    one, closed after, by default; a shared one then keeps the module loaded).
    """
    return start_import(ref, limit_s=limit_s, worker=worker)()


def start_import(ref: str, *, limit_s: float, worker: Worker | None = None) -> Callable[[], str | None]:
    """``check_import`` started: the import is sent to the worker at once, and the returned
    call waits for its verdict (the caller works meanwhile)."""
    where = ref.split("::")[0]
    if where.endswith(".py") and not Path(where).is_file():
        return lambda: None  # nothing to run: the driver's own import says it does not exist
    own = worker is None
    worker = worker or Worker(timeout_s=limit_s)
    pending = worker.submit({"task": "import", "ref": ref})

    def verdict() -> str | None:
        try:
            answer = worker.collect(pending, timeout_s=limit_s, idle_after_s=min(limit_s, IMPORT_IDLE_S))
        finally:
            if own:
                worker.close()
        return _verdict(where, answer)

    return verdict


def _verdict(where: str, answer: object) -> str | None:
    if not isinstance(answer, Outcome):
        return None
    if answer.timed_out:
        return (f"spec file {where!r} did not finish importing ({answer.diagnostics}); it hangs at import "
                "(waiting on input, a lock or the network?): fix the file and run again.")
    return f"spec file {where!r} {_death(answer.crashed or '')} while being imported; fix the file and run again."


def _death(crashed: str) -> str:
    """``"called exit(3)"`` / ``"was killed by signal SIGABRT"`` from a worker's death note."""
    first = crashed.splitlines()[0] if crashed else "stopped"
    code = re.search(r"exited with code (-?\d+)", first)
    if code:
        return f"exited with status {code.group(1)} (sys.exit or os._exit at import)"
    signal = re.search(r"killed by signal (\w+)", first)
    if signal:
        name = signal.group(1)
        return f"was killed by signal {name}" + (" (os.abort or a failed assertion in C code)" if name == "SIGABRT" else "")
    return first.removeprefix("worker process ")
