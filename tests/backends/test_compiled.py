"""Compile backends: target tables, device detection, and real deviceless compiles.

Compiles need the ``tpu`` and ``gpu`` extras (marker ``compile``). Mosaic GPU keeps the
first GPU architecture it compiled for in a process, and an fp8 dot compiled for A100
aborts the process, so those cases run in child processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify.backends import families as targets
from pallas_verify.backends.base import Backend
from pallas_verify.backends.compiled import (
    COMPILE_CACHE,
    UNSUPPORTED,
    CompiledBackend,
    compile_backends,
)
from pallas_verify.backends.lowering import compile_case, trim_message, unsupported_reason
from pallas_verify.case import Case, Outcome

TPU_CHIPS = [c.name for c in targets.TPU_CHIPS]
GPUS = [g.name for g in targets.GPU_TARGETS]
# Chips whose Mosaic compiler rejects int8 elementwise arithmetic (libtpu 0.0.50.1).
INT8_REJECTED = {"v4", "v5e", "v5p", "v6e", "7x"}
CHILD_ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}


# ---------------------------------------------------------------- kernels


def _matmul_body(x_ref, y_ref, o_ref, acc_ref):
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm, bk, bn):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(
        _matmul_body,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
    )(x, y)


def _add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, params=None, block=None):
    import jax
    from jax.experimental import pallas as pl

    spec = {} if block is None else {
        "grid": (x.shape[0] // block[0],),
        "in_specs": [pl.BlockSpec(block, lambda i: (i, 0))] * 2,
        "out_specs": pl.BlockSpec(block, lambda i: (i, 0)),
    }
    return pl.pallas_call(_add_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=_params(params), **spec)(x, y)


def double(x, *, block):
    import jax
    from jax.experimental import pallas as pl

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    grid = (x.shape[0] // block[0], x.shape[1] // block[1])
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                          in_specs=[spec], out_specs=spec)(x)


def _params(name):
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas import triton as pltriton

    return {None: None, "tpu": pltpu.CompilerParams(dimension_semantics=("parallel",)),
            "triton": pltriton.CompilerParams()}[name]


def plgpu_add(x, y):
    import jax
    from jax.experimental.pallas import mosaic_gpu as plgpu

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype))
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    return kernel(x, y)


def fp8_dot(x, y):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), jnp.float32))(x, y)


def _case(kernel, backend: str, *inputs: np.ndarray, **config) -> Case:
    spec = pv.KernelSpec(name=kernel.__name__, kernel=kernel, reference=kernel,
                         configs=st.just(config), inputs=lambda c: st.just(inputs))
    return Case(spec=spec, config=config, inputs=inputs, backend=backend)


def _run(backend: str, kernel, *inputs: np.ndarray, **config) -> Outcome:
    family, target = backend.split(":")
    return CompiledBackend(family=family, target=target).run(_case(kernel, backend, *inputs, **config))


def _f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def _child(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run code in a child process that has this module loaded as ``m``."""
    prelude = ("import importlib.util, sys\n"
               f"s = importlib.util.spec_from_file_location('m', {str(Path(__file__))!r})\n"
               "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=CHILD_ENV,
                          capture_output=True, text=True, timeout=timeout, check=False)


# ---------------------------------------------------------------- pure tables and detection


@pytest.mark.parametrize(("platform", "kind", "expected"), [
    ("tpu", "TPU v4", "v4"), ("tpu", "TPU v5 lite", "v5e"), ("tpu", "TPU v5e", "v5e"),
    ("tpu", "TPU v5", "v5p"), ("tpu", "TPU v5p", "v5p"), ("tpu", "TPU v6 lite", "v6e"),
    ("tpu", "TPU7x", "7x"), ("tpu", "TPU  v4", "v4"), ("tpu", "TPU v3", None),
    ("tpu", "TPU v4 lite", None), ("gpu", "NVIDIA A100-SXM4-80GB", "a100"),
    ("gpu", "NVIDIA A100 80GB PCIe", "a100"), ("cuda", "NVIDIA H100 80GB HBM3", "h100"),
    ("gpu", "NVIDIA H100 PCIe", "h100"), ("gpu", "NVIDIA B200", "b200"),
    ("gpu", "NVIDIA H200", "h100"), ("gpu", "NVIDIA GH200 480GB", "h100"),
    ("gpu", "NVIDIA H20", None), ("gpu", "Tesla V100-SXM2-16GB", None),
    ("cpu", "cpu", None), ("cpu", "TPU v4", None), ("rocm", "AMD Instinct MI300X", None),
])
def test_target_of_maps_device_kinds(platform, kind, expected):
    assert targets.target_of(platform, kind) == expected


