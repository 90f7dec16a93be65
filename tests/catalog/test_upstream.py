"""The upstream wrappers: each kernel shipped in jax matches its reference on every
interpreter of its platforms, and the interpreters declared unsupported really fail with
the error the declared reason names. (The kernels adapted from jax's tests are checked
through verify in test_jax_tests.py.)"""

from __future__ import annotations

import re

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

from reference_kernels.upstream import shipped

SPECS = shipped()


def _cases(*, supported: bool) -> list:
    return [
        pytest.param(spec, interp, id=f"{spec.name}-{interp.name}", marks=[pytest.mark.slow])
        for spec in SPECS for interp in applicable(spec)
        if (spec.unsupported_reason(interp.backend) is None) == supported
    ]


def test_upstream_has_tpu_and_gpu_kernels():
    assert len(SPECS) >= 15
    assert len({s.name for s in SPECS}) == len(SPECS)
    assert {p for spec in SPECS for p in spec.platforms} == {"tpu", "gpu"}
    assert all("upstream" in spec.features for spec in SPECS)


@pytest.mark.parametrize(("spec", "interp"), _cases(supported=True))
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_upstream_kernel_matches_reference(spec, interp, data):
    if (reason := missing_devices(spec)) is not None:
        pytest.skip(reason)  # tests/catalog/test_upstream_collective.py runs it with 4 devices
    config = data.draw(spec.configs, label="config")
    inputs = data.draw(spec.inputs(config), label="inputs")
    assert_matches(spec, run(spec, interp, config, inputs), reference(spec, config, inputs),
                   ground_truth(spec, config, inputs))


# Failures raised inside one warp's thread, after which GPU interpret mode may wait forever
# on the others: tests/catalog/test_mgpu_gaps.py reproduces them in a child process.
MAY_HANG = {("upstream_gpu_blackwell_ragged_dot_mgpu", "gpu_interpret")}


@pytest.mark.parametrize(("spec", "interp"), _cases(supported=False))
def test_upstream_declared_unsupported_really_fails(spec, interp):
    if (spec.name, interp.backend) in MAY_HANG:
        pytest.skip("may hang GPU interpret mode; test_mgpu_gaps.py reproduces it in a child process")
    if (reason := missing_devices(spec)) is not None:
        pytest.skip(reason)  # tests/catalog/test_upstream_collective.py runs it with 4 devices
    config, inputs = minimal_example(spec)
    with pytest.raises(Exception) as failure:  # noqa: PT011  (checked against the reason below)
        run(spec, interp, config, inputs)
    # The reason names the exception type it was measured with; the failure has it (as
    # its type, or inside a JaxRuntimeError's text).
    declared = set(re.findall(r"\b\w+Error\b", spec.unsupported_reason(interp.backend)))
    text = f"{failure.type.__name__}: {failure.value}"
    assert any(name in text for name in declared), (declared, text[:500])


def _shipped_kernel_modules() -> set[str]:
    """Modules of jax.experimental.pallas.ops that define a Pallas kernel, as "tpu.name"."""
    import pathlib

    import jax.experimental.pallas.ops as ops

    root = pathlib.Path(ops.__file__).parent
    return {".".join(path.relative_to(root).with_suffix("").parts)
            for path in root.rglob("*.py")
            if re.search(r"\bpallas_call\(|\bplgpu\.kernel\(|\bpl\.kernel\(", path.read_text())}


def test_every_shipped_kernel_module_is_wrapped_or_explained():
    import sys

    from reference_kernels.upstream import NOT_WRAPPED

    wrapped = {name.removeprefix("jax.experimental.pallas.ops.")
               for name in sys.modules if name.startswith("jax.experimental.pallas.ops.")}
    shipped = _shipped_kernel_modules()
    assert len(shipped) >= 20
    missing = shipped - wrapped - set(NOT_WRAPPED)
    assert not missing, f"kernel modules neither wrapped nor in NOT_WRAPPED: {sorted(missing)}"
    assert not set(NOT_WRAPPED) - shipped, "NOT_WRAPPED names a module jax no longer ships"
