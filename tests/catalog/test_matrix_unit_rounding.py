"""bf16 and f16 attention against references that keep their softmax in float32.

FlashAttention-style kernels round their softmax weights to the value dtype before
``p @ v``, as a matrix unit's inputs are rounded; a natural reference does not. The
precision oracle counts that rounding as the reference's own noise
(``reference.Truth.dots``) for a kernel whose body makes it (``grid.dots``): jax's decode
and flash attention pass against such references, and each would fail without it on the
same example; the flash-attention precision mutant makes no such rounding, so it gets no
such allowance.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from catalog_interpreters import INTERPRETERS, forced, ground_truth, reference, run
from jax.experimental import pallas as pl

from pallas_verify.backends.interpreters import trace_context
from pallas_verify.grid.check import grid_mappings
from pallas_verify.oracles.differential import compare_outputs
from pallas_verify.reference import ground_truth as truth_of
from reference_kernels._draw import normal
from reference_kernels.mutants import precision
from reference_kernels.upstream import gpu_decode, tpu_ops


def flash_reference(q, k, v, *, causal, sm_scale, **_blocks):
    """softmax(q k^T * sm_scale) v, the softmax in float32, cast to q's dtype at the end."""
    s = jnp.einsum("bhqd,bhkd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) * sm_scale
    if causal:
        n = q.shape[2]
        s = jnp.where(jnp.arange(n)[:, None] >= jnp.arange(n)[None, :], s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v.astype(jnp.float32)).astype(q.dtype)


_FLASH_CONFIG = {"causal": False, "sm_scale": 1.0, "block_q": 128, "block_k_major": 128, "block_k": 128,
                 "block_q_major_dkv": 128, "block_k_major_dkv": 128, "block_k_dkv": 128, "block_q_dkv": 128,
                 "block_k_major_dq": 128, "block_k_dq": 128, "block_q_dq": 128}
_DECODE_CONFIG = {"k_splits": 1, "block_k": 32}


def _example(name: str, dtype: str) -> tuple:
    rng = np.random.default_rng(0)
    if name == "flash":
        arrays = tuple(normal(rng, (1, 2, 128, 64), jnp.dtype(dtype)) for _ in range(3))
        # (built here: a module-level KernelSpec would be collected by the plugin)
        flash = dataclasses.replace(tpu_ops.TPU_FLASH_ATTENTION, reference=flash_reference, transforms=())
        return flash, _FLASH_CONFIG, arrays, "tpu"
    q = normal(rng, (1, 4, 64), jnp.dtype(dtype))
    k, v = (normal(rng, (1, 256, 64), jnp.dtype(dtype)) for _ in range(2))
    return gpu_decode.GPU_DECODE_MQA, _DECODE_CONFIG, (q, k, v), "interpret"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ["flash", "decode"])
def test_attention_rounding_its_weights_passes_a_float32_softmax_reference(name, dtype):
    spec, config, inputs, interpreter = _example(name, dtype)
    if name == "decode":
        config = {"batch": 1, "seq": 256, "kv_heads": 1, "heads": 4, "d": 64, "dtype": dtype, "lengths": "none",
                  **config}
    assert _dot_roundings(spec, config, inputs) == [(dtype,)]  # the kernel rounds p to the value dtype itself
    got = run(spec, next(i for i in INTERPRETERS if i.name == interpreter), config, inputs)
    truth = ground_truth(spec, config, inputs)
    assert truth.dots is not None  # bf16 or f16 inputs and a dot: the matrix unit's rounding is measured
    paths = ["out"]
    judged = compare_outputs(paths, got, reference(spec, config, inputs), None, truth)
    assert all(c.ok for c in judged), [c.describe() for c in judged]
    without = compare_outputs(paths, got, reference(spec, config, inputs), None,
                              dataclasses.replace(truth, dots=None))
    assert not all(c.ok for c in without)  # the weights' rounding is what the rule allows


def _dot_roundings(spec, config, inputs) -> list[tuple[str, ...]]:
    with trace_context(spec.platforms):
        return [call.dot_roundings for call in grid_mappings(spec.kernel, inputs, config)]


def test_a_kernel_that_keeps_its_dot_operands_wide_gets_no_rounding_allowance():
    rng = np.random.default_rng(0)
    inputs = tuple(normal(rng, (precision.SEQ, precision.HEAD), jnp.bfloat16) for _ in range(3))
    for spec in (precision.flash_forward_spec, precision.bf16_stats_spec):  # p @ v in float32
        # no narrow rounding; its float32 dots are the TF32 fact, which a truth of bf16
        # inputs never measures (reference.Truth.rounding is then "bfloat16")
        assert _dot_roundings(spec, {}, inputs) == [("tf32",)]


