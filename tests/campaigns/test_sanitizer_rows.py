"""Sanitizer conformance (campaigns.sanitizer): planted-bug rows pass where their backend
reports the expected finding, and fail, with a reproducer, where it is missing or where a
finding shows that should not."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_verify.campaigns.sanitizer import Planted, judge, planted_rows
from pallas_verify.exits import EXIT_CLEAN, EXIT_FINDINGS, campaign_status
from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report, kernel_entry
from reference_kernels.mutants import Mutant, memory, mutants

# The specs stay inside their module: a module-level KernelSpec here would be collected as a test.
ROW = Planted(spec=memory.output_read_before_write_spec, expects=("uninitialized_read", "mismatch"),
              verdicts={"interpret": ("mismatch",), "tpu_interpret": ("uninitialized_read", "mismatch")})
NAME = ROW.name


def _report(found: dict[str, list[str]], backends=("interpret", "tpu_interpret", "gpu_interpret")) -> Report:
    findings = [Finding(kind=k, kernel=NAME, backend=b, message="m", reproducer=f"/r/{b}-{k}.py")
                for b, kinds in found.items() for k in kinds]
    cells = [BackendResult(kernel=NAME, backend=b, status="fail" if found.get(b) else "pass",
                           reason=",".join(found.get(b, []))) for b in backends if b != "gpu_interpret"]
    cells.append(BackendResult(kernel=NAME, backend="gpu_interpret", status="skipped", reason="kernel targets tpu"))
    other = Finding(kind="mismatch", kernel="elsewhere", backend="interpret", message="a real bug")
    return Report(backends=list(backends), kernels=[kernel_entry(ROW.spec)], findings=[*findings, other],
                  results=cells)


def _cells(report: Report) -> dict[str, tuple[str, str]]:
    return {r.backend: (r.status, r.reason) for r in report.results if r.kernel == NAME}


def test_expected_findings_make_the_row_pass_and_leave_the_findings(tmp_path):
    report = _report({"interpret": ["mismatch"], "tpu_interpret": ["uninitialized_read", "mismatch"]})
    judge(report, [ROW], out_dir=tmp_path, seed=0, max_examples=2, profile="ci")
    cells = _cells(report)
    assert cells["interpret"] == ("pass", "planted bug found: mismatch")
    assert cells["tpu_interpret"][0] == "pass"
    assert cells["gpu_interpret"][0] == "skipped"  # not run: not judged
    assert [f.kernel for f in report.findings] == ["elsewhere"]  # another kernel's finding stays
    planted = report.kernels[0]["planted"]
    assert {f["backend"] for f in planted["expected_findings"]} == {"interpret", "tpu_interpret"}
    assert planted["judged"]["interpret"]["status"] == "pass"
    report.findings = []
    assert campaign_status(report) == EXIT_CLEAN


def test_a_missing_expected_finding_fails_the_row_with_a_reproducer(tmp_path):
    report = _report({"tpu_interpret": ["uninitialized_read"]})  # interpret went blind
    judge(report, [ROW], out_dir=tmp_path, seed=7, max_examples=2, profile="ci")
    status, reason = _cells(report)["interpret"]
    assert (status, reason) == ("fail", "expected mismatch on interpret, none reported")
    script = report.kernels[0]["planted"]["judged"]["interpret"]["reproducer"]
    text = Path(script).read_text()
    assert "reference_kernels.mutants.memory:output_read_before_write_spec" in text
    assert "'interpret', ('mismatch',), seed=7, max_examples=2" in text
    report.findings = []  # even with no finding left, the run is not clean
    assert campaign_status(report) == EXIT_FINDINGS


def test_a_finding_where_none_is_expected_fails_the_row_and_stays_a_finding(tmp_path):
    row = dataclasses.replace(ROW, verdicts={"tpu_interpret": ("uninitialized_read",)})
    report = _report({"interpret": ["mismatch"], "tpu_interpret": ["uninitialized_read"]})
    judge(report, [row], out_dir=tmp_path, seed=0, max_examples=2, profile="ci")
    assert _cells(report)["interpret"] == ("fail", "unexpected mismatch on interpret (expects nothing)")
    assert _cells(report)["tpu_interpret"][0] == "pass"
    stray = [f for f in report.findings if f.kernel == NAME]
    assert [(f.backend, f.kind) for f in stray] == [("interpret", "mismatch")]
    assert report.kernels[0]["planted"]["judged"]["interpret"]["reproducer"] == "/r/interpret-mismatch.py"


def test_other_kinds_beside_an_expected_one_are_recorded_not_failed(tmp_path):
    report = _report({"interpret": ["mismatch"], "tpu_interpret": ["mismatch", "race"]})
    judge(report, [ROW], out_dir=tmp_path, seed=0, max_examples=2, profile="ci")
    assert _cells(report)["tpu_interpret"] == ("pass", "planted bug found: mismatch, race")
    assert report.kernels[0]["planted"]["judged"]["tpu_interpret"]["found"] == ["mismatch", "race"]


def test_a_missing_static_finding_fails_every_cell_of_the_row(tmp_path):
    row = dataclasses.replace(ROW, verdicts={"static": ("input_mutation",)}, expects=("input_mutation",))
    report = _report({})
    judge(report, [row], out_dir=tmp_path, seed=0, max_examples=2, profile="ci")
    cells = _cells(report)
    assert cells["interpret"] == cells["tpu_interpret"] == ("fail", "expected input_mutation on static, none reported")
    found = _report({"static": ["input_mutation"]})
    judge(found, [row], out_dir=tmp_path, seed=0, max_examples=2, profile="ci")
    assert _cells(found)["interpret"] == ("pass", "clean, as expected")
    assert [f.kernel for f in found.findings] == ["elsewhere"]


@pytest.mark.parametrize("kinds", [(), ("racy",)])
def test_verdicts_must_name_finding_kinds(kinds):
    with pytest.raises(ValueError, match=r"verdicts\['interpret'\]=.* must name finding kinds"):
        Mutant(spec=memory.output_read_before_write_spec, twin=memory.scale_blocks_spec, expects=("mismatch",), bug="b",
               verdicts={"interpret": kinds})


def test_the_catalog_rows_carry_verdicts_and_a_pattern_selects_them():
    rows = planted_rows()
    assert NAME in {r.name for r in rows}
    assert all(r.verdicts for r in rows)
    assert {r.name for r in rows} <= {m.name for m in mutants()}
    assert planted_rows("") == [] and [r.name for r in planted_rows(NAME)] == [NAME]


@pytest.mark.slow
def test_the_recheck_reproducer_passes_while_the_backend_reports_the_bug(tmp_path):
    """The reproducer of a missing finding runs the search again: on this (correct) JAX the
    HLO interpreter reports the mismatch, so it says fixed (0)."""
    report = _report({"tpu_interpret": ["uninitialized_read"]})
    judge(report, [ROW], out_dir=tmp_path, seed=0, max_examples=1, profile="ci")
    script = report.kernels[0]["planted"]["judged"]["interpret"]["reproducer"]
    run = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "found mismatch" in run.stdout
