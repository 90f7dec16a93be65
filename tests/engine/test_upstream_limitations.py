"""Failures inside JAX's own interpreters are n/a cells with the upstream reason, never findings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify import _jax_compat
from pallas_verify.case import ErrorInfo
from pallas_verify.engine import verify
from pallas_verify.loader import load_spec

SPECS = Path(__file__).with_name("_specs.py")


def cells(report):
    return {r.backend: r for r in report.results}


@pytest.mark.gpu_interpret
def test_a_pallas_call_vmapped_inside_the_kernel_is_na_on_gpu_interpret(tmp_path):
    report = verify(load_spec(f"{SPECS}::vmapped_inside"), ["interpret", "gpu_interpret"], max_examples=2,
                    profile="ci", out_dir=tmp_path)
    got = cells(report)
    assert got["interpret"].status == "pass"
    assert got["gpu_interpret"].status == "unsupported"
    assert "cannot run a vmapped pallas_call" in got["gpu_interpret"].reason
    assert "reproduced on JAX 0.12.0.1" in got["gpu_interpret"].reason
    assert report.findings == []


@pytest.mark.parametrize(("backend", "text", "expected"), [
    ("interpret", "AttributeError: 'TypedInt' object has no attribute 'shape'\n  in _swap_discharge_rule",
     "typed-int constant"),
    ("tpu_interpret", "AttributeError: 'ReshapeTransform' object has no attribute 'indices'\n  in to_range",
     "reshaped ref"),
    # Evidence must match in full: the message alone, or the right text on another backend, is not enough.
    ("interpret", "AttributeError: 'TypedInt' object has no attribute 'shape'", None),
    ("tpu_interpret", "AttributeError: 'TypedInt' object has no attribute 'shape'\n  in _swap_discharge_rule", None),
    ("gpu_interpret", "_pallas_call_batching_rule() got an unexpected keyword argument 'kernel_arg_transforms'",
     "vmapped pallas_call"),
])
def test_limitation_rows_match_on_all_their_evidence(backend, text, expected):
    error = ErrorInfo(type="AttributeError", message="x", traceback=text)
    reason = _jax_compat.upstream_limitation(error, backend=backend, transform=None)
    assert (reason is None) if expected is None else (expected in reason and "JAX 0.12.0.1" in reason)


def _ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

    return rpa.ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                                      num_kv_pages_per_block=2, num_queries_per_block=8)


def _rpa_inputs(config):
    rng = np.random.default_rng(0)
    return st.just((rng.standard_normal((16, 4, 128)).astype(np.float32),
                    rng.standard_normal((8, 16, 4, 128)).astype(np.float32),
                    np.array([16, 32], np.int32), np.arange(8, dtype=np.int32).reshape(2, 4),
                    np.array([0, 8, 16], np.int32), np.array([2], np.int32)))


@pytest.mark.slow
def test_jax_ragged_paged_attention_is_na_on_both_interpreters_with_the_reason(tmp_path):
    spec = pv.KernelSpec(name="ragged_paged_attention", kernel=_ragged_paged_attention,
                         reference=lambda q, *rest: q, configs=st.just({}), inputs=_rpa_inputs, platforms=("tpu",))
    report = verify(spec, ["interpret", "tpu_interpret"], max_examples=1, profile="ci", out_dir=tmp_path,
                    isolate="never", static=False)
    got = cells(report)
    assert (got["interpret"].status, got["tpu_interpret"].status) == ("unsupported", "unsupported")
    assert "'TypedInt' object has no attribute 'shape'" in got["interpret"].reason
    assert "'ReshapeTransform' object has no attribute 'indices'" in got["tpu_interpret"].reason
    assert report.findings == []
