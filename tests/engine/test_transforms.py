"""Unit tests of transforms.py and the runner's transform plumbing (HLO interpreter)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify import _jax_compat, transforms
from pallas_verify.backends import registry
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.errors import InvalidArgument, InvalidSpec
from pallas_verify.runner import Runner, Unsupported
from pallas_verify.spec import TRANSFORMS
from tests.engine import _kernels as k

X = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) / 100
INTERPRET = registry.get("interpret")


def test_rules_cover_every_transform():
    assert tuple(transforms.RULES) == TRANSFORMS


def test_unknown_transform_is_rejected_with_choices():
    with pytest.raises(InvalidArgument, match=r"transform='vjp' is not one of \('vmap', 'grad'\)"):
        transforms.rule("vjp")


def test_no_transform_is_the_function_itself():
    fn = lambda x: x  # noqa: E731
    assert transforms.rule(None).wrap(fn) is fn


@given(st.data())
def test_vmap_extension_stacks_per_example_inputs(data):
    more = iter([(X + 1,), (X + 2,)])
    batched = transforms.extend("vmap", data, spec=k.TRIPLE, config={}, inputs=(X,), more=lambda: next(more))
    assert len(batched) == 1
    assert transforms.MIN_BATCH <= batched[0].shape[0] <= transforms.MAX_BATCH
    for b in range(batched[0].shape[0]):
        np.testing.assert_array_equal(batched[0][b], X + b)


class _Draws:
    """A stand-in for Hypothesis's data object that draws a fixed value."""

    def __init__(self, value):
        self.value = value

    def draw(self, strategy, label=None):
        return self.value


def test_vmap_extension_rejects_inputs_of_different_shapes():
    with pytest.raises(InvalidSpec, match="inputs of different shapes"):
        transforms.extend("vmap", _Draws(2), spec=k.TRIPLE, config={}, inputs=(X,), more=lambda: (X[:4],))


@given(st.data())
def test_grad_extension_adds_cotangents_and_layout(data):
    n = np.array([3], np.int32)
    xs = transforms.extend("grad", data, spec=k.SCALE_BY_COUNT, config={}, inputs=(X, n), more=None)
    assert len(xs) == 4
    assert xs[2].shape == X.shape
    assert xs[2].dtype == np.float32
    np.testing.assert_array_equal(xs[3], [0, 1])


@given(st.data())
def test_grad_needs_a_float_input(data):
    spec = dataclasses.replace(k.SCALE_BY_COUNT, transforms=("grad",))
    with pytest.raises(InvalidSpec, match="no floating-point input"):
        transforms.extend("grad", data, spec=spec, config={}, inputs=(np.zeros(3, np.int32),), more=None)


def test_grad_reference_skips_integer_inputs():
    n, ct = np.array([3], np.int32), np.ones_like(X)
    outputs, paths = transforms.expected_outputs(k.SCALE_BY_COUNT, {}, (X, n, ct, np.arange(2, dtype=np.int32)), "grad")
    assert paths == ["grad(arg0)"]
    np.testing.assert_allclose(outputs[0], 3 * ct)


def test_vmap_reference_is_stacked_per_example():
    outputs, paths = transforms.expected_outputs(k.TRIPLE, {}, (np.stack([X, -X]),), "vmap")
    assert paths == ["vmap(out)"]
    np.testing.assert_allclose(outputs[0], np.stack([3 * X, -3 * X]))


def test_explicit_grad_tolerance_is_scaled_by_factor_and_magnitude():
    spec = dataclasses.replace(k.TRIPLE, tolerance=pv.Tolerance(rtol=1.3e-6, atol=1e-5))
    case = Case(spec=spec, config={}, inputs=(), backend="interpret", transform="grad")
    tol = transforms.judged(case, [np.full(4, 10.0, np.float32)]).spec.tolerance
    assert tol.rtol == pytest.approx(transforms.GRAD_TOLERANCE_FACTOR * 1.3e-6)
    assert tol.atol == pytest.approx(transforms.GRAD_TOLERANCE_FACTOR * (1e-5 + 1.3e-6 * 10))
    assert transforms.judged(dataclasses.replace(case, transform="vmap"), [X]).spec.tolerance == spec.tolerance


def test_default_grad_is_judged_against_its_own_ground_truth():
    case = Case(spec=k.TRIPLE, config={}, inputs=(), backend="interpret", transform="grad")
    assert transforms.judged(case, [np.full(4, 10.0, np.float32)]).spec.tolerance is None
    x, ct = np.linspace(-1, 1, 4).astype(np.float32), np.ones(4, np.float32)
    truth = transforms.ground_truth(k.TRIPLE, {}, (x, ct, np.arange(1, dtype=np.int32)), "grad")
    assert truth.reason is None and truth.outputs[0].dtype == np.float64
    np.testing.assert_allclose(truth.outputs[0], 3.0 * ct)


