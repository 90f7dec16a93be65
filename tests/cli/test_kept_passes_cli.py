"""Passes kept between ``pallas-verify verify`` runs (``pallas_verify.passes``): the same
seeded run of unchanged files reuses its verdict and says so; an edit planting a bug is
searched and found, its failure never kept; the file put back is reused again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pallas_verify.passes import PASS_CACHE_ENV

SPEC = '''
import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def kernel(x):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * FACTOR

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


SPEC = pv.KernelSpec(
    name="doubled",
    kernel=kernel,
    reference=lambda x: x * 2.0,
    configs=st.just({}),
    inputs=lambda config: st.integers(0, 2**31).map(
        lambda seed: (np.random.default_rng(seed).standard_normal((8, 128), dtype=np.float32),)),
)
'''
KEPT = "a kept pass: the same seeded run passed at"


def _write(folder: Path, factor: float) -> None:
    (folder / "spec.py").write_text(SPEC.replace("FACTOR", repr(factor)))


def _verify(folder: Path, *extra: str) -> tuple[str, dict]:
    run = subprocess.run(
        [sys.executable, "-m", "pallas_verify.cli", "verify", "spec.py", "--backends", "interpret",
         "--profile", "ci", "--max-examples", "2", "--shrink-budget", "0", "--json", "r.json", "--out", "out", *extra],
        capture_output=True, text=True, cwd=folder, timeout=600,
        env={**os.environ, PASS_CACHE_ENV: str(folder / "passes")})
    assert run.returncode in (0, 1), run.stderr
    return run.stdout, json.loads((folder / "r.json").read_text())


def _verdict(report: dict) -> str:
    return report["kernels"][0]["results"]["interpret"]["status"]


def test_a_pass_is_reused_until_an_edit_and_a_failure_never_is(tmp_path):
    _write(tmp_path, 2.0)
    out, report = _verify(tmp_path)
    assert _verdict(report) == "pass" and KEPT not in out and "kept" not in report["run"]
    out, report = _verify(tmp_path)
    assert _verdict(report) == "pass" and KEPT in out
    [kept] = report["run"]["kept"]
    assert kept["kernels"] == ["doubled"] and kept["backends"] == ["interpret"] and kept["at"]
    assert (tmp_path / "out" / "report.html").is_file()
    out, _ = _verify(tmp_path, "--no-pass-cache")
    assert KEPT not in out
    out, report = _verify(tmp_path, "--seed", "5")  # another search: searched, not reused
    assert KEPT not in out and _verdict(report) == "pass"

    _write(tmp_path, 3.0)  # a bug planted in the kernel's file
    for _ in range(2):  # found, and found again: a failure is never kept
        out, report = _verify(tmp_path)
        assert KEPT not in out and _verdict(report) == "fail"
        assert {f["kind"] for f in report["findings"]} == {"mismatch"}

    _write(tmp_path, 2.0)  # put back as it was (a new modification time, the same content)
    out, report = _verify(tmp_path)
    assert KEPT in out and _verdict(report) == "pass"
