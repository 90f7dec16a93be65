"""A kernel allocating HBM in run_scoped runs in TPU interpret mode only with
allow_hbm_allocation_in_run_scoped, and its finding says a real TPU cannot run it."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.case import Case
from pallas_verify.oracles.differential import outcome_findings


def _body(x_ref, o_ref):
    def scoped(tmp, sem):
        pltpu.async_copy(x_ref, tmp, sem).wait()
        pltpu.async_copy(tmp, o_ref, sem).wait()

    pl.run_scoped(scoped, pltpu.HBM(x_ref.shape, x_ref.dtype), pltpu.SemaphoreType.DMA)


def copy_through_hbm(x):
    return pl.pallas_call(_body, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_hbm_in_run_scoped_runs_only_to_be_judged_and_is_a_finding():
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    spec = pv.KernelSpec(name="copy_through_hbm", kernel=copy_through_hbm, reference=lambda x: x,
                         configs=st.just({}), inputs=lambda c: st.just((x,)))
    case = Case(spec=spec, config={}, inputs=(x,), backend="tpu_interpret", mode={"detect_races": True})
    outcome = TpuInterpret().run(case)
    assert np.array_equal(outcome.outputs[0], x)  # it ran, with the HBM allocation allowed
    assert outcome.error.type == "UnsupportedOnTpu"
    assert "not support on a real TPU" in outcome.error.message and "Cannot allocate HBM" in outcome.error.message
    [finding] = outcome_findings(case, outcome, [x], ["out"])
    assert finding.kind == "exception" and "allow_hbm_allocation_in_run_scoped=True runs" in finding.message
