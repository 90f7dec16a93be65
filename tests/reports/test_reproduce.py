"""Reproducers and replay: exact inputs for every dtype, and a distinct status (never FIXED)
for a case that cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pallas_verify.reports.casefile import CaseFileError, load_case, save_case
from pallas_verify.reports.reproducer import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES

ROUND_TRIP_DTYPES = ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                     "float8_e4m3b11fnuz", "int4", "uint4", "bool", "complex64", "complex128", "uint32", "int8",
                     "float32", "float64"]


def _dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name, None) or name)


@pytest.mark.parametrize("name", ROUND_TRIP_DTYPES)
def test_case_files_round_trip_every_dtype_bit_for_bit(tmp_path, name):
    dtype = _dtype(name)
    bits = np.random.default_rng(0).integers(0, 256, size=(3, 5 * dtype.itemsize), dtype=np.uint8)
    x = bits.astype(bool) if dtype.kind == "b" else bits.view(dtype)  # every bit pattern: NaN payloads, -0
    y = np.arange(6, dtype=np.float32)[::2]  # not contiguous
    save_case(tmp_path / "c.npz", [x, y], {"block": 8})
    (lx, ly), config = load_case(tmp_path / "c.npz")
    assert lx.dtype == dtype and lx.shape == x.shape and lx.tobytes() == x.tobytes()
    assert ly.dtype == y.dtype and np.array_equal(ly, y)
    assert config == {"block": 8}


def test_a_case_file_saved_without_dtypes_is_refused_not_misread(tmp_path):
    np.savez(tmp_path / "old.npz", arg0=np.zeros(4, ml_dtypes.bfloat16))  # loads back as |V2
    with pytest.raises(CaseFileError, match=r"arg0 was saved as \|V2 without its dtype"):
        load_case(tmp_path / "old.npz")


# A kernel that doubles its input and adds one (the planted bug) or copies it (the fix); the reference
# copies. RAISE makes the reference raise: the case can no longer be judged.
PLANTED = textwrap.dedent('''
    import jax, jax.numpy as jnp, ml_dtypes, numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl
    import pallas_verify as pv

    DTYPE, BUG, RAISE = {dtype!r}, {bug!r}, {raise_!r}

    def _wrong(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + jnp.ones_like(x_ref[...])

    def _right(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def kernel(x, *, n):
        return pl.pallas_call(_wrong if BUG else _right, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    def reference(x, *, n):
        if RAISE:
            raise ValueError("the reference gave up")
        return x

    def inputs(config):
        dtype = getattr(ml_dtypes, DTYPE, None) or np.dtype(DTYPE)
        return st.just((np.arange(config["n"]).astype(np.float32).astype(dtype),))

    spec = pv.KernelSpec(name="planted", kernel=kernel, reference=reference,
                         configs=st.fixed_dictionaries({{"n": st.just(8)}}), inputs=inputs)
''')


def _write(path: Path, dtype: str, *, bug: bool = True, raise_: bool = False) -> None:
    path.write_text(PLANTED.format(dtype=dtype, bug=bug, raise_=raise_))


def _python(script: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env=env or {**os.environ, "JAX_PLATFORMS": "cpu"})


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pallas_verify.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})


def _found(tmp_path: Path, dtype: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The planted spec's file and the reproducer of its mismatch (via the CLI, in this
    process: its worker and jax are already started; the reproducers run as a user runs them)."""
    from pallas_verify import cli

    spec = tmp_path / "planted.py"
    _write(spec, dtype)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["verify", f"{spec}::spec", "--backends", "interpret", "--max-examples", "2", "--out", "out",
                       "--json", "out/r.json"])
    assert status == 1
    [finding] = json.loads((tmp_path / "out/r.json").read_text())["findings"]
    assert finding["kind"] == "mismatch"
    return spec, Path(finding["reproducer"])


def _expect(script: Path, cwd: Path, status: int, text: str, env: dict[str, str] | None = None) -> str:
    """Run a reproducer; check its exit status and that its output says ``text``; its stderr."""
    run = _python(script, cwd, env)
    assert run.returncode == status, run.stdout + run.stderr
    assert text in run.stdout, run.stdout
    return run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8_e4m3fn"])
def test_reproducer_exits_one_quietly_while_the_bug_is_there_and_zero_once_fixed(tmp_path, monkeypatch, dtype):
    spec, script = _found(tmp_path, dtype, monkeypatch)
    inputs, _ = load_case(script.with_suffix(".npz"))
    assert inputs[0].dtype == _dtype(dtype)
    # Run as a user runs it, with no JAX_PLATFORMS: it prints its verdict without plugin noise.
    plain = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "TPU_ACCELERATOR_TYPE",
                                                              "TPU_WORKER_HOSTNAMES")}
    stderr = _expect(script, tmp_path, EXIT_REPRODUCES, "[mismatch] planted on interpret: outputs differ", env=plain)
    assert stderr.strip() == ""
    _write(spec, dtype, bug=False)
    _expect(script, tmp_path, EXIT_FIXED, "mismatch no longer reproduces")


@pytest.mark.slow
def test_a_case_that_cannot_run_exits_three_and_replay_never_says_fixed(tmp_path, monkeypatch):
    spec, script = _found(tmp_path, "bfloat16", monkeypatch)
    _write(spec, "bfloat16", raise_=True)  # the reference now raises: nothing can be judged
    _expect(script, tmp_path, EXIT_CANNOT_RUN, "cannot run this case: the reference fails on it")
    replay = _cli(["replay", "out/r.json"], tmp_path)
    assert replay.returncode == EXIT_CANNOT_RUN, replay.stdout + replay.stderr
    assert "CANNOT RUN        mismatch in planted on interpret" in replay.stdout
    assert "FIXED" not in replay.stdout

    _write(spec, "bfloat16")  # the bug is back, but the inputs are gone
    npz = script.with_suffix(".npz")
    npz.unlink()
    _expect(script, tmp_path, EXIT_CANNOT_RUN, "cannot run this case: CaseFileError: inputs file")
    np.savez(npz, arg0=np.arange(8).astype(ml_dtypes.bfloat16))  # an old case file: loads back as |V2
    _expect(script, tmp_path, EXIT_CANNOT_RUN, "without its dtype")


def test_a_backend_that_is_not_available_cannot_run_the_case(tmp_path, monkeypatch, capsys):
    from pallas_verify.backends import registry
    from pallas_verify.campaigns.replay import reproduce

    spec = tmp_path / "planted.py"
    _write(spec, "bfloat16")
    save_case(tmp_path / "case.npz", [np.arange(8).astype(ml_dtypes.bfloat16)])
    backend = registry.get("interpret")
    monkeypatch.setattr(type(backend), "available", lambda self: "no such device on this host")
    status = reproduce(f"{spec}::spec", backend="interpret", kind="mismatch", config={"n": 8}, mode={},
                       inputs=tmp_path / "case.npz")
    assert status == EXIT_CANNOT_RUN
    assert "cannot run this case: backend interpret is not available here: no such device" in capsys.readouterr().out
