"""A fuzz campaign's plan: runnable cells, and the others recorded with the same reasons
verify gives."""

from __future__ import annotations

import textwrap

import pytest

from pallas_verify.campaigns.budget import parse_budget
from pallas_verify.campaigns.plan import FuzzOptions, plan
from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.report import Report

SPECS = textwrap.dedent('''
    import numpy as np
    from hypothesis import strategies as st

    import pallas_verify as pv

    def _k(x):
        return x

    _ARGS = dict(kernel=_k, reference=_k, configs=st.just({}), inputs=lambda c: st.just((np.zeros(4, np.float32),)))
    TPU = pv.KernelSpec(name="tpu_only", platforms=("tpu",), **_ARGS)
    DECLARED = pv.KernelSpec(name="declared", platforms=("tpu",), unsupported={"interpret": "not here"}, **_ARGS)
''')


class _Executor:
    """Offers no hardware (the interpreters ask for none)."""

    def offers(self, hardware: str) -> str:
        return f"no {hardware} here"


def test_plan_runs_what_it_can_and_records_the_rest(tmp_path):
    path = tmp_path / "specs_for_plan.py"
    path.write_text(SPECS)
    report = Report()
    options = FuzzOptions(targets=(str(path),), backends=("interpret", "gpu_interpret"))
    cells = plan(options, report, _Executor())
    assert [(c.kernel, c.backend) for c in cells] == [("tpu_only", "interpret")]
    assert [k["name"] for k in report.kernels] == ["tpu_only", "declared"]
    assert {(r.kernel, r.backend): (r.status, r.reason) for r in report.results} == {
        ("tpu_only", "gpu_interpret"): ("skipped", "gpu_interpret serves ['gpu']; the kernel targets ['tpu']"),
        ("declared", "interpret"): ("unsupported", "not here"),
        ("declared", "gpu_interpret"): ("skipped", "gpu_interpret serves ['gpu']; the kernel targets ['tpu']"),
    }


def test_plan_names_a_pattern_that_matches_nothing(tmp_path):
    path = tmp_path / "specs_for_plan_empty.py"
    path.write_text(SPECS)
    with pytest.raises(InvalidArgument, match=r"kernels='nothing\*' matches no KernelSpec"):
        plan(FuzzOptions(targets=(str(path),), kernels="nothing*", backends=("interpret",)), Report(), _Executor())


def test_budget_module_parses_durations():
    assert parse_budget("1h30m") == 5400.0
    with pytest.raises(InvalidArgument, match="budget='soon' is not a duration"):
        parse_budget("soon")
