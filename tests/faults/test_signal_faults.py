"""A cancelled CI job (SIGTERM) or Ctrl-C (SIGINT): the report keeps what finished, the
exit status says the run was cut short (130) unless something was found (1)."""

from __future__ import annotations

import pytest

from benchmarks import faultcases

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["fuzz_sigterm", "fuzz_sigint"])
def test_a_signal_to_fuzz_keeps_the_findings_printed_before_it(staged, name):
    outcome = staged(faultcases.CASES[name])
    assert outcome.exit == 1 and outcome.report["interrupted"] is True
    assert outcome.printed  # the fault came after a finding, which the report kept
    statuses = {r["status"] for k in outcome.report["kernels"] for r in k["results"].values()}
    assert "skipped" not in statuses  # cells not run are interrupted or not reached, never skipped


def test_sigterm_to_conformance_writes_its_matrix_and_exits_130(staged):
    outcome = staged(faultcases.CASES["conformance_sigterm"])
    assert outcome.exit == 130
    cells = [r for k in outcome.report["kernels"] for r in k["results"].values()]
    assert any(r["status"] == "pass" for r in cells)
    unfinished = {r["reason"] for r in cells if r["status"] == "interrupted"}
    assert unfinished and unfinished <= {"stopped by SIGTERM while it ran", "stopped by SIGTERM before it ran"}


def test_a_driver_killed_outright_leaves_its_last_report_no_worker_and_no_lock(staged):
    outcome = staged(faultcases.driver_killed)
    assert outcome.exit == -9
    assert outcome.report["run"]["units"] >= 1 and outcome.report["run"]["finished"] is False
