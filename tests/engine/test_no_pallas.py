"""No Pallas, no PASS: an entry point that routes its examples to a non-Pallas path is not
reported as a kernel that passed."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv
from pallas_verify.engine import verify


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def entry(x, *, tokens):
    """A library entry point: one token runs the kernel, several take the XLA path."""
    if tokens > 1:
        return x * 2
    return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _spec(name, tokens):
    return pv.KernelSpec(name=name, kernel=entry, reference=lambda x, tokens: x * 2,
                         configs=st.fixed_dictionaries({"tokens": tokens}),
                         inputs=lambda c: st.just((np.ones((8, 128), np.float32),)), platforms=("tpu",))


def test_a_spec_whose_examples_run_no_pallas_kernel_is_skipped_saying_so(tmp_path):
    report = verify(_spec("xla_only", st.integers(2, 4)), ["interpret"], max_examples=3, profile="ci",
                    out_dir=tmp_path)
    [cell] = report.results
    assert report.findings == [] and cell.status == "skipped"
    assert cell.reason.startswith("no Pallas kernel ran: none of the") and "nothing here tested Pallas code" in cell.reason


def test_a_spec_some_of_whose_examples_run_no_kernel_passes_with_a_note_that_counts_them(tmp_path):
    report = verify(_spec("mixed", st.sampled_from([1, 2])), ["interpret"], max_examples=6, profile="ci",
                    out_dir=tmp_path)
    [cell] = report.results
    assert cell.status == "pass"
    [note] = [n for n in report.kernels[0]["notes"] if "ran no Pallas kernel" in n]
    assert note.startswith("1 of 2 configs traced ran no Pallas kernel (e.g. {'tokens': 2})")
