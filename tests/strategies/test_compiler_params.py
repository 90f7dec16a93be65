"""Mosaic GPU compiler parameters drawn for plgpu kernels: legal, shrinking to the defaults."""

from __future__ import annotations

import pytest
from hypothesis import find, given
from jax.experimental.pallas import mosaic_gpu as plgpu

import strategies as pvs
from strategies.compiler_params import _gpu_semantics


def test_semantics_are_jax_s():
    assert _gpu_semantics() == pvs.GPU_DIMENSION_SEMANTICS


def test_shrinks_to_the_upstream_defaults():
    drawn = find(pvs.mosaic_gpu_compiler_params(grid_rank=1), lambda _: True)
    default = plgpu.CompilerParams()
    assert drawn == {"approx_math": default.approx_math, "unsafe_no_auto_barriers": default.unsafe_no_auto_barriers,
                     "max_concurrent_steps": default.max_concurrent_steps, "dimension_semantics": ("parallel",)}


@given(pvs.mosaic_gpu_compiler_params(grid_rank=2, max_concurrent_steps=3, approx_math=True))
def test_every_draw_builds_compiler_params(drawn):
    params = plgpu.CompilerParams(**drawn)
    assert params.approx_math is True
    assert 1 <= params.max_concurrent_steps <= 3
    assert len(params.dimension_semantics) == 2


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"grid_rank": -1}, "grid_rank"), ({"max_concurrent_steps": 0}, "max_concurrent_steps"),
    ({"approx_math": "yes"}, "approx_math"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(pvs.StrategyError, match=match):
        pvs.mosaic_gpu_compiler_params(**kwargs)
