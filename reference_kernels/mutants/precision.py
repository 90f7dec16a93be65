"""Mutants of numerical precision: bugs whose outputs are close but not close enough.

Each is judged by the default precision oracle (no tolerance override): the kernel's error
against a float64 ground truth must stay within a few times the reference's own error.
Each twin is the textbook kernel, clean with the default settings.
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


def _tiled_body(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(acc_ref.dtype)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _out():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def tiled_matmul(x, y, *, acc_dtype=jnp.float32):
    """bf16 ``x @ y`` with an f32 result, the K axis in blocks of 128 summed in a scratch."""
    (m, k), (_, n) = x.shape, y.shape
    return pl.pallas_call(
        _tiled_body,
        grid=(1, 1, k // BK),
        in_specs=[pl.BlockSpec((m, BK), lambda i, j, kk: (i, kk)), pl.BlockSpec((BK, n), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((m, n), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
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


MUTANTS = [
    Mutant(spec=bf16_acc_spec, twin=tiled_matmul_spec, expects=("mismatch",),
           bug="the matmul accumulator scratch is bf16, so each k-block's partial sum is rounded to 8 bits"),
    Mutant(spec=one_pass_variance_spec, twin=normalize_spec, expects=("mismatch",),
           bug="the variance is E[x^2] - E[x]^2, which cancels catastrophically when the mean is large"),
    Mutant(spec=softmax_overflow_spec, twin=softmax_spec, expects=("mismatch",),
           bug="softmax skips the max subtraction, so exp overflows to inf and rows become NaN"),
    Mutant(spec=bf16_mean_spec, twin=row_variance_spec, expects=("mismatch",),
           bug="the row mean is downcast to bf16 before the second reduction uses it"),
]
