"""approx_math: an executing GPU is judged with the documented error of PTX's approximate
instructions; everything else keeps the precision oracle."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from hypothesis import find

from pallas_verify.case import Case, Outcome
from pallas_verify.oracles.approx import APPROX_MATH, approx_math_case, uses_approx_math
from pallas_verify.oracles.differential import outcome_findings
from reference_kernels import gpu_params


@dataclasses.dataclass(frozen=True)
class _Gpu:
    executes: bool = True


def _case(approx: bool, backend: str = "mosaic_gpu:h100") -> Case:
    config = find(gpu_params.GPU_EXP_AFFINE.configs, lambda c: c["compiler_params"]["approx_math"] is approx)
    inputs = find(gpu_params.GPU_EXP_AFFINE.inputs(config), lambda x: bool(np.any(x[0])))
    return Case(spec=gpu_params.GPU_EXP_AFFINE, config=config, inputs=inputs, backend=backend)


def test_the_kernel_s_compiler_params_say_whether_it_uses_approx_math():
    for approx in (True, False):
        case = _case(approx)
        traced = jax.make_jaxpr(lambda *xs, c=case: gpu_params.GPU_EXP_AFFINE.kernel(*xs, **c.config))(*case.inputs)
        assert uses_approx_math(traced) is approx


def test_only_an_executing_gpu_with_approx_math_is_judged_with_its_error():
    assert approx_math_case(_case(True), _Gpu()).spec.tolerance == APPROX_MATH
    assert approx_math_case(_case(False), _Gpu()).spec.tolerance is None
    assert approx_math_case(_case(True), _Gpu(executes=False)).spec.tolerance is None
    assert approx_math_case(_case(True, "gpu_interpret"), _Gpu()).spec.tolerance is None


def test_an_error_within_the_documented_bound_passes_and_one_beyond_fails():
    case = _case(True)
    expected = [np.asarray(gpu_params.GPU_EXP_AFFINE.reference(*case.inputs, **case.config))]
    judged = approx_math_case(case, _Gpu())
    near = Outcome(outputs=(expected[0] * (1 + 2.0**-12),))
    far = Outcome(outputs=(expected[0] * (1 + 2.0**-8),))
    assert outcome_findings(judged, near, expected, ["out"]) == []
    assert [f.kind for f in outcome_findings(judged, far, expected, ["out"])] == ["mismatch"]
