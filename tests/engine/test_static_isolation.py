"""The static check traces the kernel in a worker: a hang or abort while tracing is a
finding of the static check, a raise a note that it could not judge the kernel (the
backends report the exception), and the backends' searches still run."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pallas_verify.engine import verify
from pallas_verify.execution import isolation, sandbox
from pallas_verify.execution.caselimit import CaseLimit
from pallas_verify.loader import load_spec
from tests.engine._specs import rendezvous_dir

SPECS = Path(__file__).with_name("_specs.py")


def spec(name):
    return load_spec(f"{SPECS}::{name}")


def by_backend(report):
    return {f.backend: f for f in report.findings}


def test_trace_time_raise_is_a_static_skip_note_and_the_backend_reports_the_exception(tmp_path):
    report = verify(spec("trace_raises"), ["interpret"], max_examples=2, profile="ci", out_dir=tmp_path,
                    shrink_budget_s=0)
    assert "static" not in by_backend(report)  # the static check could not judge it: no finding of its own
    (note,) = report.kernels[0]["static_skipped"]
    assert note.startswith("static check skipped for trace_raises: tracing it raised ValueError: this kernel "
                           "cannot be traced")
    # The run went on: the interpreter's search ran the kernel and reports its exception, with the traceback.
    assert [(r.backend, r.status) for r in report.results] == [("interpret", "fail")]
    found = by_backend(report)["interpret"]
    assert found.kind == "exception" and "_raises_while_traced" in found.evidence["traceback"]


def test_the_static_check_traces_in_a_worker_of_its_own_while_the_kernel_runs(tmp_path, monkeypatch):
    # The kernel passes only when two processes trace it at once (else it raises after 30 s).
    for name in ("PYTEST_XDIST_WORKER_COUNT", "PV_PARALLEL_RUNS"):  # a core to spare, however the suite runs
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(isolation, "_cores", lambda: 4)
    monkeypatch.setattr(isolation, "_busy_cores", lambda: 0)  # however busy the machine running the suite is
    meeting = rendezvous_dir(os.getpgrp())  # the case workers join this process's group
    shutil.rmtree(meeting, ignore_errors=True)
    try:
        report = verify(spec("meets_a_twin"), ["interpret"], max_examples=1, profile="ci", out_dir=tmp_path,
                        shrink_budget_s=0)
        met = {p.name for p in meeting.iterdir()}
    finally:
        shutil.rmtree(meeting, ignore_errors=True)
    assert not report.findings, [f.message for f in report.findings]
    assert [(r.backend, r.status) for r in report.results] == [("interpret", "pass")]
    assert len(met) == 2 and str(os.getpid()) not in met  # the tracer and the interpreters' worker


def test_trace_time_raise_in_process_is_the_same_note(tmp_path):
    loaded = spec("trace_raises")
    local = dataclasses.replace(loaded, name="local_trace_raises")  # no module-level reference: in-process
    report = verify(local, ["interpret"], max_examples=2, profile="ci", out_dir=tmp_path, shrink_budget_s=0,
                    isolate="never")
    assert "static" not in by_backend(report)
    assert "this kernel cannot be traced" in report.kernels[0]["static_skipped"][0]


@pytest.mark.slow
def test_trace_time_hang_is_a_static_timeout_and_the_run_goes_on(tmp_path, monkeypatch):
    # The shared workers started, with this file's specs loaded: the trace reaches its hang
    # in milliseconds, so a 5 s limit is all spent hanging.
    verify(spec("good"), ["interpret"], max_examples=1, profile="ci", out_dir=tmp_path / "warm")
    # The case's worker starts afresh (the trace's timeout stopped the one it shares): a case
    # found idle is hung after 2 s, not after the 15 s allowance for a first case.
    monkeypatch.setattr(sandbox, "CaseLimit", functools.partial(CaseLimit, first_case_s=2.0))
    report = verify(spec("trace_hangs"), ["interpret"], max_examples=1, profile="ci", out_dir=tmp_path,
                    timeout_s=5, shrink_budget_s=0)
    static = by_backend(report)["static"]
    assert static.kind == "timeout" and "hangs while it is traced" in static.message
    assert [(r.backend, r.status, r.reason) for r in report.results] == [("interpret", "fail", "timeout"),
                                                                         ("static", "fail", "timeout")]
    assert by_backend(report)["interpret"].kind == "timeout"


@pytest.mark.slow
def test_trace_time_abort_is_a_static_crash_and_the_run_goes_on(tmp_path):
    report = verify(spec("trace_aborts"), ["interpret"], max_examples=1, profile="ci", out_dir=tmp_path,
                    shrink_budget_s=0)
    static = by_backend(report)["static"]
    assert static.kind == "crash" and "SIGABRT" in static.message
    assert [(r.backend, r.status, r.reason) for r in report.results] == [("interpret", "fail", "crash"),
                                                                         ("static", "fail", "crash")]
    assert by_backend(report)["interpret"].kind == "crash"


def test_a_call_the_static_check_cannot_analyse_is_named_in_the_report(tmp_path, capsys):
    from pallas_verify.reports.text import print_summary

    report = verify(spec("gridless"), ["tpu_interpret"], max_examples=2, profile="ci", out_dir=tmp_path)
    assert [(r.backend, r.status) for r in report.results] == [("tpu_interpret", "pass")]
    (note,) = report.kernels[0]["static_skipped"]
    assert note.startswith("static check skipped for copy: it is a pl.kernel/core_map kernel")
    assert report.to_dict()["kernels"][0]["static_skipped"] == [note]
    print_summary(report)
    assert f"note: {note}" in capsys.readouterr().out


def _blame_inputs():
    x = np.ones(130, np.float32)
    return (x, x), [np.zeros(130, bool)]


def _tracer(name, isolate, timeout_s=60):
    from pallas_verify.execution.sandbox import Sandbox
    from pallas_verify.loader import spec_ref
    from pallas_verify.tracer import Tracer

    loaded = spec(name)
    return Tracer(loaded, Sandbox(loaded.name, spec_ref(loaded), timeout_s=timeout_s, isolate=isolate))


def test_blame_that_raises_while_tracing_keeps_the_finding(tmp_path):
    from pallas_verify.findings import Finding
    from pallas_verify.tracer import BlameInputs

    finding = Finding(kind="mismatch", kernel="trace_raises", backend="interpret", message="outputs differ",
                      config={"block": 128, "n": 130})
    inputs, masks = _blame_inputs()
    masks[0][3] = True
    for isolate in ("never", "always"):  # in this process, then in a worker
        kept = _tracer("trace_raises", isolate).blame(finding, BlameInputs(inputs, tuple(masks), (None,)))
        assert kept.message == "outputs differ" and kept.kind == "mismatch"
        assert "tracing 'trace_raises' for blame raised ValueError: this kernel cannot be traced" in (
            kept.evidence["blame_error"])


@pytest.mark.slow
def test_blame_that_hangs_while_tracing_keeps_the_finding():
    from pallas_verify.findings import Finding
    from pallas_verify.tracer import BlameInputs

    finding = Finding(kind="mismatch", kernel="trace_hangs", backend="interpret", message="outputs differ",
                      config={"block": 128, "n": 130})
    inputs, masks = _blame_inputs()
    masks[0][3] = True
    blamed = BlameInputs(inputs, tuple(masks), (None,))
    # The worker started, with this file's specs loaded (by a blame whose trace raises): the
    # trace below reaches its hang in milliseconds, so a 3 s limit is all spent hanging.
    raised = _tracer("trace_raises", "always").blame(dataclasses.replace(finding, kernel="trace_raises"), blamed)
    assert "this kernel cannot be traced" in raised.evidence["blame_error"]
    kept = _tracer("trace_hangs", "always", timeout_s=3).blame(finding, blamed)
    assert kept.message == "outputs differ"
    assert "for blame did not finish within its time limit" in kept.evidence["blame_error"]
