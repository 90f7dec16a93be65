"""The report model's policies: a kernel's entry, a finding from JSON, the cells of a
kernel that does not run, how a cell's reasons are united, and reproducer file names."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify.findings import Finding
from pallas_verify.reports.report import (
    BackendResult,
    Report,
    finding_dict,
    finding_from_dict,
    kernel_entry,
    unrun_results,
)
from pallas_verify.reports.reproducer import file_stem


def _spec(**extra):
    return pv.KernelSpec(name="k", kernel=lambda x: x, reference=lambda x: x,
                         configs=st.just({}), inputs=lambda c: st.just((np.zeros(4, np.float32),)), **extra)


def test_kernel_entry_names_features_and_platforms():
    spec = _spec(features=("accumulator",), platforms=("gpu",))
    assert kernel_entry(spec) == {"name": "k", "features": ["accumulator"], "platforms": ["gpu"]}


def test_a_finding_survives_its_json_form_and_unknown_keys_are_ignored():
    finding = Finding(kind="mismatch", kernel="k", backend="interpret", message="out differs", config={"block": 8},
                      mode={"cores": 2}, transform="vmap", evidence={"outputs": ["out: 3 bad"]}, elapsed_s=1.25)
    data = json.loads(json.dumps({**finding_dict(finding), "added_later": 1}))
    assert finding_from_dict(data) == finding
    report = Report(findings=[finding])
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))).findings == [finding]


def test_a_kernel_that_does_not_run_gets_a_cell_per_transform():
    cells = unrun_results(_spec(transforms=("vmap",)), "gpu_interpret", "unsupported", "no reason")
    assert [(c.backend, c.transform, c.status, c.reason) for c in cells] == [
        ("gpu_interpret", None, "unsupported", "no reason"), ("gpu_interpret", "vmap", "unsupported", "no reason")]


def test_failing_unites_reasons_sorted_once_each():
    passed = BackendResult(kernel="k", backend="interpret", status="pass", reason="")
    failed = BackendResult(kernel="k", backend="interpret", status="fail", reason="race, mismatch")
    assert passed.failing(["static revisit"]).reason == "static revisit"
    again = failed.failing(["static revisit", "race"])
    assert (again.status, again.reasons) == ("fail", ("mismatch", "race", "static revisit"))


def test_combined_adds_effort_and_unites_reasons_and_nodes():
    one = BackendResult(kernel="k", backend="b", status="fail", reason="race", examples=3, shrink_steps=2,
                        seconds=1.0, node="host-a")
    two = BackendResult(kernel="k", backend="b", status="pass", reason="", examples=5, seconds=2.0,
                        node="host-b, host-a")
    both = one.combined(two)
    assert (both.status, both.reason, both.node) == ("fail", "race", "host-a, host-b")
    assert (both.examples, both.shrink_steps, both.seconds) == (8, 2, 3.0)
    assert two.combined(two).status == "pass"


def test_file_stem_keeps_safe_characters_and_replaces_the_rest():
    assert file_stem("my kernel", "mismatch", "mosaic_tpu:v5e", 3) == "my_kernel-mismatch-mosaic_tpu_v5e-3"
    assert file_stem("a.b-c_d") == "a.b-c_d"
    assert file_stem("x/../y") == "x_.._y"


def test_a_kernel_in_two_parts_is_one_entry_with_the_notes_of_both():
    one = Report(kernels=[{"name": "k", "features": ["a"], "platforms": ["tpu"], "notes": ["x"]}])
    two = Report(kernels=[{"name": "k", "features": ["a"], "platforms": ["tpu"], "notes": ["x", "y"],
                           "static_skipped": ["s"]}, {"name": "j", "features": [], "platforms": ["tpu"]}])
    one.merge(two)
    assert one.kernels == [{"name": "k", "features": ["a"], "platforms": ["tpu"], "notes": ["x", "y"],
                            "static_skipped": ["s"]}, {"name": "j", "features": [], "platforms": ["tpu"]}]
