"""`pallas-verify conformance`: the matrix, transform columns, multi-device kernels."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pallas_verify.campaigns.conformance import HOST_DEVICES, ensure_host_devices, registered_specs
from pallas_verify.campaigns.sanitizer import planted_rows
from pallas_verify.errors import InvalidArgument


def test_host_devices_are_requested_unless_the_user_chose():
    env = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    ensure_host_devices(env)
    assert env["XLA_FLAGS"] == f"--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count={HOST_DEVICES}"
    mine = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    ensure_host_devices(mine)
    assert mine["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"


def test_kernel_patterns_select_bundled_specs():
    names = {s.name for s in registered_specs("matmul_f32,upstream_tpu_*")}
    assert "matmul_f32" in names and "upstream_tpu_flash_attention" in names
    assert len(registered_specs("*")) >= 25
    with pytest.raises(InvalidArgument, match="--kernels 'nope' matches no registered kernel"):
        registered_specs("nope")


@pytest.mark.gpu_interpret
@pytest.mark.slow
def test_conformance_with_its_default_kernels_loads_and_runs_every_bundled_spec(tmp_path):
    """The default run: every catalog and upstream spec loads by reference in the unit's
    worker (whatever wraps its kernel), the matrix has transform columns, and the
    multi-device kernels run on the 4 host devices conformance sets up."""
    run = subprocess.run(
        [sys.executable, "-m", "pallas_verify.cli", "conformance",
         "--backends", "interpret,gpu_interpret", "--max-examples", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    kernels = len(registered_specs()) + len(planted_rows())  # and the planted-bug rows
    assert f"[1/{kernels}] ragged_add: 2 PASS, 2 skip" in lines  # progress: a line per kernel
    header = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    # the planted-bug rows' static check has a column of its own (findings.KERNEL_ROWS)
    assert lines[header].split() == ["kernel", "interpret", "gpu_interpret", "static"]
    rows = [line.split()[:3] for line in lines[header + 1:lines.index("", header)]]
    # JAX 0.11's HLO interpreter cannot run the ring's remote DMAs: JAX's, n/a (make test-jax)
    assert ["ring_permute", "PASS", "skip"] in rows or ["ring_permute", "n/a", "skip"] in rows
    at = rows.index(["ragged_add", "PASS", "skip"])  # one line per kernel, its transform under it
    assert rows[at + 1] == ["+vmap", "PASS", "skip"]
    assert "SKIPPED" not in run.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    cells = {k["name"]: k["results"] for k in report["kernels"]}
    assert set(cells) == {s.name for s in registered_specs()} | {row.name for row in planted_rows()}
    assert cells["upstream_gpu_layer_norm"]["interpret"]["status"] == "pass"  # its kernel wraps jax's
    assert cells["ring_permute"]["interpret"]["status"] in ("pass", "unsupported")  # 4 host devices were set up
    assert cells["ring_permute"]["interpret"]["examples"] == 1
    assert cells["ragged_add"]["interpret+vmap"]["status"] == "pass"
    assert cells["ragged_add"]["gpu_interpret"]["status"] == "skipped"
    assert "kernel targets ['tpu']" in cells["ragged_add"]["gpu_interpret"]["reason"]
    markdown = (tmp_path / "report.md").read_text()
    assert "| kernel | interpret | interpret+grad | interpret+vmap | gpu_interpret | gpu_interpret+grad |" in markdown
    assert (tmp_path / "report.html").exists() and (tmp_path / "report.junit.xml").exists()


USER_SPECS = textwrap.dedent('''
    import jax, numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl
    import pallas_verify as pv

    def _body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def add_one(x, *, block):
        return pl.pallas_call(_body, grid=(pl.cdiv(x.shape[0], block),),
                              in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
                              out_specs=pl.BlockSpec((block,), lambda i: (i,)),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    def _inputs(config):
        return st.integers(1, 300).map(lambda n: (np.arange(n, dtype=np.float32),))

    _COMMON = dict(reference=lambda x, *, block: x + 1, inputs=_inputs,
                   configs=st.fixed_dictionaries({"block": st.just(128)}))
    ADD_ONE = pv.KernelSpec(name="add_one", kernel=add_one, features=("ragged", "elementwise"), **_COMMON)
    ADD_ONE_GPU = pv.KernelSpec(name="add_one_gpu", kernel=add_one, features=("elementwise",),
                                platforms=("gpu",), **_COMMON)
    UNUSED = pv.KernelSpec(name="unused", kernel=add_one, **_COMMON)
''')


def test_conformance_runs_a_users_spec_file_into_the_matrix_with_feature_rows(tmp_path):
    (tmp_path / "my_kernels.py").write_text(USER_SPECS)
    run = subprocess.run(
        [sys.executable, "-m", "pallas_verify.cli", "conformance", "my_kernels.py", "--kernels", "add_one*",
         "--backends", "interpret", "--max-examples", "2", "--out", "out"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "[2/2] add_one_gpu: 1 PASS" in lines
    at = lines.index("feature      interpret")  # rows by the specs' features
    assert lines[at + 1:at + 3] == ["elementwise  2/2", "ragged       1/1"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [k["name"] for k in report["kernels"]] == ["add_one", "add_one_gpu"]  # --kernels left out `unused`
    assert "| elementwise | 2/2 |" in (tmp_path / "out" / "report.md").read_text()
