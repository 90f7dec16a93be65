"""The Ray executor against the local one, and a night-2 replay from a shared Redis database.

``ray_overhead_ratio``: the same fuzz slices (same specs, seeds, examples) through the
local executor and through Ray at equal parallelism (a local Ray instance with as many
slots as local workers), after one warm-up unit per slot; wall time of Ray over local.

``night2_refind_s``: a real ``redis-server`` on a loopback port; night 1 fuzzes, for one
slice, a kernel whose planted bug only some configs reach and finds it; night 2 (a fresh
driver and output directory, the same ``--db``, a seed that alone misses the bug)
re-finds it. Per night: the search's seconds and examples to detect, and the wall
seconds from the start of the campaign to the finding (worker start-up included).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["cluster", "local_redis", "night2_refind", "ray_overhead"]

SLICE_SPECS = ("reference_kernels.elementwise:SCALE_SHIFT", "reference_kernels.mutants.grid:rotated_index_map_spec")
RARE_BUG = str(Path(__file__).resolve().parents[1] / "tests" / "execution" / "rare_rotate.py") + "::RARE_ROTATE"


@contextlib.contextmanager
def local_redis(workdir: Path) -> Iterator[str]:
    """A ``redis-server`` on a free loopback port, stopped on exit; yields ``redis://127.0.0.1:PORT``."""
    import redis

    server = shutil.which("redis-server")
    if server is None:
        raise FileNotFoundError("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client, deadline = redis.Redis(host="127.0.0.1", port=port), time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _units(count: int, db: str) -> list[Any]:
    from pallas_verify.execution import Work

    return [Work(entry="pallas_verify.campaigns.units:run_slice", kind="slice", spec_ref=SLICE_SPECS[i % len(SLICE_SPECS)],
                 backends=("interpret",), seed=i, max_examples=2, limit_s=600.0,
                 params={"timeout_s": 60.0, "static": False, "shrink_s": 5.0, "database": db})
            for i in range(count)]


def _timed(executor: Any, units: list[Any]) -> float:
    from pallas_verify.execution import Done

    started, waiting, done = time.perf_counter(), list(units), 0
    while done < len(units):
        while waiting and executor.free() > 0:
            executor.submit(waiting.pop(0))
        finished = [d for d in executor.poll(0.2) if isinstance(d, Done)]
        failed = [d.failure.message for d in finished if d.failure is not None]
        if failed:
            raise RuntimeError(f"a benchmark unit failed: {failed[0]}")
        done += len(finished)
    return time.perf_counter() - started


def ray_overhead(units: int, workers: int = 2) -> dict[str, Any]:
    from pallas_verify.execution.cluster import RayExecutor
    from pallas_verify.execution.local import LocalExecutor

    seconds = {}
    with tempfile.TemporaryDirectory(prefix="pv-bench-cluster-") as tmp:
        for name, make in (("local", lambda: LocalExecutor(workers)), ("ray", lambda: RayExecutor(None, workers))):
            with make() as executor:
                _timed(executor, _units(workers, str(Path(tmp) / f"warm-{name}")))
                seconds[name] = _timed(executor, _units(units, str(Path(tmp) / name)))
    return {"units": units, "workers": workers, "local_s": round(seconds["local"], 2),
            "ray_s": round(seconds["ray"], 2), "ray_overhead_ratio": round(seconds["ray"] / seconds["local"], 3)}


def night2_refind(budget_s: float) -> dict[str, Any]:
    """Night 1 (seed 1: its slice finds the bug at its 4th example) and night 2 (seed 4: its
    slice alone would miss it) against one Redis database; one slice each."""
    with tempfile.TemporaryDirectory(prefix="pv-bench-nights-") as tmp, local_redis(Path(tmp)) as url:
        night1 = _night(Path(tmp) / "night1", url + "/0", 1, budget_s)
        night2 = _night(Path(tmp) / "night2", url + "/0", 4, budget_s)
    return {"night1": night1, "night2": night2, "night1_find_s": night1["search_s"],
            "night2_refind_s": night2["search_s"]}


def _night(out: Path, db: str, seed: int, budget_s: float) -> dict[str, Any]:
    """One night of one slice: wall seconds to the finding's progress line (worker start-up
    included), the search's own seconds to detect, and examples to detect."""
    from pallas_verify.campaigns.fuzz import FuzzOptions, fuzz

    class Stream(io.StringIO):
        first: float | None = None

        def write(self, text: str) -> int:
            if self.first is None and "[mismatch]" in text:
                self.first = time.monotonic()
            return super().write(text)

    stream, started = Stream(), time.monotonic()
    report = fuzz(FuzzOptions(targets=(RARE_BUG,), backends=("interpret",), seed=seed, slice_examples=5, workers=1,
                              budget_s=budget_s, max_slices=1, out_dir=out, db=db), stream=stream)
    found = next((f for f in report.findings if f.kind == "mismatch"), None)
    return {"wall_s": None if stream.first is None else round(stream.first - started, 2),
            "search_s": None if found is None else round(found.elapsed_s, 2),
            "examples_to_detect": None if found is None else found.evidence.get("examples_to_detect")}


def cluster(units: int, budget_s: float) -> dict[str, Any]:
    results: dict[str, Any] = {"overhead": ray_overhead(units)}
    results["ray_overhead_ratio"] = results["overhead"]["ray_overhead_ratio"]
    try:
        results.update(night2_refind(budget_s))
    except FileNotFoundError as exc:
        results["night2_skipped"] = str(exc)
    return results
