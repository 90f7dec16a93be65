"""The upstream wrappers: each kernel shipped in jax matches its reference on every
interpreter of its platforms, and the interpreters declared unsupported really fail."""

from __future__ import annotations

import pytest
from catalog_interpreters import (
    applicable,
    assert_matches,
    ground_truth,
    minimal_example,
    reference,
    run,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference_kernels.upstream import upstream

SPECS = upstream()


def _cases(*, supported: bool) -> list:
    return [
        pytest.param(spec, interp, id=f"{spec.name}-{interp.name}", marks=[pytest.mark.slow])
        for spec in SPECS for interp in applicable(spec)
        if (spec.unsupported_reason(interp.backend) is None) == supported
    ]


def test_upstream_has_tpu_and_gpu_kernels():
    assert len(SPECS) >= 5
    assert {p for spec in SPECS for p in spec.platforms} == {"tpu", "gpu"}


@pytest.mark.parametrize(("spec", "interp"), _cases(supported=True))
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_upstream_kernel_matches_reference(spec, interp, data):
    config = data.draw(spec.configs, label="config")
    inputs = data.draw(spec.inputs(config), label="inputs")
    assert_matches(spec, run(spec, interp, config, inputs), reference(spec, config, inputs),
                   ground_truth(spec, config, inputs))


@pytest.mark.parametrize(("spec", "interp"), _cases(supported=False))
def test_upstream_declared_unsupported_really_fails(spec, interp):
    config, inputs = minimal_example(spec)
    with pytest.raises(Exception):  # noqa: B017, PT011  (any failure: the declared reason)
        run(spec, interp, config, inputs)
