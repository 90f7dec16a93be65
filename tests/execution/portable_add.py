"""A portable kernel (TPU and GPU backends) small enough to compile in a second or two."""

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def _body(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def add_one(x, *, rows):
    return pl.pallas_call(_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


ADD_ONE = pv.KernelSpec(
    name="add_one",
    kernel=add_one,
    reference=lambda x, *, rows: x + 1.0,
    configs=st.fixed_dictionaries({"rows": st.sampled_from([8, 16])}),
    inputs=lambda config: st.just((np.arange(config["rows"] * 128, dtype=np.float32).reshape(-1, 128),)),
    platforms=("tpu", "gpu"),
)
