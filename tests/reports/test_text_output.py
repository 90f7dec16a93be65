"""Terminal summaries write to the sys.stdout of the moment they are called."""

from __future__ import annotations

import pytest

from pallas_verify.reports.report import BackendResult, Report
from pallas_verify.reports.text import print_matrix, print_summary


@pytest.mark.parametrize("show", [print_summary, print_matrix])
def test_summaries_follow_a_replaced_stdout(capsys, show):
    report = Report(kernels=[{"name": "k", "features": [], "platforms": ["tpu"]}], backends=["interpret"],
                    results=[BackendResult(kernel="k", backend="interpret", status="pass", examples=3)])
    show(report)
    out = capsys.readouterr().out
    assert "k" in out
    assert "0 findings" in out
