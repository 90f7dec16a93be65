"""How verify() spends its examples: the static check inline (once per config and input
shapes, reported once as "static"), a backend's transform searches taking turns with its
bare search, and the reference computed while the worker runs the kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pallas_verify.engine import verify
from pallas_verify.execution.sandbox import Sandbox
from pallas_verify.grid import tasks
from pallas_verify.loader import load_spec
from pallas_verify.oracles import static as static_oracle
from pallas_verify.runner import Runner
from reference_kernels.mutants import grid as grid_mutants
from tests.engine import _kernels as k

SPECS = Path(__file__).with_name("_specs.py")


def _spy_checks(monkeypatch):
    calls = []
    judge = Runner.judge

    def spied(self, config, inputs, backend, mode, transform=None, **kw):
        calls.append((backend.name, transform, repr(config), tuple(x.shape for x in inputs)))
        return judge(self, config, inputs, backend, mode, transform=transform, **kw)

    monkeypatch.setattr(Runner, "judge", spied)
    return calls


def test_transform_searches_take_turns_with_the_bare_search(tmp_path, monkeypatch):
    calls = _spy_checks(monkeypatch)
    report = verify(k.TRIPLE, ["interpret"], max_examples=3, profile="ci", isolate="never", static=False,
                    out_dir=tmp_path)
    order = [t for _, t, _, _ in calls]
    assert order[:3] == [None, "vmap", "grad"], order  # each runs an example before any runs its budget
    cells = {r.transform: r for r in report.results}
    assert set(cells) == {None, "vmap", "grad"}
    for transform, cell in cells.items():
        assert cell.status == "pass"
        assert cell.examples == order.count(transform) <= 3  # no example counted (or run) twice


def test_transform_finding_keeps_its_transform_and_cell(tmp_path):
    report = verify(k.WRONG_TRIPLE, ["interpret"], max_examples=3, profile="ci", isolate="never", static=False,
                    out_dir=tmp_path, shrink_budget_s=0)
    cells = {r.transform: r.status for r in report.results}
    assert cells == {None: "pass", "grad": "fail"}
    assert {(f.transform, f.kind) for f in report.findings} == {("grad", "mismatch")}
    assert report.findings[0].evidence["examples_to_detect"] == 1


def test_static_check_runs_inline_once_per_config_and_reports_once(tmp_path, monkeypatch):
    traced = []
    serve = tasks.serve

    def counted(spec, request):
        if request["task"] == "static":
            traced.append((repr(request["config"]), tuple(x.shape for x in request["inputs"])))
        return serve(spec, request)

    monkeypatch.setattr(tasks, "serve", counted)
    calls = _spy_checks(monkeypatch)
    report = verify(grid_mutants.acc_across_parallel_spec, ["interpret", "tpu_interpret"], max_examples=3, profile="ci",
                    isolate="never", out_dir=tmp_path, shrink_budget_s=0)
    assert len(traced) == len(set(traced))  # cached: one trace per config and input shapes
    assert set(traced) <= {(c, s) for _, _, c, s in calls}  # no search of its own: only the examples run
    static = [f for f in report.findings if f.backend == "static"]
    assert [f.kind for f in static] == ["race"] and report.findings[0] is static[0]
    assert static[0].evidence["examples_to_detect"] == 1 and Path(static[0].reproducer).is_file()
    rows = {r.backend: r for r in report.results}
    assert set(rows) == {"interpret", "tpu_interpret", "static"}  # the static check's own row
    assert (rows["static"].status, rows["static"].reason) == ("fail", "race")
    assert not any("static" in rows[b].reason for b in ("interpret", "tpu_interpret"))  # not charged to their cells


def test_static_false_traces_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks, "serve", lambda *a, **kw: (_ for _ in ()).throw(AssertionError))
    report = verify(grid_mutants.acc_across_parallel_spec, ["interpret"], max_examples=2, profile="ci", isolate="never",
                    out_dir=tmp_path, static=False)
    assert all(f.backend != "static" for f in report.findings)


def test_only_reported_findings_are_blamed(tmp_path, monkeypatch):
    blamed = []
    blame = static_oracle.blamed

    def counted(finding, answer):
        blamed.append(finding.kind)
        return blame(finding, answer)

    monkeypatch.setattr(static_oracle, "blamed", counted)
    calls = _spy_checks(monkeypatch)
    report = verify(load_spec(f"{SPECS}::off_by_one"), ["interpret"], max_examples=5, profile="ci", isolate="never",
                    out_dir=tmp_path, static=False, shrink_budget_s=20)
    [finding] = report.findings
    assert finding.kind == "mismatch" and "blame" in finding.evidence
    assert len(calls) > 2 and blamed == ["mismatch"]  # shrinking failed many examples; one was reported


def test_check_sends_the_case_before_computing_the_reference(monkeypatch):
    events = []
    for owner, name in ((Sandbox, "submit"), (Runner, "expected"), (Sandbox, "collect")):
        original = getattr(owner, name)

        def wrapped(self, *args, _name=name, _original=original, **kw):
            events.append(_name)
            return _original(self, *args, **kw)

        monkeypatch.setattr(owner, name, wrapped)
    spec = load_spec(f"{SPECS}::good")
    from pallas_verify.backends import registry

    x = np.arange(300, dtype=np.float32)
    with Runner(spec, isolate="always") as runner:
        found = runner.check({"block": 128, "n": 300}, (x, x), registry.get("interpret"), {})
    assert found == []
    assert events[:3] == ["submit", "expected", "collect"]
