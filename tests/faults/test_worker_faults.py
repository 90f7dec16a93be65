"""A unit's worker killed, a kernel that hangs: nothing charged to a kernel that it did
not do, nothing found lost, no process left behind."""

from __future__ import annotations

import pytest

from benchmarks import faultcases

pytestmark = pytest.mark.slow


def test_a_unit_whose_worker_is_killed_is_retried_and_never_a_finding(staged):
    outcome = staged(faultcases.worker_killed)
    assert not [f for f in outcome.report["findings"] if f["kind"] in ("crash", "exception")]
    [retry] = [r for r in outcome.report["run"]["retried"] if r["cause"] == "worker killed"]
    assert "killed by signal SIGKILL" in retry["message"]
    assert outcome.report["run"]["lost"] == []  # the second attempt ran
    cells = {k["name"]: k["results"]["interpret"]["status"] for k in outcome.report["kernels"]}
    assert cells == {"block_copy": "pass", "rotated_index_map": "fail", "acc_across_parallel": "pass"}
    static = {k["name"]: k["results"].get("static", {}).get("status") for k in outcome.report["kernels"]}
    assert static == {"block_copy": None, "rotated_index_map": None, "acc_across_parallel": "fail"}  # its own row


def test_a_timeout_found_is_a_timeout_kept_when_the_budget_cuts_its_shrinking(staged):
    outcome = staged(faultcases.hang_short_budget)
    assert [(f["kind"], f["backend"]) for f in outcome.report["findings"]] == [("timeout", "interpret")], outcome.report
    [finding] = outcome.report["findings"]
    assert finding["reproducer"]
    assert outcome.report["kernels"][0]["results"]["interpret"]["status"] == "fail"
    assert outcome.exit == 1
