"""pallas-forge (MIT; https://pypi.org/project/pallas-forge/): its tiled matmul, fused
SwiGLU and GeGLU, and fused RMSNorm + residual, each against the reference its docstring
states (``x @ w``; ``silu(x @ w_gate) * (x @ w_up)``; ``gelu(...)``) or ships
(``rmsnorm_reference``).

Every kernel pads ragged sizes up to its blocks and slices the result back, so the specs
draw sizes that are not multiples of the blocks, sizes of 1, and float32 and bfloat16.
The library's ``pallas_call_compat`` passes ``interpret=True`` on a host without TPUs;
the backend's forced mode overrides it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels._draw import normal, seeded
from reference_kernels.thirdparty._library import needs

__all__ = ["FORGE_GEGLU", "FORGE_MATMUL", "FORGE_RMSNORM_RESIDUAL", "FORGE_SWIGLU"]

DIST, PACKAGE = "pallas-forge", "pallas_forge"
DTYPES = (jnp.float32, jnp.bfloat16)


@needs(DIST, PACKAGE)
def matmul(x, w, *, block_m, block_k, block_n, **_sizes):
    from pallas_forge.kernels.matmul import tiled_matmul

    return tiled_matmul(x, w, block_m=block_m, block_k=block_k, block_n=block_n)


def matmul_reference(x, w, **_config):
    return x @ w  # the docstring: "Computes x @ w"


@st.composite
def _matmul_configs(draw):
    # The docstring's rules: block_m a multiple of 8, block_k and block_n of 128 (TPU).
    blocks = {"block_m": draw(st.sampled_from([8, 16])), "block_k": draw(st.sampled_from([128, 256])),
              "block_n": draw(st.sampled_from([128, 256]))}
    sizes = {axis: draw(st.sampled_from([1, 7, 8, 20, 130])) for axis in ("m", "k", "n")}
    return {**sizes, **blocks, "dtype": draw(st.sampled_from(DTYPES))}


def _matmul_inputs(c):
    return seeded(lambda rng: (normal(rng, (c["m"], c["k"]), c["dtype"]), normal(rng, (c["k"], c["n"]), c["dtype"])))


def _without_dtype(fn):
    def call(*arrays, dtype, **config):
        return fn(*arrays, **config)

    call.__wrapped__ = fn
    call.unavailable = getattr(fn, "unavailable", None)
    call.__name__ = call.__qualname__ = fn.__name__
    call.__module__ = fn.__module__
    return call


FORGE_MATMUL = pv.KernelSpec(
    name="forge_tiled_matmul",
    kernel=_without_dtype(matmul),
    reference=_without_dtype(matmul_reference),
    configs=_matmul_configs(),
    inputs=_matmul_inputs,
    features=("matmul", "accumulator", "ragged", "thirdparty"),
    bitwise_stable=False,
)


@needs(DIST, PACKAGE)
def swiglu(x, w_gate, w_up, *, block_m, block_n, **_sizes):
    from pallas_forge.kernels.swiglu import fused_swiglu

    return fused_swiglu(x, w_gate, w_up, block_m=block_m, block_n=block_n)


@needs(DIST, PACKAGE)
def geglu(x, w_gate, w_up, *, block_m, block_n, **_sizes):
    from pallas_forge.kernels.swiglu import fused_geglu

    return fused_geglu(x, w_gate, w_up, block_m=block_m, block_n=block_n)


def _glu_reference(activation):
    def reference(x, w_gate, w_up, **_config):
        gate = activation(jnp.dot(x, w_gate, preferred_element_type=jnp.float32))
        return (gate * jnp.dot(x, w_up, preferred_element_type=jnp.float32)).astype(x.dtype)

    return reference


swiglu_reference = _glu_reference(jax.nn.silu)  # "silu(x @ w_gate) * (x @ w_up)"
geglu_reference = _glu_reference(jax.nn.gelu)  # "gelu(x @ w_gate) * (x @ w_up)"


@st.composite
def _glu_configs(draw):
    return {"batch": draw(st.sampled_from([1, 2])), "seq": draw(st.sampled_from([1, 5, 8, 19])),
            "k": draw(st.sampled_from([1, 8, 64])), "n": draw(st.sampled_from([1, 7, 128, 200])),
            "block_m": draw(st.sampled_from([8, 16])), "block_n": draw(st.sampled_from([128, 256])),
            "dtype": draw(st.sampled_from(DTYPES))}


def _glu_inputs(c):
    return seeded(lambda rng: (normal(rng, (c["batch"], c["seq"], c["k"]), c["dtype"]),
                               normal(rng, (c["k"], c["n"]), c["dtype"]), normal(rng, (c["k"], c["n"]), c["dtype"])))


FORGE_SWIGLU = pv.KernelSpec(
    name="forge_fused_swiglu",
    kernel=_without_dtype(swiglu),
    reference=_without_dtype(swiglu_reference),
    configs=_glu_configs(),
    inputs=_glu_inputs,
    features=("matmul", "elementwise", "ragged", "thirdparty"),
    bitwise_stable=False,
)

FORGE_GEGLU = pv.KernelSpec(
    name="forge_fused_geglu",
    kernel=_without_dtype(geglu),
    reference=_without_dtype(geglu_reference),
    configs=_glu_configs(),
    inputs=_glu_inputs,
    features=("matmul", "elementwise", "ragged", "thirdparty"),
    bitwise_stable=False,
)


@needs(DIST, PACKAGE)
def rmsnorm_residual(x, residual, weight, *, eps, **_sizes):
    from pallas_forge.kernels.rmsnorm import fused_rmsnorm_residual

    return fused_rmsnorm_residual(x, residual, weight, eps=eps)


def rmsnorm_residual_reference(x, residual, weight, *, eps, **_sizes):
    from pallas_forge.kernels.rmsnorm import rmsnorm_reference

    new_residual = x + residual  # the docstring: new_residual = x + residual
    return rmsnorm_reference(new_residual, weight, eps=eps), new_residual


@st.composite
def _rmsnorm_configs(draw):
    return {"tokens": draw(st.sampled_from([1, 3, 8, 13, 24])), "dim": draw(st.sampled_from([1, 8, 128, 200])),
            "eps": draw(st.sampled_from([1e-6, 1e-5])), "dtype": draw(st.sampled_from(DTYPES))}


def _rmsnorm_inputs(c):
    shape = (c["tokens"], c["dim"])
    return seeded(lambda rng: (normal(rng, shape, c["dtype"]), normal(rng, shape, c["dtype"]),
                               normal(rng, (c["dim"],), c["dtype"])))


FORGE_RMSNORM_RESIDUAL = pv.KernelSpec(
    name="forge_fused_rmsnorm_residual",
    kernel=_without_dtype(rmsnorm_residual),
    reference=_without_dtype(rmsnorm_residual_reference),
    configs=_rmsnorm_configs(),
    inputs=_rmsnorm_inputs,
    features=("norm", "reduction", "ragged", "thirdparty"),
)
