"""CPU devices report the SM count of the GPU being simulated or compiled for."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import find
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify import _jax_compat
from pallas_verify.backends.interpreters import SM_COUNTS, GpuInterpret
from pallas_verify.case import Case


def _sm_count():
    return jax.devices()[0].core_count


def test_cpu_devices_have_no_sm_count_outside():
    with pytest.raises(AttributeError):
        _sm_count()


def test_facts_nest_and_restore():
    with _jax_compat.gpu_device_facts(core_count=148):
        assert _sm_count() == 148
        assert all(d.core_count == 148 for d in jax.devices())
        with _jax_compat.gpu_device_facts(core_count=3):
            assert _sm_count() == 3
        assert _sm_count() == 148
    with _jax_compat.gpu_device_facts():
        assert _sm_count() == _jax_compat.default_core_count() == 132
    with pytest.raises(AttributeError):
        _sm_count()


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_bad_sm_count_is_named(bad):
    facts = _jax_compat.gpu_device_facts(core_count=bad)
    with pytest.raises(ValueError, match=rf"core_count={bad!r} must be a positive int"):
        facts.__enter__()


def persistent_add_one(x):
    """One block per SM (the grid jax's persistent Mosaic GPU kernels use); block i
    adds 1 to element i, so the output shows how many SMs there were."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, o_ref):
        i = jax.lax.axis_index("sm")
        o_ref[i] = x_ref[i] + 1.0

    return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        grid=(jax.devices()[0].core_count,), grid_names=("sm",))(x)


def _spec() -> pv.KernelSpec:  # not at module level: the plugin would make it a test of its own
    return pv.KernelSpec(name="persistent_add_one", kernel=persistent_add_one, reference=lambda x: x,
                         configs=st.just({}), inputs=lambda c: st.just((np.zeros(8, np.float32),)), platforms=("gpu",))


def test_gpu_interpret_draws_the_sm_count_and_runs_with_it():
    backend = GpuInterpret()
    assert find(backend.modes(), lambda m: True)["sm_count"] == SM_COUNTS[0] == 2
    assert {132, 148} <= set(SM_COUNTS)
    mode = {**find(backend.modes(), lambda m: True), "sm_count": 3}
    outcome = backend.run(Case(spec=_spec(), config={}, inputs=(np.zeros(8, np.float32),), backend=backend.name,
                               mode=mode))
    assert outcome.ok, outcome.error
    ran = np.asarray(outcome.outputs[0])
    assert ran[:3].tolist() == [1.0, 1.0, 1.0]
    assert not np.isfinite(ran[3:]).any()  # never written: the uninitialized (NaN) fill
