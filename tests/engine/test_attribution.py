"""Every FAIL is the kernel's: JAX's failures are n/a with the upstream error and frame on
the interpreter that fails, while the other interpreter still judges the kernel (and
finds a bug planted in it); errors no interpreter runs past, and the sanitizer's own
signals, stay findings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from pallas_verify import _jax_compat
from pallas_verify.attribution import upstream_frame
from pallas_verify.case import ErrorInfo
from pallas_verify.engine import verify
from pallas_verify.loader import load_spec

SPECS = Path(__file__).with_name("_attribution_specs.py")
_JAX = Path(jax.__file__).parent


def _run(name, backends, tmp_path, **options):
    return verify(load_spec(f"{SPECS}::{name}"), backends, max_examples=1, profile="ci", out_dir=tmp_path,
                  shrink_budget_s=0, **options)


def _cells(report):
    return {r.backend: r for r in report.results}


def _frame(path, line, function):
    return f'  File "{path}", line {line}, in {function}\n    code\n'


def _traceback(*frames, error="TypeError: boom"):
    return "Traceback (most recent call last):\n" + "".join(_frame(*f) for f in frames) + error + "\n"


_USER = ("/home/me/kernels.py", 10, "body")
_CALL = (_JAX / "_src/pallas/pallas_call.py", 889, "_pallas_call_lowering")
_HLO = (_JAX / "_src/pallas/hlo_interpreter.py", 350, "pallas_call_hlo_interpret")
_DISCHARGE = (_JAX / "_src/state/discharge.py", 519, "_index_array")
_NUMPY = (Path(np.__file__).parent / "core/fromnumeric.py", 3, "f")
_TPU = (_JAX / "_src/pallas/mosaic/interpret/interpret_pallas_call.py", 711, "get")


@pytest.mark.parametrize(("frames", "expected"), [
    ([_USER, _CALL, _HLO, _DISCHARGE], "discharge.py:519 in _index_array"),  # JAX's code from pallas_call to the raise
    ([_USER, _CALL, _HLO, _DISCHARGE, _NUMPY], "discharge.py:519 in _index_array"),  # numpy is nobody's
    ([_CALL, _HLO, _USER, _DISCHARGE], None),  # the kernel's body is on the way: the kernel's error
    ([_USER, _DISCHARGE], None),  # no Pallas machinery runs the kernel there (a trace-time error)
    ([_USER, _CALL, _HLO, ("/work/pallas_verify/backends/execute.py", 1, "execute")], None),  # the tool's frame
])
def test_the_upstream_frame_needs_jax_code_alone_from_the_machinery_to_the_raise(frames, expected):
    found = upstream_frame(ErrorInfo(type="TypeError", message="boom", traceback=_traceback(*frames)))
    assert (found is None) if expected is None else str(found).endswith(expected)


def test_an_embedded_callback_traceback_is_the_one_read_and_sanitizer_signals_are_never_upstream():
    outer = _traceback(_USER, error="jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback: ")
    inner = _traceback(_TPU, error="IndexError: Out-of-bounds read of (0 0 hbm 101)")
    assert str(_jax_compat.upstream_frame(outer + inner)).endswith("interpret_pallas_call.py:711 in get")
    for message in ("Out-of-bounds read of (0 0 hbm 101)", "RACE DETECTED: write of ...", "Revisited block (0, 0)"):
        error = ErrorInfo(type="IndexError", message=message, traceback=outer + inner)
        assert upstream_frame(error) is None, message


GPU = pytest.mark.gpu_interpret


@pytest.mark.slow
@pytest.mark.parametrize(("good", "bad", "failing", "judge", "frame"), [
    # The frames' line numbers differ between JAX releases (make test-jax runs this on each).
    ("emit_pipeline_ragged", "emit_pipeline_ragged_bug", "interpret", "tpu_interpret", r"discharge.py:\d+ in _index_array"),
    ("dynamic_dma", "dynamic_dma_bug", "interpret", "tpu_interpret", r"discharge.py:\d+ in _index_array"),
    pytest.param("triton_softmax", "triton_softmax_bug", "gpu_interpret", "interpret", r"jaxpr_interpret.py:\d+ in interpret", marks=GPU),
    pytest.param("atomic_rows", "atomic_rows_bug", "gpu_interpret", "interpret", r"primitives.py:\d+ in _swap_abstract_eval", marks=GPU),
    pytest.param("mgpu_threads", "mgpu_threads_bug", "interpret", "gpu_interpret", "_run_scoped_physicalize_rule", marks=GPU),
])
def test_a_jax_failure_is_na_with_its_frame_while_the_other_interpreter_still_finds_a_planted_bug(
        tmp_path, good, bad, failing, judge, frame):
    report = _run(good, [failing, judge], tmp_path)
    cells = _cells(report)
    assert report.findings == [], [f.message[:300] for f in report.findings]
    assert (cells[failing].status, cells[judge].status) == ("unsupported", "pass")
    assert cells[failing].reason.startswith(f"upstream limitation: {failing} fails inside JAX")
    assert re.search(frame, cells[failing].reason) and f"while {judge} runs the same example" in cells[failing].reason
    (limitation,) = report.kernels[0]["upstream"]  # listed once, with the frame and a reproducer
    assert (limitation["backend"], limitation["clean_on"]) == (failing, judge) and re.search(frame, limitation["frame"])
    assert Path(limitation["reproducer"]).exists()

    # A planted bug: the witness no longer runs the example clean; it finds the bug, and the
    # JAX error stays a finding too (never attributed upstream without a clean witness).
    planted = _run(bad, [failing, judge], tmp_path / "bug")
    assert [(r.backend, r.status) for r in planted.results] == [(failing, "fail"), (judge, "fail")] or (
        [(r.backend, r.status) for r in planted.results] == [(judge, "fail"), (failing, "fail")])
    assert "upstream" not in planted.kernels[0]
    assert {f.kind for f in planted.findings if f.backend == failing} == {"exception"}


@pytest.mark.slow
def test_emit_pipeline_over_whole_blocks_meets_the_axis_frame_assertion_upstream(tmp_path):
    report = _run("emit_pipeline_whole", ["interpret", "tpu_interpret"], tmp_path)
    cells = _cells(report)
    assert (cells["interpret"].status, cells["tpu_interpret"].status) == ("unsupported", "pass")
    assert "AssertionError, raised at jax/_src/pallas/core.py" in cells["interpret"].reason
    assert "in axis_frame" in cells["interpret"].reason
    assert not report.kernels[0].get("static_skipped")  # traced under a TPU device kind: the static check ran


@pytest.mark.slow
def test_a_revisit_declared_any_is_na_on_tpu_interpret_and_an_undeclared_one_stays_a_finding(tmp_path):
    report = _run("revisit_any", ["interpret", "tpu_interpret"], tmp_path)
    cells = _cells(report)
    assert report.findings == [], [f.message[:300] for f in report.findings]  # the static check allows it too
    assert (cells["interpret"].status, cells["tpu_interpret"].status) == ("pass", "unsupported")
    assert "even one whose BlockSpec declares pipeline_mode=pl.Buffered(1, revisit=pl.RevisitMode.ANY)" in (
        cells["tpu_interpret"].reason)

    planted = _cells(_run("revisit_any_bug", ["interpret", "tpu_interpret"], tmp_path / "bug"))
    assert (planted["interpret"].status, planted["tpu_interpret"].status) == ("fail", "unsupported")

    undeclared = _run("revisit_not_declared", ["interpret", "tpu_interpret"], tmp_path / "undeclared")
    kinds = {(f.backend, f.kind) for f in undeclared.findings}
    assert {("static", "revisit"), ("tpu_interpret", "revisit")} <= kinds


@pytest.mark.slow
def test_a_semaphore_passed_between_calls_is_clean_statically_and_na_on_both_interpreters(tmp_path):
    report = _run("async_copy", ["interpret", "tpu_interpret"], tmp_path)
    cells = _cells(report)
    assert report.findings == [], [f.message[:300] for f in report.findings]  # a wait is no input mutation
    assert {c.status for c in cells.values()} == {"unsupported"}
    assert all("no interpreter runs a pallas_call that returns semaphores" in c.reason for c in cells.values())

    planted = _run("async_copy_bug", ["interpret", "tpu_interpret"], tmp_path / "bug")
    assert [(f.backend, f.kind) for f in planted.findings] == [("static", "input_mutation")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "backends"), [
    ("nothing_runs", ["interpret", "tpu_interpret"]),  # a DMA of dynamic size; pl.semaphore_read
    pytest.param("scalar_atomic", ["interpret", "gpu_interpret"], marks=GPU),  # Triton scalar atomics
])
def test_a_kernel_every_interpreter_fails_inside_jax_is_na_on_each_naming_the_others_and_no_finding(
        tmp_path, name, backends):
    report = _run(name, backends, tmp_path)
    cells = _cells(report)
    assert report.findings == [], [f.message[:300] for f in report.findings]
    for backend, other in (backends, backends[::-1]):
        assert cells[backend].status == "unsupported"
        assert cells[backend].reason.startswith(f"no interpreter here can run this kernel: {backend} fails inside JAX")
        assert f"so does every other interpreter on the same example ({other}: " in cells[backend].reason
    entries = {u["backend"]: u for u in report.kernels[0]["upstream"]}
    assert set(entries) == set(backends)
    for backend, other in (backends, backends[::-1]):
        assert entries[backend]["clean_on"] is None and set(entries[backend]["also_failing"]) == {other}
        assert Path(entries[backend]["reproducer"]).exists()


@pytest.mark.slow
def test_an_error_with_the_kernels_own_frame_stays_a_finding_though_no_interpreter_runs_it(tmp_path):
    """The same kernel with a bug planted where JAX fails: the DMA reads past its source."""
    report = _run("nothing_runs_bug", ["interpret", "tpu_interpret"], tmp_path)
    assert {r.status for r in report.results} == {"fail"}
    assert "upstream" not in report.kernels[0]


@pytest.mark.slow
def test_a_sanitizer_signal_stays_a_finding_though_the_other_interpreter_runs_clean(tmp_path):
    report = _run("out_of_bounds_read", ["interpret", "tpu_interpret"], tmp_path)
    cells = _cells(report)
    assert (cells["interpret"].status, cells["tpu_interpret"].status) == ("pass", "fail")
    assert [f.kind for f in report.findings if f.backend == "tpu_interpret"] == ["out_of_bounds"]


@pytest.mark.slow
def test_the_upstream_reproducer_runs_with_plain_jax_and_exits_1_while_jax_fails(tmp_path):
    spec = load_spec("reference_kernels.upstream.tests_tpu_dma:JT_DYNAMIC_DMA")
    report = verify(spec, ["interpret", "tpu_interpret"], max_examples=1, profile="ci", out_dir=tmp_path,
                    shrink_budget_s=0)
    (limitation,) = report.kernels[0]["upstream"]
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in ("pallas_verify", "strategies", "hypothesis",
                                                                "reference_kernels"))
    run = subprocess.run([sys.executable, "-c", f"import sys, runpy; {blocked}; "
                          f"runpy.run_path({limitation['reproducer']!r}, run_name='__main__')"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "tpu_interpret: the kernel runs" in run.stdout
    assert "Shapes must be 1D sequences of concrete values" in run.stderr


def test_a_cell_that_ends_na_drops_the_same_jax_failure_met_before_any_witness_ran_clean():
    """One cell, one verdict: an exception met while no witness ran an example clean, then
    an upstream limitation once one did, is one JAX failure; another exception stays."""
    import types

    from pallas_verify.attribution import Upstream
    from pallas_verify.engine import _unexplained
    from pallas_verify.findings import Finding

    limitation = Upstream(kernel="k", backend="tpu_interpret", transform="vmap", error="ValueError: safe_zip boom",
                          frame="jax/x.py:1 in f", site=None, clean_on="interpret", config={}, mode={})
    same = Finding(kind="exception", kernel="k", backend="tpu_interpret", transform="vmap",
                   message="ValueError: safe_zip boom\nmore")
    other = Finding(kind="exception", kernel="k", backend="tpu_interpret", transform="vmap",
                    message="KeyError: the kernel's own")
    mismatch = Finding(kind="mismatch", kernel="k", backend="tpu_interpret", transform="vmap", message="x")
    search = types.SimpleNamespace(unsupported=limitation.reason, found=[(same, {}), (other, {}), (mismatch, {})])
    assert [f for f, _ in _unexplained(search, limitation)] == [other, mismatch]
    search.unsupported = None  # a cell that did not end n/a keeps everything
    assert len(_unexplained(search, limitation)) == 3
