"""Numeric options validated before any work; exit statuses from one table."""

from __future__ import annotations

import math

import pytest

from benchmarks import faultcases
from pallas_verify.campaigns.plan import FuzzOptions
from pallas_verify.errors import InvalidArgument
from pallas_verify.exits import campaign_status
from pallas_verify.reports.report import BackendResult, Report


def test_bad_numbers_on_the_command_line_are_refused(staged):
    outcome = staged(faultcases.bad_numbers)
    assert "argument --timeout: '-1' is not a number of seconds >= 0" in outcome.stderr
    assert "argument --timeout: 'nan' is not a number of seconds >= 0" in outcome.stderr
    assert "budget='0' must be more than zero seconds" in outcome.stderr
    assert "argument --workers: '0' is not a count" in outcome.stderr


@pytest.mark.parametrize(("field", "value"), [("timeout_s", -1.0), ("timeout_s", math.nan), ("timeout_s", 0),
                                              ("budget_s", math.inf), ("shrink_budget_s", -1), ("timeout_s", "9")])
def test_bad_numbers_in_fuzz_options_are_refused(field, value):
    with pytest.raises(InvalidArgument, match=f"{field}={value!r} must be a finite number of seconds"):
        FuzzOptions(**{field: value})


def _report(*statuses: str, findings: int = 0, interrupted: bool = False, lost: bool = False,
            invalid: bool = False) -> Report:
    from pallas_verify.findings import Finding

    return Report(results=[BackendResult(kernel=f"k{i}", backend="interpret", status=s)  # type: ignore[arg-type]
                           for i, s in enumerate(statuses)],
                  findings=[Finding(kind="mismatch", kernel="k0", backend="interpret", message="m")] * findings,
                  interrupted=interrupted, run={"lost": [{"cause": "worker killed"}]} if lost else {},
                  invalid=[{"target": "x.py", "reason": "aborted"}] if invalid else [])


@pytest.mark.parametrize(
    ("report", "status"),
    [
        (_report("pass", "skipped", "unsupported"), 0),
        (_report("pass", "fail", findings=1), 1),
        (_report("pass", "not_reached"), 4),  # the budget did not reach a cell
        (_report("pass", lost=True), 4),  # a unit was lost to the infrastructure
        (_report("pass", "interrupted", interrupted=True), 130),
        (_report("fail", "not_reached", findings=1, interrupted=True, lost=True), 1),  # findings win
        (_report("pass", findings=1, invalid=True), 2),
    ],
)
def test_a_campaigns_exit_status_says_what_happened(report, status):
    assert campaign_status(report) == status
