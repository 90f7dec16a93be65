"""tokamax (Apache-2.0; https://pypi.org/project/tokamax/): TPU Pallas kernels of its ops,
each against the op's own XLA implementation (the ``xla`` implementation its API falls
back to, which its tests use as the numerics oracle).

The Pallas implementations refuse to run off a TPU (``Op.supported_on``); the specs build
them with ``bypass_device_check=True`` (the option tokamax has for cross-compiling) and
pass the config (block sizes) drawn by the spec, within the rules each config class
documents. Each spec draws the edges its kernel handles: partial last blocks, sizes of 1,
several dtypes, and for the router, ties and non-finite scores.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels.thirdparty._library import needs

__all__ = ["TOKAMAX_DEEPSEEK_QNORM_ROPE", "TOKAMAX_DEEPSEEK_ROPE", "TOKAMAX_DEEPSEEK_ROPE_QUANT", "TOKAMAX_RAGGED_DOT",
           "TOKAMAX_ROUTER_TOPK"]

DIST, PACKAGE = "tokamax", "tokamax"


@needs(DIST, PACKAGE)
def router_topk(scores, *, k, block_rows, **_sizes):
    from tokamax._src.ops.router_topk import pallas_mosaic_tpu as tpu

    return tuple(tpu.PallasTpuRouterTopK(config=tpu.Config(block_rows=block_rows), bypass_device_check=True)(scores, k))


def router_topk_reference(scores, *, k, **_config):
    from tokamax._src.ops.router_topk import base

    return tuple(base.RouterTopK()(scores, k))


@st.composite
def _router_configs(draw):
    tokens = draw(st.sampled_from([1, 5, 8, 20, 64]))
    # Config.block_rows: capped at the tokens; below them a multiple of 8 that need not
    # divide them (the last block is partial).
    block_rows = draw(st.sampled_from(sorted({tokens, *(b for b in (8, 16) if b < tokens)})))
    experts = draw(st.sampled_from([1, 3, 8, 64, 130]))
    return {"tokens": tokens, "experts": experts, "k": draw(st.integers(1, min(experts, 4))),
            "block_rows": block_rows, "dtype": draw(st.sampled_from(["float32", "bfloat16"]))}


def _router_inputs(c):
    shape = (c["tokens"], c["experts"])

    def make(seed_and_edges):
        seed, ties, edges = seed_and_edges
        rng = np.random.default_rng(seed)
        # ties: scores from a few levels, so a row's maximum repeats (the lowest id wins)
        scores = rng.integers(0, 3, shape).astype(np.float32) if ties else rng.standard_normal(shape, np.float32)
        for (row, col), value in zip(edges, (-np.inf, np.nan, -np.finfo(np.float32).max, np.inf), strict=False):
            scores[row % shape[0], col % shape[1]] = value
        return (scores.astype(jnp.dtype(c["dtype"])),)

    cells = st.tuples(st.integers(0, 2**16), st.integers(0, 2**16))
    return st.tuples(st.integers(0, 2**32 - 1), st.booleans(), st.lists(cells, max_size=4)).map(make)


TOKAMAX_ROUTER_TOPK = pv.KernelSpec(
    name="tokamax_router_topk",
    kernel=router_topk,
    reference=router_topk_reference,
    configs=_router_configs(),
    inputs=_router_inputs,
    features=("reduction", "topk", "ragged", "thirdparty"),
)


@needs(DIST, PACKAGE)
def deepseek_rope(x, positions, cos_sin_cache, *, mode, inverse, tile_n, **_sizes):
    from tokamax._src.ops.deepseek_rope import pallas_mosaic_tpu as tpu

    op = tpu.PallasTpuDeepseekRope(config=tpu.Config(tile_n=tile_n), bypass_device_check=True)
    return _rope_out(op(x, positions, cos_sin_cache, mode=mode, inverse=inverse))


def deepseek_rope_reference(x, positions, cos_sin_cache, *, mode, inverse, **_config):
    from tokamax._src.ops.deepseek_rope import base

    return _rope_out(base.DeepseekRope()(x, positions, cos_sin_cache, mode=mode, inverse=inverse))


def _rope_out(out):
    # rope_quant returns (q, scales); q in float8 is compared as float32 (its values are exact there)
    return tuple(o.astype(jnp.float32) if o.dtype == jnp.float8_e4m3fn else o for o in out) if isinstance(
        out, tuple) else out


def _rope_configs(mode):
    @st.composite
    def configs(draw):
        tokens = draw(st.sampled_from([1, 6, 16]))
        # Config.tile_n divides the tokens; head_dim a multiple of 128 (qnorm_rope: not 128,
        # which the class docstring says fails to lower; rope_quant: exactly 128);
        # qnorm_rope needs heads (rank 3).
        head_dim = 128 if mode == "rope_quant" else draw(st.sampled_from([256] if mode == "qnorm_rope" else [128, 256]))
        heads = draw(st.sampled_from([1, 3])) if mode == "qnorm_rope" else draw(st.sampled_from([None, 1, 3]))
        if mode == "rope_quant" and heads is None:
            # rank 2: a tile_n not a multiple of 128 raises (the class docstring)
            tokens = draw(st.sampled_from([128, 256]))
            tiles = [128, tokens]
        else:
            tiles = [d for d in range(1, tokens + 1) if tokens % d == 0]
        return {"mode": mode, "tokens": tokens, "heads": heads, "head_dim": head_dim,
                "rotary_dim": draw(st.sampled_from([2, 64, 128])), "max_pos": draw(st.sampled_from([1, 40])),
                "tile_n": draw(st.sampled_from(tiles)), "inverse": draw(st.booleans()),
                "dtype": draw(st.sampled_from(["float32", "bfloat16"]))}

    return configs()


def _rope_inputs(c):
    shape = (c["tokens"], c["head_dim"]) if c["heads"] is None else (c["tokens"], c["heads"], c["head_dim"])

    def make(seed):
        rng = np.random.default_rng(seed)
        angles = rng.uniform(0, 2 * np.pi, (c["max_pos"], c["rotary_dim"] // 2)).astype(np.float32)
        cache = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
        positions = rng.integers(0, c["max_pos"], (c["tokens"],)).astype(np.int32)
        return rng.standard_normal(shape, np.float32).astype(jnp.dtype(c["dtype"])), positions, cache

    return st.integers(0, 2**32 - 1).map(make)


def _rope_spec(mode, features):
    return pv.KernelSpec(
        name=f"tokamax_deepseek_{mode}",
        kernel=deepseek_rope,
        reference=deepseek_rope_reference,
        configs=_rope_configs(mode),
        inputs=_rope_inputs,
        features=(*features, "gather", "thirdparty"),
    )


# Three Pallas kernels of tokamax's DeepSeek-V4 RoPE: the rotation, RMSNorm then the
# rotation, and the rotation then per-row float8 quantization.
TOKAMAX_DEEPSEEK_ROPE = _rope_spec("rope", ("elementwise",))
TOKAMAX_DEEPSEEK_QNORM_ROPE = _rope_spec("qnorm_rope", ("norm", "reduction"))
TOKAMAX_DEEPSEEK_ROPE_QUANT = _rope_spec("rope_quant", ("quantize", "reduction"))


@needs(DIST, PACKAGE)
def ragged_dot(lhs, rhs, group_sizes, *, tile_m, tile_k, tile_n, **_sizes):
    from tokamax._src.ops.ragged_dot import pallas_mosaic_tpu as tpu

    op = tpu.PallasMosaicTpuRaggedDot(config=tpu.Config(tile_m=tile_m, tile_k=tile_k, tile_n=tile_n),
                                      bypass_device_check=True)
    return _visited(op(lhs, rhs, group_sizes=group_sizes), group_sizes)


def ragged_dot_reference(lhs, rhs, group_sizes, **_config):
    from tokamax._src.ops.ragged_dot import base

    return _visited(base.RaggedDot()(lhs, rhs, group_sizes=group_sizes), group_sizes)


def _visited(out, group_sizes):
    """The rows the groups cover; the others zeroed. Rows past sum(group_sizes) are
    "unvisited output elements", left unwritten unless ``zero_initialize`` (base.RaggedDot's
    docstring; the Mosaic TPU v1 implementation does not support it), while the XLA
    implementation returns zeros there: docs/thirdparty.md."""
    rows = jnp.arange(out.shape[0])[:, None]
    return jnp.where(rows < jnp.sum(group_sizes), out, jnp.zeros((), out.dtype))


@st.composite
def _ragged_dot_configs(draw):
    # Every non-expert dimension at least 128 (the implementation raises below); group
    # sizes of 0, and sizes that end inside a tile or leave rows past their sum.
    m = draw(st.sampled_from([128, 256]))  # a multiple of tile_m (else NotImplementedError)
    groups = draw(st.integers(1, 4))
    return {"m": m, "k": draw(st.sampled_from([128, 256])), "n": draw(st.sampled_from([128, 256])),
            "groups": groups, "tile_m": 128, "tile_k": 128, "tile_n": 128,
            "dtype": draw(st.sampled_from(["float32", "bfloat16"]))}


def _ragged_dot_inputs(c):
    def make(seed_and_cuts):
        seed, cuts = seed_and_cuts
        rng = np.random.default_rng(seed)
        edges = np.sort(np.asarray(cuts, np.int64) % (c["m"] + 1))
        sizes = np.diff(np.concatenate([[0], edges])).astype(np.int32)
        dtype = jnp.dtype(c["dtype"])
        return (rng.standard_normal((c["m"], c["k"]), np.float32).astype(dtype),
                rng.standard_normal((c["groups"], c["k"], c["n"]), np.float32).astype(dtype), sizes)

    cuts = st.lists(st.integers(0, 2**16), min_size=c["groups"], max_size=c["groups"])
    return st.tuples(st.integers(0, 2**32 - 1), cuts).map(make)


TOKAMAX_RAGGED_DOT = pv.KernelSpec(
    name="tokamax_ragged_dot",
    kernel=ragged_dot,
    reference=ragged_dot_reference,
    configs=_ragged_dot_configs(),
    inputs=_ragged_dot_inputs,
    features=("matmul", "accumulator", "ragged", "scalar_prefetch", "thirdparty"),
    bitwise_stable=False,
)
