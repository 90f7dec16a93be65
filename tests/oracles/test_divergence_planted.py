"""A divergence on a real kernel, with a bug planted in the HLO interpreter: the finding
blames the HLO interpreter, and its reproducer re-runs both backends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pallas_verify.backends import registry
from pallas_verify.loader import spec_ref
from pallas_verify.reports.reproducer import write_reproducer
from pallas_verify.runner import Runner
from reference_kernels import control
from tests.campaigns.smith._mutants import planted
from tests.oracles._planted_neg import NAME

# control.BRANCH_LOOP, not the spec itself: a module-level KernelSpec is collected as a test.
ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"rows": 41, "cols": 128, "block_rows": 16, "steps": 2}  # a ragged last row block
INPUTS = (np.random.default_rng(0).standard_normal((41, 128)).astype(np.float32),)
TPU_MODE = {"detect_races": False, "uninitialized_memory": "nan", "dma_execution_mode": "on_wait"}


def _divergence(tmp_path: Path):
    with planted(NAME), Runner(control.BRANCH_LOOP, isolate="never") as runner:
        first = runner.check(CONFIG, INPUTS, registry.get("interpret"), {})
        found = runner.check(CONFIG, INPUTS, registry.get("tpu_interpret"), TPU_MODE)
    assert first == []  # one bit off passes the reference's tolerance
    [finding] = found
    return write_reproducer(finding, {"inputs": INPUTS}, spec_ref(control.BRANCH_LOOP), tmp_path)


def _run(script: str, *, planted_bug: bool, tmp_path: Path) -> subprocess.CompletedProcess:
    paths = [str(ROOT)]
    if planted_bug:  # every process of the run (the interpreters' worker too) plants the bug
        site = tmp_path / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text("from pallas_verify._env import configure\n\nconfigure()\n"
                                               "from tests.oracles._planted_neg import plant\n\nplant()\n")
        paths.insert(0, str(site))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_a_divergence_blames_the_backend_that_disagrees_with_the_reference_and_reproduces(tmp_path):
    finding = _divergence(tmp_path)
    assert (finding.kind, finding.backend) == ("backend_divergence", "interpret")
    assert finding.evidence["blamed"] == ["interpret"] and finding.evidence["found_on"] == "tpu_interpret"
    assert finding.evidence["errors"]["tpu_interpret"] == 0.0 < finding.evidence["errors"]["interpret"]
    assert f"out: {16 * 128}/{41 * 128} elements differ, first at (16, 0)" in finding.message  # the odd row block
    assert "interpret disagrees with the reference there" in finding.message
    script = finding.reproducer
    assert Path(script).name == "branch_loop-backend_divergence-interpret.py"
    assert "OTHERS = {'tpu_interpret': " in Path(script).read_text()
    still = _run(script, planted_bug=True, tmp_path=tmp_path)
    assert still.returncode == 1, still.stdout + still.stderr
    assert "[backend_divergence] branch_loop on interpret" in still.stdout
    fixed = _run(script, planted_bug=False, tmp_path=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
