"""Correct kernels whose float64 outputs cancel to near zero next to large terms, with bf16
outputs: the precision oracle must not call their float32 noise (many bf16 steps at a
near-zero output) a bug. Not mutants: nothing here is planted; the benchmark and
tests/quality check that they stay clean.
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
from reference_kernels.mutants.precision import BR, M, N, tiled_matmul

__all__ = ["CANCELLATION"]

K = 512
_EPS = 1e-5
_ROWS = pltpu.CompilerParams(dimension_semantics=("parallel",))


def _spec(name: str, kernel, reference, inputs, features) -> KernelSpec:
    return KernelSpec(name=name, kernel=kernel, reference=reference, configs=st.just({}), inputs=lambda _: inputs,
                      features=features, bitwise_stable=False)


def _cancelling_matmul_inputs() -> st.SearchStrategy:
    """float32 ``x = 1000 + N(0, 1)`` and ``y = [z; -z]``: each output is a sum of terms near
    1000 |z| that cancel to about sqrt(K) (some to near zero)."""
    def build(seed: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        z = rng.standard_normal((K // 2, N))
        return (1000.0 + rng.standard_normal((M, K))).astype(np.float32), np.concatenate([z, -z]).astype(
            np.float32)
    return st.builds(build, st.integers(0, 2**32 - 1))


def _layer_norm_offset_inputs() -> st.SearchStrategy:
    """bf16 rows ``1000 + N(0, 1)`` (a bf16 step there is 4): ``x - mean`` cancels."""
    def build(seed: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        x, g, b = 1000.0 + rng.standard_normal((16, 256)), rng.standard_normal((1, 256)), rng.standard_normal((1, 256))
        return tuple(a.astype(jnp.bfloat16) for a in (x, g, b))
    return st.builds(build, st.integers(0, 2**32 - 1))


def _layer_norm_ref(x, g, b):
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, axis=-1, keepdims=True)
    var = jnp.mean((x32 - mean) ** 2, axis=-1, keepdims=True)
    return ((x32 - mean) * jax.lax.rsqrt(var + _EPS) * g + b).astype(x.dtype)


def _layer_norm_f32_body(x_ref, g_ref, b_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    o_ref[...] = ((x - mean) * jax.lax.rsqrt(var + _EPS) * g_ref[...] + b_ref[...]).astype(o_ref.dtype)


def layer_norm_f32_stats(x, g, b):
    """Layer norm of bf16 rows computed in float32, a bf16 result, one block of rows per step."""
    rows, cols = x.shape
    return pl.pallas_call(
        _layer_norm_f32_body, grid=(rows // BR,),
        in_specs=[pl.BlockSpec((BR, cols), lambda i: (i, 0))] + [pl.BlockSpec((1, cols), lambda i: (0, 0))] * 2,
        out_specs=pl.BlockSpec((BR, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), compiler_params=_ROWS,
    )(x, g, b)


CANCELLATION = [
    _spec("cancelling_matmul_bf16_out", functools.partial(tiled_matmul, out_dtype=jnp.bfloat16),
          lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32).astype(jnp.bfloat16),
          _cancelling_matmul_inputs(), ("matmul", "bf16")),
    _spec("layer_norm_offset_bf16", layer_norm_f32_stats, _layer_norm_ref, _layer_norm_offset_inputs(),
          ("reduction", "normalization", "bf16")),
]
