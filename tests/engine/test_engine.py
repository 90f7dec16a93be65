"""verify(): passing and failing specs, shrinking, reproducers, isolation, bad specs."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pallas_verify as pv
from pallas_verify.engine import verify
from pallas_verify.execution import sandbox
from pallas_verify.execution.caselimit import CaseLimit
from pallas_verify.loader import load_spec

SPECS = Path(__file__).with_name("_specs.py")


def spec(name):
    return load_spec(f"{SPECS}::{name}")


def cells(report):
    return {r.backend: r for r in report.results}


def test_correct_kernel_passes_on_the_interpreters(tmp_path):
    report = verify(spec("good"), ["interpret", "tpu_interpret"], max_examples=3, profile="ci", out_dir=tmp_path)
    assert report.findings == []
    assert {b: c.status for b, c in cells(report).items()} == {"interpret": "pass", "tpu_interpret": "pass"}
    assert cells(report)["interpret"].examples == 3


@pytest.fixture(scope="module")
def off_by_one(tmp_path_factory):
    """The report of one search of the off-by-one spec (two tests read it)."""
    return verify(spec("off_by_one"), ["interpret"], max_examples=30, profile="ci",
                  out_dir=tmp_path_factory.mktemp("off_by_one"))


@pytest.mark.xdist_group("engine_off_by_one")
def test_off_by_one_block_is_a_shrunk_mismatch_with_a_working_reproducer(off_by_one):
    report = off_by_one
    [finding] = report.findings
    assert finding.kind == "mismatch" and finding.backend == "interpret"
    # Shrunk: two blocks is the least that shows a one-block shift.
    assert finding.config["block"] == 128 and 129 <= finding.config["n"] <= 256
    assert "outputs differ from the reference" in finding.message and "first bad at" in finding.message
    assert "written at grid points" in finding.message  # blame: bad blocks -> grid points
    assert finding.evidence["blame"]["block_errors"]
    assert cells(report)["interpret"].status == "fail"
    script = Path(finding.reproducer)
    assert script.with_suffix(".npz").exists()
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert "[mismatch]" in run.stdout


@pytest.mark.xdist_group("engine_off_by_one")
def test_reproducer_exits_zero_once_fixed(off_by_one, tmp_path):
    found = Path(off_by_one.findings[0].reproducer)
    script = tmp_path / found.name  # a copy (with its inputs beside it): the other test runs the original
    shutil.copy(found.with_suffix(".npz"), script.with_suffix(".npz"))
    script.write_text(found.read_text().replace("::off_by_one", "::good"))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no longer reproduces" in run.stdout


def test_spec_built_in_a_function_runs_in_process(tmp_path):
    loaded = spec("good")
    local = pv.KernelSpec(name="local", kernel=loaded.kernel, reference=loaded.reference,
                          configs=loaded.configs, inputs=loaded.inputs)
    report = verify(local, ["interpret"], max_examples=2, profile="ci", out_dir=tmp_path)
    assert [c.status for c in report.results] == ["pass"]
    with pytest.raises(pv.InvalidArgument, match="isolate='always' needs KernelSpec 'local' at module level"):
        verify(local, ["interpret"], max_examples=2, isolate="always")


def test_reference_failure_is_one_exception_finding_naming_the_reference_whose_reproducer_exits_3(tmp_path):
    from pallas_verify.campaigns.replay import reproduce
    from pallas_verify.exits import EXIT_CANNOT_RUN

    report = verify(spec("bad_reference"), ["interpret", "tpu_interpret"], max_examples=2, profile="ci",
                    out_dir=tmp_path, shrink_budget_s=1.0)
    [finding] = report.findings  # once, though both backends' searches met it
    assert (finding.kind, finding.backend) == ("exception", "reference")
    assert "the reference raised ValueError: reference cannot take this" in finding.message
    assert reproduce(f"{SPECS}::bad_reference", backend="reference", kind="exception", config=finding.config,
                     mode={}, inputs=Path(finding.reproducer).with_suffix(".npz")) == EXIT_CANNOT_RUN


def test_a_shape_mismatch_is_reported_at_once_without_shrinking(tmp_path):
    report = verify(spec("wrong_shape_reference"), ["interpret"], max_examples=20, profile="ci", out_dir=tmp_path)
    [finding] = report.findings
    assert finding.kind == "mismatch" and "!= expected" in finding.message
    assert "not shrunk" in finding.evidence["shrink_stopped"]
    [cell] = report.results
    assert (cell.examples, cell.shrink_steps) == (1, 0)


def test_inputs_of_the_wrong_type_make_an_invalid_spec(tmp_path):
    with pytest.raises(pv.InvalidSpec, match=r"'bad_inputs'.*inputs must draw a tuple; it drew \["):
        verify(spec("bad_inputs"), ["interpret"], max_examples=2, profile="ci", out_dir=tmp_path)


def test_platform_mismatch_and_declared_unsupported_are_not_run(tmp_path):
    loaded = spec("good")
    gpu_only = pv.KernelSpec(name="gpu_only", kernel=loaded.kernel, reference=loaded.reference,
                             configs=loaded.configs, inputs=loaded.inputs, platforms=("gpu",),
                             unsupported={"interpret": "declared for the test"})
    report = verify(gpu_only, ["interpret", "tpu_interpret"], max_examples=2, out_dir=tmp_path)
    got = cells(report)
    assert got["tpu_interpret"].status == "skipped" and "kernel targets ['gpu']" in got["tpu_interpret"].reason
    assert got["interpret"].status == "unsupported" and got["interpret"].reason == "declared for the test"


@pytest.mark.gpu_interpret
def test_gpu_interpret_limitation_is_an_unsupported_cell_with_the_reason(tmp_path):
    report = verify(spec("good"), ["gpu_interpret"], max_examples=2, profile="ci", out_dir=tmp_path)
    cell = cells(report)["gpu_interpret"]
    assert cell.status == "unsupported" and "whole-array blocks" in cell.reason
    assert report.findings == []


@pytest.fixture
def short_first_case(monkeypatch):
    """A case found idle is hung after 2 s (not the 15 s allowance for a first case): a
    worker that starts, imports and compiles is busy, so only a hang is stopped early."""
    monkeypatch.setattr(sandbox, "CaseLimit", functools.partial(CaseLimit, first_case_s=2.0))


@pytest.mark.slow
def test_hanging_kernel_is_a_timeout_and_the_run_goes_on(tmp_path, short_first_case):
    # timeout_s: the ceiling the static check's trace (which does not hang) finishes within.
    report = verify(spec("hangs"), ["interpret", "tpu_interpret"], max_examples=2, profile="ci",
                    out_dir=tmp_path, timeout_s=20, shrink_budget_s=0)
    assert {f.kind for f in report.findings} == {"timeout"}
    assert [c.status for c in report.results] == ["fail", "fail"]


@pytest.mark.slow
def test_aborting_kernel_is_a_crash_and_the_run_goes_on(tmp_path):
    report = verify(spec("aborts"), ["interpret", "tpu_interpret"], max_examples=2, profile="ci",
                    out_dir=tmp_path, shrink_budget_s=0)
    assert {(f.kind, f.backend) for f in report.findings} == {("crash", "interpret"), ("crash", "tpu_interpret")}
    assert "SIGABRT" in report.findings[0].message


def test_unknown_backend_and_bad_max_examples_are_invalid_arguments():
    with pytest.raises(pv.InvalidArgument, match=r"backend='interprit'.*Did you mean 'interpret'"):
        verify(spec("good"), ["interprit"])
    with pytest.raises(pv.InvalidArgument, match="max_examples=0 must be a positive integer"):
        verify(spec("good"), ["interpret"], max_examples=0)
    with pytest.raises(pv.InvalidSpec, match=r"must be a pallas_verify\.KernelSpec"):
        verify("matmul")