def test_the_dot_shadow_rounds_only_dot_operands_and_only_for_narrow_inputs():
    def attend(q, k, v):
        p = jax.nn.softmax(q.astype(jnp.float32) @ k.astype(jnp.float32).T, axis=-1)
        return (p @ v.astype(jnp.float32)).astype(q.dtype)

    rng = np.random.default_rng(1)
    narrow = tuple(normal(rng, (8, 16), jnp.bfloat16) for _ in range(3))
    truth = truth_of(attend, narrow)
    rounded_p = jax.nn.softmax(np.asarray(narrow[0], np.float64) @ np.asarray(narrow[1], np.float64).T, axis=-1)
    p16 = np.asarray(np.asarray(rounded_p).astype(jnp.bfloat16), np.float64)
    np.testing.assert_allclose(truth.dots[0], p16 @ np.asarray(narrow[2], np.float64), rtol=1e-12)
    assert not np.array_equal(truth.dots[0], truth.outputs[0])
    wide = tuple(np.asarray(x, np.float32) for x in narrow)
    assert truth_of(attend, wide).dots is None  # float32 inputs: nothing to round to
    assert truth_of(lambda x: (x.astype(jnp.float32) * 2).astype(x.dtype), narrow[:1]).dots is None  # no dot


# ---------------------------------------------------------------- TF32 on NVIDIA GPUs

def _tf32(x):
    return jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=10)


def _matmul_kernel(*, precision=None, operands=lambda x: x):
    """A one-block float32 matmul; ``operands`` is applied to both before the dot (a GPU's
    matrix unit at default precision takes them in TF32: ``_tf32`` makes that rounding on
    the CPU)."""
    def body(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(operands(x_ref[...]), operands(y_ref[...]), precision=precision)

    def kernel(x, y):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype))(x, y)

    return kernel


@pytest.mark.parametrize(("precision", "dtype", "expected"), [
    (None, jnp.float32, [("tf32",)]), (jax.lax.Precision.DEFAULT, jnp.float32, [("tf32",)]),
    (jax.lax.Precision.HIGHEST, jnp.float32, [()]), (jax.lax.Precision.HIGH, jnp.float32, [()]),
    (None, jnp.bfloat16, [()])])
def test_a_float32_dot_at_default_precision_is_the_tf32_fact(precision, dtype, expected):
    rng = np.random.default_rng(2)
    inputs = tuple(normal(rng, (16, 128), dtype) for _ in range(2))
    inputs = (inputs[0], inputs[1].T)
    spec = dataclasses.replace(gpu_decode.GPU_DECODE_MQA, kernel=_matmul_kernel(precision=precision))
    assert _dot_roundings(spec, {}, inputs) == expected


def test_on_a_gpu_taking_float32_dots_in_tf32_their_rounding_is_allowed_and_only_there(monkeypatch):
    from pallas_verify import _jax_compat

    rng = np.random.default_rng(3)
    x, y = normal(rng, (64, 256), jnp.float32), normal(rng, (256, 64), jnp.float32)
    kernel = _matmul_kernel(operands=_tf32)  # what the GPU's matrix unit computes at default precision
    with forced(next(i for i in INTERPRETERS if i.name == "interpret")):
        got = [np.asarray(kernel(x, y))]
    expected = [np.asarray(jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST))]

    def matmul(a, b):
        return a @ b

    monkeypatch.setattr(_jax_compat, "dots_in_tf32", lambda: False)  # a CPU: float32 dots are float32
    assert truth_of(matmul, (x, y)).dots is None
    monkeypatch.setattr(_jax_compat, "dots_in_tf32", lambda: True)

    def matmul_on_gpu(a, b):  # another reference: the compiled truth is kept per reference
        return a @ b

    truth = truth_of(matmul_on_gpu, (x, y))
    assert truth.rounding == "tf32"
    tf32_x, tf32_y = (np.asarray(_tf32(a), np.float64) for a in (x, y))  # exact in float32
    np.testing.assert_allclose(truth.dots[0], tf32_x @ tf32_y, rtol=1e-12)
    judged = compare_outputs(["out"], got, expected, None, truth)
    assert all(c.ok for c in judged), [c.describe() for c in judged]
    without = compare_outputs(["out"], got, expected, None, dataclasses.replace(truth, dots=None))
    assert not all(c.ok for c in without)  # TF32's rounding is what the rule allows
    planted = [got[0] * (1 + 2 ** -9)]  # a kernel off by more than TF32 costs is still wrong
    assert not all(c.ok for c in compare_outputs(["out"], planted, expected, None, truth))


@pytest.mark.compile
def test_the_rounded_dot_truth_keeps_its_rounding_when_compiled_for_a_gpu():
    """XLA's GPU compiler drops a float64 -> bfloat16 -> float64 round trip (excess
    precision); on an H200 the rounded-dot truth then equalled the plain one and jax's
    bf16 decode attention failed for want of its allowance. The barrier keeps it."""
    from pallas_verify.backends.lowering import _abstract_args, _mesh, _use
    from pallas_verify.matrix_units import rounded

    mesh, abstract_mesh = _mesh("triton", "h100")
    x = np.zeros((64, 64), np.float64)

    def optimized_hlo(rounding):
        with jax.enable_x64(True), _use(abstract_mesh):
            traced = jax.jit(lambda a, b: rounding(a) @ b).trace(*_abstract_args((x, x), mesh))
            return traced.lower(lowering_platforms=("cuda",)).compile().as_text()

    assert "bf16" in optimized_hlo(lambda a: rounded(a, np.dtype(jnp.bfloat16)))
    assert "bf16" not in optimized_hlo(lambda a: a.astype(jnp.bfloat16).astype(a.dtype))  # what it guards against
