"""Every front end run as a user first runs it: the command with its defaults (default
kernels, default backends, default profile), only the example count or time budget cut
to what a test can pay. Each must exit 0 on the bundled correct kernels, with no cell
failed, every cell said (PASS, n/a with the reason, or skip with the reason), and its
report written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_verify.backends import registry

pytestmark = pytest.mark.slow

_NOT_FAILED = {"pass", "skipped", "unsupported"}


def _cli(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pallas_verify.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def _cells(report: dict) -> dict[tuple[str, str], dict]:
    return {(k["name"], column): cell for k in report["kernels"] for column, cell in k["results"].items()}


def _all_said(report: dict) -> None:
    """No cell failed or errored, and each cell that did not pass says why."""
    cells = _cells(report)
    assert cells
    bad = {key: (c["status"], c.get("reason", "")[:200]) for key, c in cells.items() if c["status"] not in _NOT_FAILED}
    assert not bad, bad
    unsaid = [key for key, c in cells.items() if c["status"] != "pass" and not c.get("reason")]
    assert not unsaid, unsaid
    assert report["findings"] == []


def test_backends_lists_every_backend_and_why_each_is_unavailable(tmp_path: Path) -> None:
    run = _cli(["backends"], tmp_path)
    assert run.returncode == 0, run.stderr
    for backend in registry.all_backends().values():
        line = next((x for x in run.stdout.splitlines() if x.split()[:1] == [backend.name]), None)
        assert line is not None, (backend.name, run.stdout)
        if backend.available() is not None:  # e.g. a GPU backend on this CPU-only machine
            assert len(line.split()) > 2, line  # says why


def test_demo_with_its_defaults_runs_every_bundled_kernel_on_every_backend(tmp_path: Path) -> None:
    run = _cli(["demo", "--max-examples", "1", "--out", "out"], tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["backends"] == [b.name for b in registry.resolve(None)]  # the default: all of them
    _all_said(report)
    passed = {column.split("+")[0] for (_, column), c in _cells(report).items() if c["status"] == "pass"}
    assert {"interpret", "tpu_interpret", "gpu_interpret", "mosaic_tpu:v5e", "triton:h100", "mosaic_gpu:h100"} <= passed
    for name in ("report.md", "report.html", "report.junit.xml"):
        assert (tmp_path / "out" / name).stat().st_size > 0


def test_conformance_with_its_default_backends_on_kernels_of_every_family(tmp_path: Path) -> None:
    """Every backend of the default run, on a kernel of each kind that one of them cannot
    take: a multi-device kernel (skipped by the compile-only targets, which compile for one
    chip), jax's all-gather (its known race declared, n/a), a Hopper-only Mosaic GPU kernel
    (n/a on A100 and B200 with the compiler's measured error) and a threaded plgpu.kernel.
    (The default kernels on the executing backends: tests/campaigns/test_conformance.py.)"""
    kernels = "ring_permute,upstream_tpu_all_gather,upstream_gpu_ragged_dot_mgpu,jaxtests_mgpu_threads"
    run = _cli(["conformance", "--kernels", kernels, "--max-examples", "1", "--out", "out"], tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["backends"] == [b.name for b in registry.resolve(None)]
    _all_said(report)
    cells = _cells(report)
    assert cells[("ring_permute", "tpu_interpret")]["status"] == "pass"
    assert "a mesh of 4 devices" in cells[("ring_permute", "mosaic_tpu:v5e")]["reason"]
    assert cells[("upstream_gpu_ragged_dot_mgpu", "mosaic_gpu:h100")]["status"] == "pass"
    assert cells[("jaxtests_mgpu_threads", "mosaic_gpu:a100")]["status"] == "pass"


def test_smith_with_its_default_backends_keeps_its_budget(tmp_path: Path) -> None:
    run = _cli(["smith", "--budget", "5s", "--seed", "0", "--out", "out"], tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["findings"] == [], [f["message"][:300] for f in report["findings"]]
    assert set(report["backends"]) >= {"interpret", "tpu_interpret"}
