"""Kernels adapted from jax's own tests/pallas (TPU vector ops and control flow):
``pltpu.roll`` by a static or an SMEM shift, strided loads, bit casts that keep NaN
payloads and signed zeros, a three-way ``lax.switch`` chosen per grid step, and a
``while_loop`` whose trip count is data.

Adapted from ``tpu_pallas_test.py`` (test_roll_with_no_stride), ``ops_test.py``
(test_strided_load, test_bitcast_convert_type_array) and ``pallas_test.py``
(test_cond_threebranch_vectors, test_while_with_dynamic_condition).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["JT_BITCAST", "JT_ROLL", "JT_STRIDED_LOAD", "JT_SWITCH", "JT_WHILE_COUNT"]

_FEATURES = ("upstream", "jax_tests")


def roll(x: jax.Array, shift: jax.Array, *, axis: int, dynamic: bool, static_shift: int) -> jax.Array:
    """``np.roll(x, shift, axis)`` of a whole array: by a static shift, or by one read
    from SMEM (``shift[0]``) when ``dynamic``."""

    def body(x_ref, shift_ref, o_ref):
        amount = shift_ref[0] if dynamic else static_shift
        o_ref[...] = pltpu.roll(x_ref[...], shift=amount, axis=axis)

    return pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM), pl.BlockSpec(memory_space=pltpu.SMEM)],
    )(x, shift)


def roll_reference(x, shift, *, axis, dynamic, static_shift):
    return jnp.roll(x, shift[0] if dynamic else static_shift, axis=axis)


@st.composite
def _roll_configs(draw):
    # Upstream's shapes: whole (8, 128) tiles, ragged sublanes and lanes, sizes of 3 and 8.
    rows, cols = draw(st.sampled_from([(8, 128), (3, 16), (15, 256), (20, 200), (8, 64), (64, 8)]))
    axis = draw(st.integers(0, 1))
    return {"rows": rows, "cols": cols, "axis": axis, "dynamic": draw(st.booleans()),
            "static_shift": draw(st.integers(0, (rows, cols)[axis] - 1)),
            "dtype": draw(st.sampled_from(["float32", "int32", "bfloat16"]))}


def _roll_inputs(config):
    length = (config["rows"], config["cols"])[config["axis"]]
    return st.tuples(pvs.arrays(shape=(config["rows"], config["cols"]), dtype=config["dtype"]),
                     st.integers(0, length - 1).map(lambda s: np.array([s], np.int32)))


JT_ROLL = pv.KernelSpec(
    name="jaxtests_roll",
    kernel=without(roll, "rows", "cols", "dtype"),
    reference=without(roll_reference, "rows", "cols", "dtype"),
    configs=_roll_configs(),
    inputs=_roll_inputs,
    features=("roll", "smem", "ragged", *_FEATURES),
)


def strided_load(x: jax.Array, *, stride: int, start: int) -> jax.Array:
    """Every ``stride``-th row of ``x`` from row ``start``: a strided sublane load."""
    rows = (x.shape[0] - start) // stride

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(start, rows, stride=stride), :]

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((rows, x.shape[1]), x.dtype))(x)


def strided_load_reference(x, *, stride, start):
    rows = (x.shape[0] - start) // stride
    return x[start:start + rows * stride:stride]


@st.composite
def _strided_configs(draw):
    stride, rows, start = draw(st.integers(1, 4)), draw(st.integers(1, 8)), draw(st.integers(0, 3))
    return {"stride": stride, "start": start, "rows": start + rows * stride, "cols": draw(st.sampled_from([4, 128])),
            "dtype": draw(st.sampled_from(["float32", "int32"]))}


JT_STRIDED_LOAD = pv.KernelSpec(
    name="jaxtests_strided_load",
    kernel=without(strided_load, "rows", "cols", "dtype"),
    reference=without(strided_load_reference, "rows", "cols", "dtype"),
    configs=_strided_configs(),
    inputs=lambda c: array_tuples((c["rows"], c["cols"]), dtype=c["dtype"]),
    features=("strided_load", "non_aligned_offsets", *_FEATURES),
)

# Same-width bit casts: (from, to) dtype names.
_BITCASTS = (("float32", "int32"), ("int32", "float32"), ("float32", "uint32"), ("bfloat16", "int16"),
             ("bfloat16", "uint16"), ("float16", "int16"))


def bitcast(x: jax.Array, *, to: str, block: int) -> jax.Array:
    """The bits of ``x`` as ``to`` (same width), by row blocks."""
    (rows, cols) = x.shape

    def body(x_ref, o_ref):
        o_ref[...] = jax.lax.bitcast_convert_type(x_ref[...], jnp.dtype(to))

    return pl.pallas_call(
        body, grid=(pl.cdiv(rows, block),),
        in_specs=[pl.BlockSpec((block, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.dtype(to)),
    )(x)


@st.composite
def _bitcast_configs(draw):
    source, to = draw(st.sampled_from(_BITCASTS))
    block = pvs.preferred_sublane_tile(source)
    return {"rows": draw(pvs.ragged_sizes(block=block, max_blocks=3)), "source": source, "to": to, "block": block}


JT_BITCAST = pv.KernelSpec(
    name="jaxtests_bitcast",
    kernel=without(bitcast, "rows", "source"),
    reference=without(lambda x, *, to: jax.lax.bitcast_convert_type(x, jnp.dtype(to)), "rows", "source", "block"),
    configs=_bitcast_configs(),
    # NaN payloads, infinities, signed zeros and subnormals: a bit cast keeps every bit.
    inputs=lambda c: st.tuples(pvs.arrays(shape=(c["rows"], 128), dtype=c["source"], allow_nan=True,
                                          allow_infinity=True, allow_extremes=True)),
    features=("bitcast", "ragged", "edge_values", *_FEATURES),
)

_BRANCHES = (lambda x: x * x, lambda x: -x, lambda x: -x * x)


def switch(x: jax.Array, *, block: int, offset: int) -> jax.Array:
    """Block ``i`` of ``x`` through branch ``(i + offset) % 3`` of a ``lax.switch``."""
    (n,) = x.shape

    def body(x_ref, o_ref):
        branch = (pl.program_id(0) + offset) % 3
        o_ref[...] = jax.lax.switch(branch, _BRANCHES, x_ref[...])

    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pl.pallas_call(body, grid=(pl.cdiv(n, block),), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def switch_reference(x, *, block, offset):
    branch = (jnp.arange(x.shape[0]) // block + offset) % 3
    return jnp.select([branch == b for b in range(3)], [f(x) for f in _BRANCHES])


@st.composite
def _switch_configs(draw):
    block = draw(st.sampled_from([128, 256]))
    return {"n": draw(pvs.ragged_sizes(block=block, max_blocks=4)), "block": block, "offset": draw(st.integers(0, 2))}


JT_SWITCH = pv.KernelSpec(
    name="jaxtests_switch",
    kernel=without(switch, "n"),
    reference=without(switch_reference, "n"),
    configs=_switch_configs(),
    inputs=lambda c: array_tuples((c["n"],)),
    features=("switch", "control_flow", "ragged", *_FEATURES),
)


def while_count(limits: jax.Array, x: jax.Array) -> jax.Array:
    """Per row block ``r``: ``x[r]`` plus one for each trip of a ``while_loop`` that runs
    ``limits[r]`` times (the trip count is read from SMEM at run time). Each step's block
    is one (8, 128) tile of a leading row axis that is squeezed away, as Mosaic TPU takes it."""
    rows, sublanes, cols = x.shape

    def body(limits_ref, x_ref, o_ref):
        limit = limits_ref[pl.program_id(0)]
        o_ref[...] = x_ref[...]

        def step(i):
            o_ref[...] += 1
            return i + 1

        jax.lax.while_loop(lambda i: i < limit, step, 0)

    block = pl.BlockSpec((None, sublanes, cols), lambda r, limits: (r, 0, 0))
    return pl.pallas_call(
        body,
        grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(rows,), in_specs=[block],
                                               out_specs=block),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(limits, x)


JT_WHILE_COUNT = pv.KernelSpec(
    name="jaxtests_while_count",
    kernel=without(while_count, "rows"),
    reference=without(lambda limits, x: x + limits[:, None, None].astype(x.dtype), "rows"),
    configs=st.fixed_dictionaries({"rows": st.integers(1, 4)}),
    inputs=lambda c: st.tuples(st.lists(st.integers(0, 5), min_size=c["rows"], max_size=c["rows"]).map(
        functools.partial(np.asarray, dtype=np.int32)), pvs.arrays(shape=(c["rows"], 8, 128), dtype="int32")),
    features=("while_loop", "data_dependent_trip_count", "scalar_prefetch", *_FEATURES),
)
