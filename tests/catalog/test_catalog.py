"""Every catalog kernel matches its reference on every interpreter of its platforms, and
every interpreter a spec declares unsupported really fails."""

from __future__ import annotations

import pytest
from catalog_interpreters import (
    applicable,
    assert_matches,
    ground_truth,
    minimal_example,
    missing_devices,
    reference,
    run,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pallas_verify.backends import registry
from reference_kernels import catalog

SPECS = catalog()
SLOW = {"flash_attention", "flash_attention_causal", "emit_pipeline_scale"}


def _cases(*, supported: bool) -> list:
    return [
        pytest.param(spec, interp, id=f"{spec.name}-{interp.name}",
                     marks=[pytest.mark.slow] if spec.name in SLOW else [])
        for spec in SPECS for interp in applicable(spec)
        if (spec.unsupported_reason(interp.backend) is None) == supported
    ]


def test_catalog_has_the_required_breadth():
    assert len(SPECS) >= 20
    assert len({s.name for s in SPECS}) == len(SPECS)
    assert all(spec.features for spec in SPECS)


@pytest.mark.parametrize(("spec", "interp"), _cases(supported=True))
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_kernel_matches_reference(spec, interp, data):
    if (reason := missing_devices(spec)) is not None:
        pytest.skip(reason)  # tests/catalog/test_collective.py runs it with 4 devices
    if (reason := registry.get(interp.backend).available()) is not None:
        pytest.skip(reason)  # JAX 0.10 has no GPU interpret mode (make test-jax)
    config = data.draw(spec.configs, label="config")
    inputs = data.draw(spec.inputs(config), label="inputs")
    assert_matches(spec, run(spec, interp, config, inputs), reference(spec, config, inputs),
                   ground_truth(spec, config, inputs))


@pytest.mark.parametrize(("spec", "interp"), _cases(supported=False))
def test_declared_unsupported_interpreter_really_fails(spec, interp):
    config, inputs = minimal_example(spec)
    with pytest.raises(Exception):  # noqa: B017, PT011  (any failure: the declared reason)
        run(spec, interp, config, inputs)
