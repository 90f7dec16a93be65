"""smith: generated programs judged by verify's engine, the campaign, reports, reproducers."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pallas_verify.campaigns.smith.record import GENERATED, SmithRun, absorb
from pallas_verify.campaigns.smith.repro import write_smith_reproducer
from pallas_verify.campaigns.smith.spec import generated_spec
from pallas_verify.cli import main
from pallas_verify.engine import verify
from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report
from strategies.programs import SKELETONS

from ._mutants import planted

_IDENTITY = {"skeleton": "map", "semantics": ("arbitrary",), "vmem_limit": None, "shape": (300,), "block": (256,),
             "grid": (2,), "order": (0,), "table": None, "inputs": (((300,), "float32", ("identity",)),),
             "outputs": (((300,), "float32", ("un", "tanh", ("in", 0))),), "alias": False}


def test_map_programs_pass_on_the_hlo_interpreter() -> None:
    report = verify(generated_spec(skeletons=("map",)), ["interpret"], 6, 0, isolate="never", static=False)
    assert report.findings == []
    assert [(r.backend, r.status) for r in report.results] == [("interpret", "pass")]


@pytest.mark.slow
@pytest.mark.parametrize("skeleton", SKELETONS)
def test_every_skeleton_matches_its_reference_on_both_interpreters(skeleton: str, tmp_path: Path) -> None:
    spec = generated_spec(skeletons=(skeleton,), max_grid_points=4)
    report = verify(spec, ["interpret", "tpu_interpret"], 2, 1, isolate="never", out_dir=tmp_path)
    assert [f.message for f in report.findings] == []
    assert {r.status for r in report.results} == {"pass"}


@pytest.mark.slow
def test_a_planted_interpreter_bug_is_found_and_shrunk(tmp_path: Path) -> None:
    spec = generated_spec(skeletons=("accumulate",), max_grid_points=4)
    with planted("iota_wrong_axis_rank3"):
        # Shrinking drops the post-op within 1.3-1.6 s on a busy 2-core machine: 8 s leave a wide margin.
        report = verify(spec, ["interpret"], 30, 0, isolate="never", static=False, out_dir=tmp_path,
                        shrink_budget_s=8)
    found = [f for f in report.findings if f.kind == "mismatch"]
    assert found, [f.message for f in report.findings]
    program = found[0].config["program"]
    assert len(program["shape"]) == 3  # the bug is in rank-3 iotas: the program stays rank 3
    assert program["reduce"][3] is None  # shrunk: no post-op


@pytest.mark.slow
@pytest.mark.parametrize(("mutant", "skeletons", "programs"), [
    ("iota_wrong_axis_rank3", ("map", "reduce", "accumulate"), 40),
    ("masked_select_ignores_other", ("reduce", "accumulate"), 40),
    ("masked_store_mask_one_lane_off", ("map", "loop"), 60),
    ("strided_gather_from_zero", ("loop",), 30),
])
def test_each_planted_bug_is_found_within_a_small_budget(mutant: str, skeletons: tuple[str, ...], programs: int,
                                                        tmp_path: Path) -> None:
    """The generator draws what exposes each class of backend bug (a rank-3 iota, a masked
    sum whose fill matters, a masked store over positions, a strided store) within a few
    dozen programs of the skeletons where that class lives. The rest of the planted bugs
    (an int32 max over an all-negative row among them: a search of 60 to 150 programs from
    one seed finds it or not depending on its budget), and how fast whole campaigns find
    each, are measured by benchmarks/smith.py."""
    spec = generated_spec(skeletons=skeletons, max_grid_points=4)
    with planted(mutant):
        report = verify(spec, ["interpret"], programs, 0, isolate="never", static=False, out_dir=tmp_path,
                        shrink_budget_s=0)  # found is the property, not how small
    assert [f for f in report.findings if f.kind == "mismatch"], [f.message for f in report.findings]


def test_planted_rules_reach_jit_bodies() -> None:
    """``jnp.where`` is a ``jit`` whose body holds the ``select_n``: the planted rule must
    be applied inside it, or the masked-select bug could never be observed."""
    import jax
    import jax.numpy as jnp

    from ._mutants import RULES, _evaluate

    closed = jax.make_jaxpr(lambda i, v: jnp.where(i < 3, v, jnp.zeros_like(v)))(jnp.arange(8), jnp.ones(8))
    (out,) = _evaluate(closed.jaxpr, list(closed.consts), [jnp.arange(8), jnp.ones(8)],
                       RULES["masked_select_ignores_other"])
    assert np.asarray(out).tolist() == [1.0] * 8  # the correct rule gives three ones and five zeros


def _finding(kind: str, backend: str, message: str, **evidence: object) -> Finding:
    return Finding(kind=kind, kernel="smith", backend=backend, message=message, config={"program": _IDENTITY},
                   evidence=evidence)


def test_not_supported_is_coverage_and_internal_errors_are_findings(tmp_path: Path) -> None:
    run = SmithRun(report=Report())
    part = Report(findings=[
        _finding("compile_error", "mosaic_tpu:v5e", "NotImplementedError: Unsupported cast: int32 -> bf16"),
        _finding("compile_error", "mosaic_tpu:v5e", "INTERNAL: Mosaic failed to compile TPU kernel: 12 != 13"),
        _finding("compile_error", "mosaic_tpu:v5e", "INTERNAL: Mosaic failed to compile TPU kernel: 7 != 9"),
        _finding("exception", "interpret", "ValueError: bad", error_type="ValueError"),
    ])
    new = absorb(run, part, tmp_path, {"interpret"})
    assert [f.kind for f in new] == ["compile_error", "exception"]  # the two internal errors share a signature
    assert sum(run.not_supported.values()) == 1
    assert run.rejected == 1
    assert all(f.evidence["triage"].startswith("new: ") for f in new)
    assert all(Path(f.reproducer).is_file() for f in new)


def test_a_cell_whose_only_failures_are_refusals_passes(tmp_path: Path) -> None:
    run = SmithRun(report=Report())
    refusal = _finding("compile_error", "mosaic_tpu:v6e", "INTERNAL: Mosaic failed: Not implemented: Sublane broadcast")
    part = Report(findings=[refusal], results=[
        BackendResult(kernel="smith", backend="mosaic_tpu:v6e", status="fail", reason="compile_error")])
    assert absorb(run, part, tmp_path, {"interpret"}) == []
    assert run.cells["mosaic_tpu:v6e"].status == "pass", run.cells["mosaic_tpu:v6e"]


def test_reproducer_is_readable_source_and_runs(tmp_path: Path) -> None:
    engine_repro = tmp_path / "engine.py"
    np.savez(engine_repro.with_suffix(".npz"), arg0=np.linspace(-1, 1, 300, dtype=np.float32))
    finding = _finding("mismatch", "interpret", "outputs differ from the reference")
    finding = write_smith_reproducer(Finding(**{**finding.__dict__, "reproducer": str(engine_repro)}), tmp_path,
                                     "smith-mismatch")
    text = Path(finding.reproducer).read_text()
    assert "engine_reproducer" not in finding.evidence  # the engine's script lived in a folder smith removes
    assert "def kernel(x0):" in text and "def reference(x0):" in text and "jnp.tanh(v0)" in text
    assert "pickle" not in text
    from pallas_verify.backends.families import jax_env_defaults

    quiet = set(jax_env_defaults({}, tpu=False, gpu=False))  # what the reproducer must set itself
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    done = subprocess.run([sys.executable, finding.reproducer], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr  # a correct backend: the mismatch does not reproduce
    assert "no longer reproduces" in done.stdout
    from pallas_verify.campaigns.replay import replay_script

    assert replay_script(finding.reproducer) == 0  # `pallas-verify replay` runs it as the script does
    assert "plugin" not in done.stderr and "libtpu" not in done.stderr, done.stderr  # no accelerator noise


def test_cli_writes_every_report(tmp_path: Path) -> None:
    code = main(["smith", "--budget", "1s", "--backends", "interpret", "--out", str(tmp_path), "--seed", "0",
                 "--slice-examples", "2", "--workers", "1"])
    data = json.loads((tmp_path / "report.json").read_text())
    assert code == (1 if data["findings"] else 0)
    assert {"programs", "validity", "coverage", "findings", "backends_run"} <= set(data)
    assert data["programs"] >= 1 and 0.0 <= data["validity"] <= 1.0
    assert any(k.startswith("skeleton:") for k in data["coverage"])
    assert data["kernels"][0]["name"] == GENERATED
    assert (tmp_path / "report.junit.xml").is_file() and (tmp_path / "report.html").is_file()


def test_cli_rejects_a_bad_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smith", "--budget", "soon"]) == 2
    assert "budget='soon'" in capsys.readouterr().err


def test_conformance_matrix_gets_a_generated_programs_row(tmp_path: Path) -> None:
    from pallas_verify.campaigns.conformance import run_conformance

    lines: list[str] = []
    report = run_conformance([], backends="interpret", out_dir=tmp_path, progress=lines.append, generated_s=1.0)
    rows = [r for r in report.results if r.kernel == GENERATED]
    assert [r.backend for r in rows] == ["interpret"]
    assert rows[0].examples >= 1 and rows[0].reason.startswith(f"{rows[0].examples} programs, ")
    assert rows[0].status == ("fail" if report.findings else "pass")
    assert lines and lines[-1].startswith(f"{GENERATED}: interpret=")


def test_a_mismatchs_picture_is_written_beside_smiths_reproducer(tmp_path: Path) -> None:
    from pallas_verify.oracles.elements import element_evidence
    from pallas_verify.tolerance import compare

    expected = np.zeros(300, np.float32)
    actual = expected.copy()
    actual[256:] = 1.0
    elements = element_evidence(compare("out", actual, expected, None), actual, expected)
    finding = _finding("mismatch", "interpret", "outputs differ from the reference")
    finding = dataclasses.replace(finding, evidence={**finding.evidence, "elements": [elements],
                                                     "pictures": ["/gone/batch-folder/engine.png"]})
    written = write_smith_reproducer(finding, tmp_path, "smith-mismatch")
    assert written.evidence["pictures"] == [str(tmp_path / "smith-mismatch.png")]
    assert (tmp_path / "smith-mismatch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
