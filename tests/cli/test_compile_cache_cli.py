"""The persistent compilation cache across ``pallas-verify verify`` runs: a second run of an
unchanged kernel compiles nothing anew, and an edit to the kernel's body on disk, seen by
a fresh process, is judged as the new kernel, its planted bug found on both interpreters.

Two kinds of edit: one that changes the program JAX compiles (a constant of the body:
its entries are new, the reference's are read back), and one that TPU interpret mode keeps
out of the program (a static slice of a ref: the interpreter's Python callbacks do it, so
the compiled program is the same and is read back, while the callbacks bound to it are
the edited kernel's). Each run is a fresh process, as a kernel author's CI runs are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_verify._env import COMPILE_CACHE_ENV
from pallas_verify._jax_compat.compile_cache import SUFFIX

pytestmark = pytest.mark.slow

SPEC = '''
import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv

ROWS = 8


def shifted_double(x):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(START, ROWS), :] * FACTOR

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((ROWS, x.shape[1]), x.dtype))(x)


def _inputs(config):
    return st.integers(0, 2**31).map(
        lambda seed: (np.random.default_rng(seed).standard_normal((2 * ROWS, 128), dtype=np.float32),))


def kernel(x):
    return shifted_double(x)


def reference(x):
    return x[REF:REF + ROWS] * 2.0


SPEC = pv.KernelSpec(
    name="rows_doubled",
    kernel=kernel,
    reference=reference,
    configs=st.just({}),
    inputs=_inputs,
)
'''


def _write(folder: Path, *, start: int = 0, factor: float = 2.0, ref: int = 0) -> None:
    text = SPEC.replace("START", str(start)).replace("FACTOR", repr(factor)).replace("REF", str(ref))
    (folder / "spec.py").write_text(text)


def _verify(folder: Path, *extra: str, backends: str = "interpret,tpu_interpret") -> dict:
    # No shrinking: a planted bug's verdict and kind are what is judged, not its smallest input.
    run = subprocess.run(
        [sys.executable, "-m", "pallas_verify.cli", "verify", "spec.py", "--backends", backends,
         "--profile", "ci", "--max-examples", "2", "--shrink-budget", "0", "--json", "r.json", "--out", "out",
         *extra],
        capture_output=True, text=True, cwd=folder, timeout=600,
        env={**os.environ, COMPILE_CACHE_ENV: str(folder / "cache")})
    assert run.returncode in (0, 1), run.stderr
    return json.loads((folder / "r.json").read_text())


def _verdicts(report: dict) -> dict[str, str]:
    return {b: r["status"] for b, r in report["kernels"][0]["results"].items()}


def _entries(folder: Path, program: str = "") -> dict[str, float]:
    """The cache's entries (of the jitted function ``program``: kernel, reference, both
    for the float64 truth) and when each was last written or read."""
    return {p.name: p.stat().st_mtime for p in (folder / "cache").rglob(f"jit_{program}*{SUFFIX}")}


def test_an_edited_kernel_is_judged_as_edited_and_its_planted_bug_found(tmp_path):
    _write(tmp_path)
    assert _verdicts(_verify(tmp_path)) == {"interpret": "pass", "tpu_interpret": "pass"}
    cold = _entries(tmp_path)
    assert _entries(tmp_path, "kernel") and _entries(tmp_path, "reference") and _entries(tmp_path, "both")
    assert _verdicts(_verify(tmp_path)) == {"interpret": "pass", "tpu_interpret": "pass"}
    assert set(_entries(tmp_path)) == set(cold), "an unchanged kernel compiles nothing anew"

    _write(tmp_path, factor=3.0)  # a bug planted in the program JAX compiles
    report = _verify(tmp_path)
    assert _verdicts(report) == {"interpret": "fail", "tpu_interpret": "fail"}
    assert {f["kind"] for f in report["findings"]} == {"mismatch"}
    assert set(_entries(tmp_path, "kernel")) > {n for n in cold if n.startswith("jit_kernel")}, (
        "the edited kernel's programs are new entries")
    truth = _entries(tmp_path, "both")
    assert set(truth) == {n for n in cold if n.startswith("jit_both")}, "the unchanged reference's truth is kept"
    assert all(truth[name] > cold[name] for name in truth), "and read back"

    # A static slice of a ref: TPU interpret mode's Python callbacks read it, so its program
    # is the same for every start row (a consistent edit of kernel and reference, checked
    # once, adds no kernel entry), and what is read back runs the edited callbacks.
    _write(tmp_path, start=1, ref=1)
    before = set(_entries(tmp_path, "kernel"))
    assert _verdicts(_verify(tmp_path, backends="tpu_interpret")) == {"tpu_interpret": "pass"}
    assert set(_entries(tmp_path, "kernel")) == before
    _write(tmp_path, start=1)  # the kernel reads from row 1, the reference from row 0: a bug
    report = _verify(tmp_path)
    assert _verdicts(report) == {"interpret": "fail", "tpu_interpret": "fail"}
    assert {f["kind"] for f in report["findings"]} == {"mismatch"}


def test_no_compile_cache_keeps_nothing(tmp_path):
    _write(tmp_path)
    assert _verdicts(_verify(tmp_path, "--no-compile-cache", backends="interpret")) == {"interpret": "pass"}
    assert not (tmp_path / "cache").exists()
