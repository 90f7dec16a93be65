"""Entry functions for executor tests: they run in worker processes and Ray tasks."""

from __future__ import annotations

import os
import time
from typing import Any


def echo(work: Any) -> dict[str, Any]:
    return {"echo": work.params.get("value"), "pid": os.getpid(), "parallel_runs": os.environ.get("PV_PARALLEL_RUNS")}


def hang(work: Any) -> dict[str, Any]:
    time.sleep(3600)
    return {}


def abort(work: Any) -> dict[str, Any]:
    os.abort()


def fail(work: Any) -> dict[str, Any]:
    raise ValueError("planted failure")


def chatty(work: Any) -> dict[str, Any]:
    from pallas_verify.execution import emit

    emit({"step": 1})
    emit({"step": 2})
    return {"done": work.params.get("value")}


def spawn_and_hang(work: Any) -> dict[str, Any]:
    """Start a case worker (as a slice does), say its pid, then hang."""
    from pallas_verify.execution import emit
    from pallas_verify.execution.isolation import Worker

    worker = Worker()
    worker.submit({"task": "import", "ref": "reference_kernels.mutants.grid:block_copy_spec"})
    assert worker.pid is not None
    emit({"worker": worker.pid})
    time.sleep(3600)
    return {}
