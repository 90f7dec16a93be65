"""The ragged paged attention reference (jittable) agrees with the module's own loop
reference, which needs concrete lengths and so cannot be the spec's reference."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

from reference_kernels.upstream import tpu_ragged

_KEYS = ("sm_scale", "sliding_window", "soft_cap")


@settings(max_examples=5, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_reference_matches_upstream_loop_reference(data):
    spec = tpu_ragged.TPU_RAGGED_PAGED_ATTENTION  # not a module global: the plugin would verify it
    config = data.draw(spec.configs, label="config")
    inputs = data.draw(spec.inputs(config), label="inputs")
    ours = jax.jit(lambda *a: spec.reference(*a, **config))(*inputs)
    theirs = rpa.ref_ragged_paged_attention(*inputs, **{k: config[k] for k in _KEYS})
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)