def test_targets_of_collects_real_devices():
    devices = [("cpu", "cpu"), ("tpu", "TPU v5 lite"), ("tpu", "TPU v5 lite"), ("gpu", "NVIDIA B200")]
    assert targets.targets_of(devices) == {"v5e", "b200"}
    assert targets.targets_of([("cpu", "cpu")]) == frozenset()


def test_every_target_is_recognised_from_its_own_compile_device_kind():
    for chip in targets.TPU_CHIPS:
        assert targets.target_of("tpu", chip.device_kind) == chip.name
    for gpu in targets.GPU_TARGETS:
        assert targets.target_of("gpu", gpu.device_kind) == gpu.name


@pytest.mark.parametrize(("env", "tpu", "gpu", "expected"), [
    ({}, False, False, {"JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "TPU_WORKER_HOSTNAMES": "localhost",
                        "TPU_ACCELERATOR_TYPE": "v5litepod-1"}),
    ({"JAX_PLATFORMS": "cuda"}, False, False, {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "TPU_WORKER_HOSTNAMES": "localhost",
                                               "TPU_ACCELERATOR_TYPE": "v5litepod-1"}),
    ({}, True, False, {}),
    ({}, False, True, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
                       "TPU_WORKER_HOSTNAMES": "localhost", "TPU_ACCELERATOR_TYPE": "v5litepod-1"}),
    ({"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}, True, True, {}),
])
def test_jax_env_defaults(env, tpu, gpu, expected):
    assert targets.jax_env_defaults(env, tpu=tpu, gpu=gpu) == expected


@pytest.mark.parametrize(("installed", "plugin"), [
    ({"jax_plugins", "jax_plugins.xla_cuda12"}, "jax_plugins.xla_cuda12"),
    ({"jax_plugins", "jax_plugins.xla_cuda13"}, "jax_plugins.xla_cuda13"),  # jax[cuda13]
    ({"jax_plugins"}, None), (set(), None)])
def test_triton_takes_the_cuda_plugin_of_either_cuda_major(monkeypatch, installed, plugin):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name in installed else None)
    assert targets._cuda_plugin() == plugin
    missing = targets.missing_compiler("triton")
    assert missing is None if plugin else missing == "the CUDA plugin is not installed: pip install 'pallas-verify[gpu]'"


def test_accelerators_present_reads_pci_vendors(tmp_path):
    assert targets.accelerators_present(tmp_path) == (False, False)
    for name, vendor, cls in [("0000:00:04.0", "0x1ae0", "0x120000"), ("0000:00:05.0", "0x10de", "0x030200")]:
        device = tmp_path / "sys/bus/pci/devices" / name
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(cls + "\n")
    assert targets.accelerators_present(tmp_path) == (True, True)


def test_gpu_target_config_carries_the_target():
    h100 = next(g for g in targets.GPU_TARGETS if g.name == "h100")
    text = targets.gpu_target_config(h100)
    assert "major: 9 minor: 0 feature_extension: ACCELERATED_FEATURES" in text
    assert 'device_description_str: "NVIDIA H100 80GB HBM3"' in text
    assert "core_count: 132" in text


def test_compile_backends_are_the_eleven_targets():
    backends = compile_backends()
    names = [b.name for b in backends]
    assert names == [f"mosaic_tpu:{c}" for c in TPU_CHIPS] + [
        f"{f}:{g}" for f in ("triton", "mosaic_gpu") for g in GPUS]
    for backend in backends:
        assert isinstance(backend, Backend)
        assert backend.isolate is True
        assert backend.platforms == ({"tpu"} if backend.family == "mosaic_tpu" else {"gpu"})
        if backend.family == "mosaic_tpu":  # overrides of the kernel's compiler params: tests/backends/test_mosaic_params.py
            assert "vmem_limit_bytes" in repr(backend.modes())
        else:
            assert repr(backend.modes()) == "just({})"


def test_nothing_executes_on_this_cpu_only_host():
    if any(targets.accelerators_present()):
        pytest.skip("an accelerator is attached to this host")
    assert not any(b.executes for b in compile_backends())


@pytest.mark.parametrize(("family", "sites", "fragment"), [
    ("mosaic_tpu", ["default"], None), ("mosaic_tpu", ["mosaic_tpu", "default"], None),
    ("mosaic_tpu", ["triton"], "selects the triton lowering"),
    ("mosaic_tpu", ["mosaic_gpu"], "plgpu.kernel"),
    ("triton", ["default", "triton"], None),
    ("triton", ["mosaic_tpu"], "pltpu.CompilerParams"),
    ("mosaic_gpu", ["mosaic_gpu"], None),
    ("mosaic_gpu", ["default"], "compiles kernels written with plgpu.kernel"),
    ("triton", [], "calls none"),
    ("triton", ["unknown:Foo"], "unknown:Foo"),
])
def test_unsupported_reason(family, sites, fragment):
    reason = unsupported_reason(family, sites)
    assert reason is None if fragment is None else fragment in reason


