"""verify() with transforms: a cell per (backend, transform), findings only through grad
for backward-kernel bugs, reproducers that rerun the transformed call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_verify.engine import verify
from reference_kernels import transforms_attention, transforms_matmul, transforms_norms
from reference_kernels.mutants import backward
from tests.engine import _kernels as k


def _cells(report):
    return {(r.backend, r.transform): r for r in report.results}


def test_a_cell_per_backend_and_transform(tmp_path):
    report = verify(k.TRIPLE, backends=["interpret", "gpu_interpret"], max_examples=1,
                    isolate="never", out_dir=tmp_path)
    cells = _cells(report)
    assert set(cells) == {(b, t) for b in ("interpret", "gpu_interpret")
                          for t in (None, "vmap", "grad")}
    assert cells["gpu_interpret", "vmap"].status == "unsupported"
    assert "kernel_arg_transforms" in cells["gpu_interpret", "vmap"].reason
    others = {key: c.status for key, c in cells.items() if key != ("gpu_interpret", "vmap")}
    assert set(others.values()) == {"pass"}, others
    assert "interpret+grad" in report.to_dict()["kernels"][0]["results"]


def test_skipped_backend_has_transform_cells_too(tmp_path):
    report = verify(k.SCALE_BY_COUNT, backends=["gpu_interpret"], max_examples=1, isolate="never", out_dir=tmp_path)
    assert {(r.transform, r.status) for r in report.results} == {(None, "skipped"), ("vmap", "skipped")}


@pytest.mark.slow
def test_backward_bug_is_found_through_grad_and_reproduces(tmp_path):
    report = verify(k.WRONG_TRIPLE, backends=["interpret"], max_examples=3, isolate="never", out_dir=tmp_path)
    cells = _cells(report)
    assert cells["interpret", None].status == "pass"
    assert cells["interpret", "grad"].status == "fail"
    [finding] = report.findings
    assert (finding.kind, finding.transform) == ("mismatch", "grad")
    assert finding.reproducer.endswith("wrong_triple-mismatch-interpret-grad.py")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, finding.reproducer], capture_output=True, text=True, timeout=300,
                         cwd=root, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "grad(arg0)" in run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mutant", backward.MUTANTS, ids=lambda m: m.name)
def test_backward_mutants_are_caught_only_through_grad(mutant, tmp_path):
    report = verify(mutant.spec, backends=["interpret"], max_examples=3, isolate="never", out_dir=tmp_path,
                    shrink_budget_s=0)  # where it is found, not how small: no shrinking
    cells = _cells(report)
    assert cells["interpret", None].status == "pass"
    assert cells["interpret", "grad"].status == "fail"
    assert {f.kind for f in report.findings} & set(mutant.expects)
    assert {f.transform for f in report.findings} == {"grad"}


@pytest.mark.slow
@pytest.mark.parametrize("spec", [transforms_matmul.MATMUL_VJP, transforms_norms.LAYER_NORM_VJP,
                                  transforms_attention.FLASH_ATTENTION_VJP,
                                  transforms_attention.FLASH_ATTENTION_CAUSAL_VJP, backward.MATMUL_VJP_SQUARE],
                         ids=lambda s: s.name)
def test_correct_kernels_are_clean_under_their_transforms(spec, tmp_path):
    report = verify(spec, backends=["interpret", "tpu_interpret"], max_examples=2, isolate="never", out_dir=tmp_path)
    assert report.findings == []
    cells = _cells(report)
    for transform in spec.transforms:
        assert cells["interpret", transform].status == "pass"
    assert cells["tpu_interpret", "grad" if "grad" in spec.transforms else None].status == "pass"
    if "vmap" in spec.transforms:  # these kernels set dimension_semantics: an upstream limitation
        assert cells["tpu_interpret", "vmap"].status == "unsupported"
