"""A kernel that one backend cannot run for some examples (errors.NotForThisCase): those
examples are not run there, not judged and not counted, the backend's search goes on, and
the other backends run them."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from pallas_verify import _jax_compat
from pallas_verify.engine import verify
from pallas_verify.errors import NotForThisCase

RAN: list[tuple[str, int]] = []


def _body(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def _add_one(x, *, odd):
    tpu = isinstance(_jax_compat.forced_interpret(), pltpu.InterpretParams)
    if odd and tpu:
        raise NotForThisCase("odd examples use what TPU interpret mode lacks")
    RAN.append(("tpu_interpret" if tpu else "interpret", odd))
    return pl.pallas_call(_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _spec() -> pv.KernelSpec:
    return pv.KernelSpec(name="odd_not_on_tpu", kernel=_add_one, reference=lambda x, *, odd: x + 1.0,
                         configs=st.fixed_dictionaries({"odd": st.sampled_from([0, 1])}),
                         inputs=lambda c: st.just((np.arange(8 * 128, dtype=np.float32).reshape(8, 128),)),
                         platforms=("tpu",))


def test_examples_a_backend_cannot_run_are_skipped_there_and_run_elsewhere(tmp_path) -> None:
    RAN.clear()
    report = verify(_spec(), ["interpret", "tpu_interpret"], 6, 3, isolate="never", static=False, out_dir=tmp_path,
                    metamorphic=False)
    assert report.findings == []
    cells = {r.backend: r for r in report.results}
    assert cells["interpret"].status == cells["tpu_interpret"].status == "pass"
    assert ("interpret", 1) in RAN and ("tpu_interpret", 0) in RAN
    assert ("tpu_interpret", 1) not in RAN
    assert cells["tpu_interpret"].examples >= 1 and not cells["tpu_interpret"].reason  # not unsupported


def test_a_backend_that_can_run_no_example_runs_none_and_is_not_unsupported(tmp_path) -> None:
    spec = pv.KernelSpec(name="never_on_tpu", kernel=_add_one, reference=lambda x, *, odd: x + 1.0,
                         configs=st.just({"odd": 1}), inputs=_spec().inputs, platforms=("tpu",))
    report = verify(spec, ["tpu_interpret"], 3, 3, isolate="never", static=False, out_dir=tmp_path,
                    metamorphic=False)
    [cell] = report.results
    assert (cell.status, cell.examples, report.findings) == ("pass", 0, [])
