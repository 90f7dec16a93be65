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