def test_trim_message_keeps_the_compiler_text_and_drops_boilerplate():
    text = ("INTERNAL: Mosaic failed: Only vector<i16> are supported\n\nThe MLIR operation involved:\n"
            "  %6 = arith.addi\n\nPlease report a bug at: https://example\n\nmore")
    assert trim_message(text) == ("INTERNAL: Mosaic failed: Only vector<i16> are supported\n\n"
                                  "The MLIR operation involved:\n  %6 = arith.addi")
    assert trim_message("x" * 2000).endswith(" ...")


# ---------------------------------------------------------------- real compiles


@pytest.mark.compile
def test_all_compile_backends_are_available_here():
    assert {b.name: b.available() for b in compile_backends()} == {b.name: None for b in compile_backends()}


@pytest.mark.compile
@pytest.mark.parametrize("chip", TPU_CHIPS)
def test_tiled_matmul_compiles_for_every_tpu_chip(chip):
    outcome = _run(f"mosaic_tpu:{chip}", matmul, _f32(256, 256), _f32(256, 256), bm=128, bk=128, bn=128)
    assert outcome.ok, outcome.error
    assert outcome.compiled_only
    assert outcome.outputs is None


@pytest.mark.compile
@pytest.mark.parametrize("gpu", GPUS)
def test_tiled_matmul_with_scratch_is_a_triton_error_and_unsupported_on_mosaic_gpu(gpu):
    outcome = _run(f"triton:{gpu}", matmul, _f32(256, 256), _f32(256, 256), bm=64, bk=64, bn=64)
    assert outcome.error.type == "NotImplementedError"
    assert "scratch memory not implemented in the Triton backend" in outcome.error.message
    outcome = _run(f"mosaic_gpu:{gpu}", matmul, _f32(256, 256), _f32(256, 256), bm=64, bk=64, bn=64)
    assert outcome.error.type == UNSUPPORTED


@pytest.mark.compile
@pytest.mark.parametrize("gpu", GPUS)
def test_blocked_add_compiles_with_triton_for_every_gpu(gpu):
    outcome = _run(f"triton:{gpu}", add, _f32(32, 128), _f32(32, 128), block=(16, 128))
    assert outcome.ok, outcome.error
    assert outcome.compiled_only


@pytest.mark.compile
@pytest.mark.slow
def test_plgpu_kernel_compiles_with_mosaic_gpu_for_every_gpu_one_process_each():
    for gpu in GPUS:
        result = _child(f"""
            o = m._run('mosaic_gpu:{gpu}', m.plgpu_add, m._f32(256), m._f32(256))
            print(o.ok, o.compiled_only, o.error)
        """)
        assert result.stdout.strip() == "True True None", (gpu, result.stderr[-2000:])


@pytest.mark.compile
@pytest.mark.slow
def test_mosaic_gpu_refuses_a_second_architecture_in_one_process():
    result = _child("""
        print(m._run('mosaic_gpu:h100', m.plgpu_add, m._f32(256), m._f32(256)).ok)
        try:
            m._run('mosaic_gpu:b200', m.plgpu_add, m._f32(256), m._f32(256))
        except m.pv.PallasVerifyError as e:
            print('refused:', e)
    """)
    assert result.stdout.startswith("True\nrefused: mosaic_gpu:b200 cannot compile"), result.stderr[-2000:]


@pytest.mark.compile
@pytest.mark.slow
def test_vmem_overflow_is_an_error_with_the_compiler_message_on_v5e():
    # A (2048, 2048) float32 block is 16 MiB, two of them (double-buffered) twice the limit:
    # as much an overflow as a larger block, and Mosaic compiles it in a quarter of the time.
    assert _run("mosaic_tpu:v5e", double, _f32(2048, 2048), block=(512, 512)).ok
    outcome = _run("mosaic_tpu:v5e", double, _f32(2048, 2048), block=(2048, 2048))
    assert outcome.error.type == "JaxRuntimeError"
    assert "CompileTimeScopedVmemOom" in outcome.error.message
    assert "Scoped allocation with size 32.00M and limit 16.00M exceeded scoped vmem limit" in outcome.error.message


@pytest.mark.compile
@pytest.mark.parametrize("chip", TPU_CHIPS)
def test_int8_elementwise_limitation_per_chip(chip):
    x = np.ones((32, 128), np.int8)
    outcome = _run(f"mosaic_tpu:{chip}", add, x, x)
    if chip in INT8_REJECTED:
        assert outcome.error.type == "MosaicError"
        assert "Only vector<i16> and vector<i32> are supported, but got 'i8'" in outcome.error.message
    else:
        assert outcome.ok, outcome.error