def test_vmap_ground_truth_is_stacked_per_example():
    truth = transforms.ground_truth(k.TRIPLE, {}, (np.stack([X, -X]),), "vmap")
    np.testing.assert_allclose(truth.outputs[0], np.stack([3 * X, -3 * X]).astype(np.float64))


@pytest.mark.parametrize(("transform", "backend", "marker", "expected"), [
    ("vmap", "tpu_interpret", "in _get_randomized_grid_coordinates", "dimension_semantics"),
    ("vmap", "gpu_interpret", "_pallas_call_batching_rule() got an unexpected keyword argument 'kernel_arg_transforms'",
     "batching rule"),
    ("grad", "tpu_interpret", "in _get_randomized_grid_coordinates", None),
    ("vmap", "interpret", "in _get_randomized_grid_coordinates", None),
])
def test_upstream_limitations_are_named(transform, backend, marker, expected):
    error = ErrorInfo(type="ValueError", message="x", traceback=marker)
    reason = _jax_compat.upstream_limitation(error, backend=backend, transform=transform)
    assert (reason is None) if expected is None else (expected in reason)


def _check(spec, inputs, transform):
    with Runner(spec, isolate="never") as runner:
        return runner.check({}, inputs, INTERPRET, {}, transform=transform)


def _grad_inputs(*primals):
    return (*primals, np.ones_like(X), np.arange(len(primals), dtype=np.int32))


def test_correct_backward_kernel_is_clean():
    assert _check(k.TRIPLE, _grad_inputs(X), "grad") == []
    assert _check(k.TRIPLE, (np.stack([X, X + 1]),), "vmap") == []


def test_vmap_with_integer_metadata_is_clean():
    assert _check(k.SCALE_BY_COUNT, (np.stack([X, X]), np.array([[2], [3]], np.int32)), "vmap") == []


def test_wrong_backward_kernel_is_a_grad_mismatch_naming_the_input():
    assert _check(k.WRONG_TRIPLE, (X,), None) == []
    [finding] = _check(k.WRONG_TRIPLE, _grad_inputs(X), "grad")
    assert (finding.kind, finding.transform, finding.backend) == ("mismatch", "grad", "interpret")
    assert "grad(arg0)" in finding.message


def test_kernel_without_custom_vjp_fails_grad_as_an_exception():
    spec = dataclasses.replace(k.SCALE_BY_COUNT, transforms=("grad",))
    n = np.array([2], np.int32)
    [finding] = _check(spec, (*_grad_inputs(X, n)[:2], np.ones_like(X), np.arange(2, dtype=np.int32)), "grad")
    assert (finding.kind, finding.transform) == ("exception", "grad")


def test_vmap_batch_must_match_the_kernel_per_example():
    case = Case(spec=k.TRIPLE, config={}, inputs=(np.stack([X, X]),), backend="interpret", transform="vmap")
    outcome = Outcome(outputs=(np.stack([3 * X, 3 * X + 1]),))
    [finding] = transforms.per_example_findings(case, outcome, INTERPRET.run, ["vmap(out)"])
    assert (finding.kind, finding.transform) == ("mismatch", "vmap")
    assert "example 1 of the batch" in finding.message
    assert "vmap(out)[1]" in finding.message
    good = Outcome(outputs=(np.stack([3 * X, 3 * X]),))
    assert transforms.per_example_findings(case, good, INTERPRET.run, ["vmap(out)"]) == []


def test_kernel_under_grad_is_traceable_for_blame():
    from pallas_verify import _jax_compat

    inputs = _grad_inputs(X)
    fn = transforms.bound(Case(spec=k.WRONG_TRIPLE, config={}, inputs=inputs, backend="interpret", transform="grad"))
    with _jax_compat.force_interpret(True):
        [grad] = fn(*inputs)
    np.testing.assert_allclose(np.asarray(grad), 2 * np.ones_like(X))


def test_vmap_limitation_on_tpu_interpret_is_unsupported_not_a_pass():
    from reference_kernels import norms

    spec = dataclasses.replace(norms.SOFTMAX, transforms=("vmap",))
    x = np.ones((2, 8, 128), np.float32)
    with Runner(spec, isolate="never") as runner, pytest.raises(Unsupported, match="dimension_semantics"):
        runner.check({"rows": 8, "cols": 128, "block_rows": 8}, (x,), registry.get("tpu_interpret"), {},
                     transform="vmap")
