"""``python -m benchmarks.processes``: what a worker process costs, start and round trip.

Prints, for the case worker (``execution.isolation.Worker``) and the local executor's
unit worker (``execution.local.LocalExecutor``):

- ``case_worker_start_ms``: a fresh worker from spawn to its first answer (a request that
  imports a module without jax), median of ``starts``;
- ``case_round_trip_ms``: one warm case of ``elementwise.SCALE_SHIFT`` on ``interpret``
  (inputs out, outputs back, the kernel's jit cache warm), median of ``trips``;
- ``unit_worker_start_ms``: a fresh executor's first unit (a no-op entry) from submit to
  its ``Done``: the unit worker's start included; median of ``starts``;
- ``unit_round_trip_ms``: a no-op unit on a warm unit worker, median of ``trips``.

Medians of runs on a shared host: compare figures taken side by side in one session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

__all__ = ["measure", "noop"]


def noop(work: Any) -> int:
    """A unit entry that does nothing."""
    return work.uid


def _ms(samples: list[float]) -> float:
    return round(1000 * statistics.median(samples), 2)


def _case_worker(starts: int, trips: int) -> dict[str, float]:
    import numpy as np

    from pallas_verify.case import Case
    from pallas_verify.execution.isolation import Worker

    started = []
    for _ in range(starts):
        worker = Worker()
        t0 = time.perf_counter()
        worker.collect(worker.submit({"task": "import", "ref": "pallas_verify.errors"}))
        started.append(time.perf_counter() - t0)
        worker.close()
    ref = "reference_kernels.elementwise:SCALE_SHIFT"
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    case = Case(spec=None, config={"scale": 2.0, "shift": 1.0}, inputs=(x,), backend="interpret")
    worker, rounds = Worker(), []
    try:
        first = worker.run(ref, case)
        if not first.ok:
            raise RuntimeError(f"the benchmark case failed: {first}")
        for _ in range(trips):
            t0 = time.perf_counter()
            worker.run(ref, case)
            rounds.append(time.perf_counter() - t0)
    finally:
        worker.close()
    return {"case_worker_start_ms": _ms(started), "case_round_trip_ms": _ms(rounds)}


def _unit_worker(starts: int, trips: int) -> dict[str, float]:
    from pallas_verify.execution import Done, Work
    from pallas_verify.execution.local import LocalExecutor

    def one(executor: LocalExecutor) -> float:
        t0 = time.perf_counter()
        executor.submit(Work(entry="benchmarks.processes:noop", kind="bench"))
        while not [d for d in executor.poll(5.0) if isinstance(d, Done)]:
            pass
        return time.perf_counter() - t0

    started, rounds = [], []
    for _ in range(starts):
        with LocalExecutor(1) as executor:
            started.append(one(executor))
    with LocalExecutor(1) as executor:
        one(executor)
        rounds = [one(executor) for _ in range(trips)]
    return {"unit_worker_start_ms": _ms(started), "unit_round_trip_ms": _ms(rounds)}


def measure(starts: int = 5, trips: int = 50) -> dict[str, float]:
    return {**_case_worker(starts, trips), **_unit_worker(starts, trips)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.processes", description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--trips", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(measure(args.starts, args.trips)))


if __name__ == "__main__":
    main()
