"""Mutants of numerical precision: bugs whose outputs are close but not close enough.

Each is judged by the default precision oracle (no tolerance override): the kernel's error
against a float64 ground truth must stay within a few times the reference's own error;
for a bf16 or f16 output, per element, within a few of the dtype's steps at the float64
value. Each twin is the textbook kernel, clean with the default settings. The first four
have float32 outputs; the rest bf16 or f16 outputs, where the output's own rounding hides
most of the error. ``cancellation.CANCELLATION`` holds correct kernels whose float64 outputs
are near zero next to large terms: they must stay clean too.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant
from reference_kernels.mutants._inputs import seeded_arrays

_NO_CONFIG = st.just({})
_ROWS = pltpu.CompilerParams(dimension_semantics=("parallel",))


def _offset_normal(shape: tuple[int, ...], *, offset: float, scale: float = 1.0) -> st.SearchStrategy:
    """float32 ``offset + scale * N(0, 1)`` from one drawn seed (shrinks towards seed 0)."""
    def build(seed: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        return ((offset + scale * rng.standard_normal(shape)).astype(np.float32),)
    return st.builds(build, st.integers(0, 2**32 - 1))


def _spec(name: str, kernel, reference, inputs, features) -> KernelSpec:
    return KernelSpec(name=name, kernel=kernel, reference=reference, configs=_NO_CONFIG, inputs=lambda _: inputs,
                      features=features, bitwise_stable=False)


# --- an accumulator kept in bf16 across k-blocks ------------------------------------

M, N, K, BK = 16, 128, 1024, 128


def _tiled_body(x_ref, y_ref, o_ref, acc_ref):  # also the narrow-output matmuls below
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(acc_ref.dtype)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _out():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def tiled_matmul(x, y, *, acc_dtype=jnp.float32, out_dtype=jnp.float32):
    """``x @ y`` (float32 result by default), the K axis in blocks of 128 summed in a scratch."""
    (m, k), (_, n) = x.shape, y.shape
    return pl.pallas_call(
        _tiled_body,
        grid=(1, 1, k // BK),
        in_specs=[pl.BlockSpec((m, BK), lambda i, j, kk: (i, kk)), pl.BlockSpec((BK, n), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((m, n), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), out_dtype),
        scratch_shapes=[pltpu.VMEM((m, n), acc_dtype)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def _matmul_ref(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


_MATMUL_INPUTS = seeded_arrays([(M, K), (K, N)], dtype=jnp.bfloat16, low=0.0)
tiled_matmul_spec = _spec("tiled_matmul_f32_acc", tiled_matmul, _matmul_ref, _MATMUL_INPUTS, ("matmul", "bf16"))
bf16_acc_spec = _spec("bf16_acc_across_k", functools.partial(tiled_matmul, acc_dtype=jnp.bfloat16), _matmul_ref,
                      _MATMUL_INPUTS, ("matmul", "bf16"))


# --- variance as E[x^2] - E[x]^2 --------------------------------------------------------

ROWS, COLS, BR = 16, 512, 8
_EPS = 1e-5


def _norm_body(x_ref, o_ref, *, one_pass: bool):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    if one_pass:
        var = jnp.mean(x * x, axis=-1, keepdims=True) - mean * mean
    else:
        var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    o_ref[...] = (x - mean) * jax.lax.rsqrt(var + _EPS)


def _rows(body, x, out_cols: int):
    rows, cols = x.shape
    return pl.pallas_call(
        body, grid=(rows // BR,), in_specs=[pl.BlockSpec((BR, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BR, out_cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, out_cols), x.dtype), compiler_params=_ROWS,
    )(x)


def normalize(x, *, one_pass: bool = False):
    """Each row standardised: (x - mean) / sqrt(var + eps), one block of whole rows per step."""
    return _rows(functools.partial(_norm_body, one_pass=one_pass), x, x.shape[1])


def _normalize_ref(x):
    return (x - jnp.mean(x, axis=-1, keepdims=True)) / jnp.sqrt(jnp.var(x, axis=-1, keepdims=True) + _EPS)


# Mean 300 next to a spread of 1: E[x^2] ~ 9e4 cancels down to a variance of 1.
_NORM_INPUTS = _offset_normal((ROWS, COLS), offset=300.0)
normalize_spec = _spec("normalize_two_pass", normalize, _normalize_ref, _NORM_INPUTS, ("reduction", "normalization"))
one_pass_variance_spec = _spec("one_pass_variance", functools.partial(normalize, one_pass=True), _normalize_ref,
                               _NORM_INPUTS, ("reduction", "normalization"))


# --- softmax without the max subtraction ------------------------------------------------

def _softmax_body(x_ref, o_ref, *, stable: bool):
    x = x_ref[...]
    if stable:
        x = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x)
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def softmax(x, *, stable: bool = True):
    """Softmax over each row, one block of whole rows per step."""
    return _rows(functools.partial(_softmax_body, stable=stable), x, x.shape[1])


def _softmax_ref(x):
    return jax.nn.softmax(x, axis=-1)


# Logits around 80 +- 8: exp overflows float32 (above 88.7) in some rows.
_SOFTMAX_INPUTS = _offset_normal((ROWS, COLS), offset=80.0, scale=8.0)
softmax_spec = _spec("softmax_max_subtracted", softmax, _softmax_ref, _SOFTMAX_INPUTS, ("reduction", "normalization"))
softmax_overflow_spec = _spec("softmax_without_max", functools.partial(softmax, stable=False), _softmax_ref,
                              _SOFTMAX_INPUTS, ("reduction", "normalization"))


# --- an f32 intermediate downcast to bf16 between two reductions ------------------------

def _variance_body(x_ref, o_ref, *, mean_dtype):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True).astype(mean_dtype).astype(jnp.float32)
    o_ref[...] = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)


def row_variance(x, *, mean_dtype=jnp.float32):
    """Variance of each row, shape (rows, 1): a mean, then the mean squared deviation."""
    return _rows(functools.partial(_variance_body, mean_dtype=mean_dtype), x, 1)


def _row_variance_ref(x):
    return jnp.var(x, axis=-1, keepdims=True)


_VARIANCE_INPUTS = _offset_normal((ROWS, COLS), offset=10.0)
row_variance_spec = _spec("row_variance", row_variance, _row_variance_ref, _VARIANCE_INPUTS, ("reduction",))
bf16_mean_spec = _spec("bf16_between_reductions", functools.partial(row_variance, mean_dtype=jnp.bfloat16),
                       _row_variance_ref, _VARIANCE_INPUTS, ("reduction", "bf16"))


# --- narrow outputs: accumulators kept in bf16 or f16 across k-blocks --------------------

def _narrow_matmul_ref(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


# Four k-blocks of 128; standard-normal inputs, so partial sums often exceed the final
# value (an output that cancels is where an 8- or 11-bit accumulator shows most).
_NARROW_K = 512


def _narrow_matmul_specs(dtype, name: str) -> tuple[KernelSpec, KernelSpec]:
    inputs = seeded_arrays([(M, _NARROW_K), (_NARROW_K, N)], dtype=dtype)
    kernel = functools.partial(tiled_matmul, out_dtype=dtype)
    features = ("matmul", {"bfloat16": "bf16", "float16": "f16"}[jnp.dtype(dtype).name])
    twin = _spec(f"tiled_matmul_{jnp.dtype(dtype).name}_out", kernel, _narrow_matmul_ref, inputs, features)
    return _spec(name, functools.partial(kernel, acc_dtype=dtype), _narrow_matmul_ref, inputs, features), twin


bf16_out_acc_spec, tiled_matmul_bf16_out_spec = _narrow_matmul_specs(jnp.bfloat16, "bf16_acc_bf16_out")
f16_acc_spec, tiled_matmul_f16_out_spec = _narrow_matmul_specs(jnp.float16, "f16_acc_f16_out")


# --- exp in bf16 inside a softmax with a bf16 output ----------------------------------

def _narrow_softmax_body(x_ref, o_ref, *, exp_dtype):
    s = x_ref[...] - jnp.max(x_ref[...], axis=-1, keepdims=True)
    e = jnp.exp(s.astype(exp_dtype)).astype(jnp.float32)
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def narrow_softmax(x, *, exp_dtype=jnp.float32):
    """Softmax of float32 logits over each row, a bf16 result."""
    rows, cols = x.shape
    return pl.pallas_call(
        functools.partial(_narrow_softmax_body, exp_dtype=exp_dtype), grid=(rows // BR,),
        in_specs=[pl.BlockSpec((BR, cols), lambda i: (i, 0))], out_specs=pl.BlockSpec((BR, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.bfloat16), compiler_params=_ROWS,
    )(x)


def _narrow_softmax_ref(x):
    return jax.nn.softmax(x, axis=-1).astype(jnp.bfloat16)


# Logits of spread 8: exponents down to about -50, where bf16's 8 bits of the exponent's
# argument cost several percent of the value.
_SOFTMAX_BF16_INPUTS = _offset_normal((BR * 2, 256), offset=0.0, scale=8.0)
softmax_bf16_out_spec = _spec("softmax_f32_exp_bf16_out", narrow_softmax, _narrow_softmax_ref,
                              _SOFTMAX_BF16_INPUTS, ("reduction", "normalization", "bf16"))
bf16_exp_spec = _spec("bf16_exp_in_softmax", functools.partial(narrow_softmax, exp_dtype=jnp.bfloat16),
                      _narrow_softmax_ref, _SOFTMAX_BF16_INPUTS, ("reduction", "normalization", "bf16"))


# --- a bf16 running max and sum in a flash-attention forward ----------------------------

SEQ, HEAD, BKV = 128, 64, 32


def _flash_body(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32)
    m_prev = m_ref[...].astype(jnp.float32)
    m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
    p = jnp.exp(s - m_new)
    alpha = jnp.exp(m_prev - m_new)
    l_ref[...] = (alpha * l_ref[...].astype(jnp.float32) + jnp.sum(p, axis=1, keepdims=True)).astype(l_ref.dtype)
    acc_ref[...] = alpha * acc_ref[...] + jnp.dot(p, v_ref[...].astype(jnp.float32))
    m_ref[...] = m_new.astype(m_ref.dtype)

    @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def flash_forward(q, k, v, *, stats_dtype=jnp.float32):
    """softmax(q k^T) v for one head of bf16 (seq, d) inputs, KV in four blocks: the running
    max and sum of the online softmax are kept in ``stats_dtype`` scratch."""
    seq, d = q.shape
    return pl.pallas_call(
        _flash_body, grid=(1, seq // BKV),
        in_specs=[pl.BlockSpec((seq, d), lambda i, j: (i, 0)), pl.BlockSpec((BKV, d), lambda i, j: (j, 0)),
                  pl.BlockSpec((BKV, d), lambda i, j: (j, 0))],
        out_specs=pl.BlockSpec((seq, d), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((seq, 1), stats_dtype), pltpu.VMEM((seq, 1), stats_dtype),
                        pltpu.VMEM((seq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(q, k, v)


def _attention_ref(q, k, v):
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.dot(p, v.astype(jnp.float32)).astype(q.dtype)


# Scores of spread 8 (unscaled d = 64): running maxima near 20, where a bf16 step is 1/8.
_FLASH_INPUTS = seeded_arrays([(SEQ, HEAD)] * 3, dtype=jnp.bfloat16)
flash_forward_spec = _spec("flash_forward_f32_stats", flash_forward, _attention_ref, _FLASH_INPUTS,
                           ("attention", "online_softmax", "bf16"))
bf16_stats_spec = _spec("bf16_running_max_sum", functools.partial(flash_forward, stats_dtype=jnp.bfloat16),
                        _attention_ref, _FLASH_INPUTS, ("attention", "online_softmax", "bf16"))


# --- a residual add after a premature cast to bf16 ----------------------------------------

def _residual_body(x_ref, w_ref, o_ref, *, early: bool):
    h = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
    if early:
        o_ref[...] = x_ref[...] + h.astype(o_ref.dtype)
    else:
        o_ref[...] = (x_ref[...].astype(jnp.float32) + h).astype(o_ref.dtype)


def residual(x, w, *, early: bool = False):
    """``x + x @ w`` for bf16 ``x`` and ``w``, a bf16 result, one block of rows per step."""
    rows, d = x.shape
    return pl.pallas_call(
        functools.partial(_residual_body, early=early), grid=(rows // BR,),
        in_specs=[pl.BlockSpec((BR, d), lambda i: (i, 0)), pl.BlockSpec((d, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((BR, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), compiler_params=_ROWS,
    )(x, w)


def _residual_ref(x, w):
    return (x.astype(jnp.float32) + jnp.dot(x, w, preferred_element_type=jnp.float32)).astype(x.dtype)


def _residual_inputs(rows: int, d: int) -> st.SearchStrategy:
    """bf16 ``x`` and ``w = -I + 0.05 N(0, 1)``: the update nearly cancels the residual."""
    def build(seed: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((rows, d))
        w = -np.eye(d) + 0.05 * rng.standard_normal((d, d))
        return x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
    return st.builds(build, st.integers(0, 2**32 - 1))


_RESIDUAL_INPUTS = _residual_inputs(BR * 2, 128)
residual_spec = _spec("residual_f32_add", residual, _residual_ref, _RESIDUAL_INPUTS, ("matmul", "bf16"))
early_cast_spec = _spec("residual_after_bf16_cast", functools.partial(residual, early=True), _residual_ref,
                        _RESIDUAL_INPUTS, ("matmul", "bf16"))


MUTANTS = [
    Mutant(spec=bf16_acc_spec, twin=tiled_matmul_spec, expects=("mismatch",),
           bug="the matmul accumulator scratch is bf16, so each k-block's partial sum is rounded to 8 bits"),
    Mutant(spec=one_pass_variance_spec, twin=normalize_spec, expects=("mismatch",),
           bug="the variance is E[x^2] - E[x]^2, which cancels catastrophically when the mean is large"),
    Mutant(spec=softmax_overflow_spec, twin=softmax_spec, expects=("mismatch",),
           bug="softmax skips the max subtraction, so exp overflows to inf and rows become NaN"),
    Mutant(spec=bf16_mean_spec, twin=row_variance_spec, expects=("mismatch",),
           bug="the row mean is downcast to bf16 before the second reduction uses it"),
    Mutant(spec=bf16_out_acc_spec, twin=tiled_matmul_bf16_out_spec, expects=("mismatch",),
           bug="a bf16-output matmul keeps its accumulator in bf16 across four k-blocks"),
    Mutant(spec=f16_acc_spec, twin=tiled_matmul_f16_out_spec, expects=("mismatch",),
           bug="an f16-output matmul keeps its accumulator in f16 across four k-blocks"),
    Mutant(spec=bf16_exp_spec, twin=softmax_bf16_out_spec, expects=("mismatch",),
           bug="a softmax with a bf16 output takes exp of logits rounded to bf16"),
    Mutant(spec=bf16_stats_spec, twin=flash_forward_spec, expects=("mismatch",),
           bug="a flash-attention forward keeps its running max and sum in bf16 scratch"),
    Mutant(spec=early_cast_spec, twin=residual_spec, expects=("mismatch",),
           bug="the residual add comes after the update is cast to bf16, so its rounding survives the cancellation"),
]
