"""A PASS says how it was judged: a kernel that no sanitizing interpreter judged (or whose
sanitizer was asked for and was n/a) says that no race, out-of-bounds or uninitialized-read
check ran, in the JSON, the terminal summary and the plugin's summary."""

from __future__ import annotations

import io
import json

from pallas_verify.reports.report import BackendResult, Report, unsanitized
from pallas_verify.reports.text import print_summary

TPU = {"name": "k", "platforms": ["tpu"], "features": []}


def _cells(*cells):
    return [BackendResult(kernel="k", backend=b, status=s, reason=r) for b, s, r in cells]


def test_a_pass_with_the_sanitizer_na_says_no_race_or_bounds_check_ran():
    cells = _cells(("interpret", "pass", ""), ("tpu_interpret", "unsupported", "a reshaped ref"))
    [line] = unsanitized(TPU, cells, ["interpret", "tpu_interpret"])
    assert line.startswith("tpu: tpu_interpret did not judge it (unsupported: a reshaped ref)")
    assert "no race, out-of-bounds or uninitialized-read check ran" in line


def test_a_sanitizer_that_judged_or_a_run_with_no_pass_says_nothing():
    judged = _cells(("interpret", "pass", ""), ("tpu_interpret", "fail", "race"))
    assert unsanitized(TPU, judged, ["interpret", "tpu_interpret"]) == []
    failed = _cells(("interpret", "fail", "mismatch"))
    assert unsanitized(TPU, failed, ["interpret"]) == []
    portable = {**TPU, "platforms": ["tpu", "gpu"]}  # gpu_interpret not asked for, tpu_interpret judged
    assert unsanitized(portable, _cells(("interpret", "pass", ""), ("tpu_interpret", "pass", "")),
                       ["interpret", "tpu_interpret"]) == []


def test_the_json_and_the_summary_say_it():
    report = Report(kernels=[dict(TPU)], backends=["interpret"], results=_cells(("interpret", "pass", "")))
    data = json.loads(json.dumps(report.to_dict()))
    [line] = data["kernels"][0]["unsanitized"]
    assert line.startswith("tpu: tpu_interpret did not judge it (not among the backends run)")
    assert Report.from_dict(data).to_dict()["kernels"][0]["unsanitized"] == [line]  # derived, not doubled
    out = io.StringIO()
    print_summary(report, out)
    assert f"  judged without a sanitizer on {line}" in out.getvalue()
    assert "\n1 kernel judged without a sanitizer on some platform: their PASS checked outputs only" in out.getvalue()
    assert out.getvalue().rstrip().endswith("0 findings in 0.0 s")  # the count stays the last line