@pytest.mark.compile
@pytest.mark.parametrize(("backend", "params", "fragment"), [
    ("triton:h100", "tpu", "pltpu.CompilerParams"),
    ("mosaic_tpu:v5e", "triton", "pl.triton.CompilerParams"),
])
def test_compiler_params_of_another_backend_are_unsupported(backend, params, fragment):
    outcome = _run(backend, add, _f32(8, 128), _f32(8, 128), params=params)
    assert outcome.error.type == UNSUPPORTED
    assert fragment in outcome.error.message


@pytest.mark.compile
def test_plgpu_kernel_is_unsupported_on_tpu_and_triton():
    for backend in ("mosaic_tpu:v6e", "triton:b200"):
        outcome = _run(backend, plgpu_add, _f32(256), _f32(256))
        assert outcome.error.type == UNSUPPORTED, (backend, outcome.error)


@pytest.mark.compile
def test_aborting_compile_is_a_crash_of_the_child_and_the_parent_goes_on():
    result = _child("""
        import ml_dtypes
        x = m.np.ones((32, 32), ml_dtypes.float8_e4m3fn)
        m._run('triton:a100', m.fp8_dot, x, x)
        print('survived')
    """)
    assert result.returncode != 0
    assert "survived" not in result.stdout
    assert result.returncode < 0 or "LLVM" in result.stderr, (result.returncode, result.stderr[-2000:])
    assert "f8e4m3nv is only supported on compute capability >= 89" in result.stderr
    assert _run("triton:h100", add, _f32(8, 128), _f32(8, 128)).ok


@pytest.mark.compile
def test_second_compile_of_the_same_case_comes_from_the_cache():
    x = _f32(512, 256)
    first_start = time.perf_counter()
    first = _run("mosaic_tpu:v5p", matmul, x, x.T.copy(), bm=256, bk=128, bn=128)
    first_seconds = time.perf_counter() - first_start
    hits = COMPILE_CACHE.hits
    second = _run("mosaic_tpu:v5p", matmul, np.zeros_like(x), x.T.copy(), bm=256, bk=128, bn=128)
    assert COMPILE_CACHE.hits == hits + 1
    assert first.ok
    assert second.ok
    assert second.seconds < first_seconds / 10
    other = _run("mosaic_tpu:v5p", matmul, x, x.T.copy(), bm=128, bk=128, bn=128)
    assert COMPILE_CACHE.hits == hits + 1
    assert other.ok


def double_with_vjp(x, *, block):
    """``2x`` whose VJP is another Pallas kernel (``2g``): grad compiles both."""
    import jax

    @jax.custom_vjp
    def f(x):
        return double(x, block=block)

    f.defvjp(lambda x: (f(x), None), lambda _, g: (double(g, block=block),))
    return f(x)


@pytest.mark.compile
@pytest.mark.parametrize(("transform", "inputs"), [
    ("vmap", (np.stack([_f32(16, 256), 2 * _f32(16, 256), 3 * _f32(16, 256)]),)),
    # grad: the primal, one cotangent per float output, then the primal layout arange(1).
    ("grad", (_f32(16, 256), _f32(16, 256), np.arange(1, dtype=np.int32))),
])
def test_transformed_case_compiles_for_v5e(transform, inputs):
    case = Case(spec=_case(double_with_vjp, "mosaic_tpu:v5e", *inputs, block=(8, 128)).spec,
                config={"block": (8, 128)}, inputs=inputs, backend="mosaic_tpu:v5e", transform=transform)
    outcome, compiled = compile_case(case, family="mosaic_tpu", target="v5e")
    assert outcome.ok, outcome.error
    assert outcome.compiled_only
    # The executable takes the transform's extended inputs and returns its outputs:
    # vmap the batched double, grad the one gradient of the one float input.
    import jax

    assert [leaf.shape for leaf in jax.tree.leaves(compiled.out_info)] == [inputs[0].shape]
    assert CompiledBackend(family="mosaic_tpu", target="v5e").run(case).ok


def test_every_backend_has_every_member_of_the_protocol():
    from pallas_verify.backends import registry

    members = [m for m in dir(Backend) if not m.startswith("_")] + list(Backend.__annotations__)
    for backend in registry.resolve(None):
        assert isinstance(backend, Backend), backend.name
        missing = [m for m in members if not hasattr(backend, m)]
        assert missing == [], (backend.name, missing)
        assert isinstance(backend.reruns_shapes, bool)
        source = backend.interpret_source({})
        assert source is None if not backend.executes and ":" in backend.name else isinstance(source, str)
