"""Each smith finding is re-run once and classified before it is reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from pallas_verify.campaigns.smith import spec as smith_spec
from pallas_verify.campaigns.smith.recheck import NOISE, recheck
from pallas_verify.engine import verify
from pallas_verify.spec import KernelSpec

from ._mutants import planted
from .test_generator import _TANH_IOTA


def _fixed(program: dict, *inputs: np.ndarray) -> KernelSpec:
    """The generated-programs spec pinned to one program and its inputs."""
    return KernelSpec(name="smith", kernel=smith_spec._kernel, reference=smith_spec._reference,
                      configs=st.just({"program": program}), inputs=lambda _: st.just(inputs), bitwise_stable=True)


def test_a_finding_that_depends_on_how_the_reference_compiles_is_noise(tmp_path: Path) -> None:
    """int32(tanh(float(iota))): XLA folds the reference's constant tanh to 0.99999977
    (int 0) where TPU interpret mode computes 1.0 at run time (int 1), from row 8 on."""
    spec = _fixed(_TANH_IOTA, np.zeros((127, 487), np.float32))
    report = verify(spec, ["tpu_interpret"], 1, 0, isolate="never", out_dir=tmp_path, static=False, metamorphic=False,
                    shrink_budget_s=0)
    (finding,) = report.findings
    assert finding.kind == "mismatch"
    checked = recheck(finding, spec, isolate="never")
    assert checked.evidence["recheck"] == NOISE, checked.evidence["recheck_why"]


def test_a_planted_bug_reproduces(tmp_path: Path) -> None:
    spec = _fixed(_MASKED, np.arange(128, dtype=np.float32))
    with planted("masked_select_ignores_other"):
        report = verify(spec, ["interpret"], 1, 0, isolate="never", out_dir=tmp_path, static=False, shrink_budget_s=0)
        (finding,) = report.findings
        checked = recheck(finding, spec, isolate="never")
    assert checked.evidence["recheck"] == "reproduces", checked.evidence["recheck_why"]


def test_a_finding_whose_case_passes_again_is_flaky(tmp_path: Path) -> None:
    x = np.arange(128, dtype=np.float32)
    with planted("masked_select_ignores_other"):
        report = verify(_fixed(_MASKED, x), ["interpret"], 1, 0, isolate="never", out_dir=tmp_path, static=False,
                        shrink_budget_s=0)
    (finding,) = report.findings
    checked = recheck(finding, _fixed(_MASKED, x), isolate="never")  # the planted bug is gone
    assert checked.evidence["recheck"] == "flaky"
    assert "showed nothing" in checked.evidence["recheck_why"]


_MASKED = {"skeleton": "map", "semantics": ("arbitrary",), "vmem_limit": None, "shape": (128,), "block": (128,),
           "grid": (1,), "order": (0,), "table": None, "inputs": (((128,), "float32", ("identity",)),),
           "outputs": (((128,), "float32", ("where", "lt", ("iota", 0), ("const", "int32", 3), ("in", 0),
                                            ("const", "float32", 0))),), "alias": False}


def test_a_crash_that_runs_clean_again_is_a_lost_case_not_a_finding() -> None:
    from pallas_verify.campaigns.smith.batch import route
    from pallas_verify.findings import Finding

    def finding(kind: str, verdict: str) -> Finding:
        return Finding(kind=kind, kernel="smith", backend="tpu_interpret", message=f"{kind} message",
                       config={"program": _MASKED}, evidence={"recheck": verdict, "recheck_why": "why"})

    findings, noise, lost = route([finding("crash", "flaky"), finding("crash", "reproduces"),
                                   finding("mismatch", "flaky"), finding("mismatch", NOISE)])
    assert [(f.kind, f.evidence["recheck"]) for f in findings] == [("crash", "reproduces"), ("mismatch", "flaky")]
    assert [n["kind"] for n in noise] == ["mismatch"]
    assert lost == ["a case on tpu_interpret was lost: crash message; it ran clean again"]
