"""Scaling: catalog throughput through the pytest plugin with pytest-xdist at 1 and 2 workers.

A generated test module imports a few catalog KernelSpecs (the plugin makes each one a
test per backend); ``pytest -n N`` runs it with the deterministic ``ci`` profile and
writes the session's report, whose cells count the examples run. Throughput is examples
over the wall time of the whole pytest command, start-up included (that is what a user
waits for). The same module, backends and examples run at every worker count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["SPECS", "scaling"]

#: Catalog specs of the generated test module: (module, name).
SPECS: tuple[tuple[str, str], ...] = (
    ("reference_kernels.elementwise", "RAGGED_ADD"),
    ("reference_kernels.elementwise", "SCALE_SHIFT"),
    ("reference_kernels.reductions", "ROW_SUM"),
    ("reference_kernels.reductions", "COL_SUM"),
    ("reference_kernels.transpose", "TRANSPOSE"),
    ("reference_kernels.matmul", "MATMUL_F32"),
)
BACKENDS = "interpret,tpu_interpret"


def _test_module(specs: tuple[tuple[str, str], ...]) -> str:
    lines = ['"""Catalog specs for the scaling benchmark: the plugin makes each a test per backend."""']
    lines += [f"from {module} import {name}  # noqa: F401" for module, name in specs]
    return "\n".join(lines) + "\n"


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _run(workers: int, folder: Path, max_examples: int, timeout_s: float) -> dict[str, Any]:
    report_dir = folder / f"report-n{workers}"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-n", str(workers), "--pv-backends", BACKENDS, "--pv-profile", "ci",
               "--pv-max-examples", str(max_examples), "--pv-report", str(report_dir), "test_scaling_catalog.py"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_repo_root()), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"pytest -n {workers} over the catalog exited {done.returncode}:\n{tail}")
    from pallas_verify.reports.report import Report

    report = Report.from_dict(json.loads((report_dir / "report.json").read_text()))
    examples = sum(r.examples for r in report.results)
    return {"workers": workers, "examples": examples, "wall_s": wall, "examples_per_s": examples / wall}


def scaling(*, max_examples: int = 5, workers: tuple[int, ...] = (1, 2), timeout_s: float = 900.0,
            specs: tuple[tuple[str, str], ...] = SPECS) -> dict[str, Any]:
    """Examples/s at each worker count, and the speed-up of the last over the first."""
    with tempfile.TemporaryDirectory(prefix="pv-bench-scaling-") as tmp:
        folder = Path(tmp)
        (folder / "test_scaling_catalog.py").write_text(_test_module(specs))
        runs = [_run(n, folder, max_examples, timeout_s) for n in workers]
    first, last = runs[0], runs[-1]
    return {
        "specs": [name for _, name in specs],
        "backends": BACKENDS.split(","),
        "max_examples": max_examples,
        "runs": runs,
        "examples_per_s": {f"n{r['workers']}": r["examples_per_s"] for r in runs},
        "speedup": last["examples_per_s"] / max(first["examples_per_s"], 1e-12),
        "efficiency": last["examples_per_s"] / max(first["examples_per_s"], 1e-12) / (last["workers"] / first["workers"]),
    }
