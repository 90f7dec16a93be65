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


# --- overrides of a Mosaic TPU kernel's own params (the mosaic_tpu backends' modes) ---------

MIB = 1 << 20


def test_tpu_choices_are_read_from_the_upstream_field_types():
    from jax.experimental.pallas import tpu as pltpu

    assert pvs.tpu_field_choices("has_side_effects") == (False, True, *(t.value for t in pltpu.SideEffectType))
    for field in ("allow_input_fusion", "fuse_transposed_lhs_in_matmul", "disable_bounds_checks"):
        assert pvs.tpu_field_choices(field) == (False, True)


def test_vmem_limits_sit_around_the_chip_s_vmem():
    assert [v // MIB for v in pvs.vmem_limits(16 * MIB)] == [16, 15, 17, 8, 4, 2, 1, 32]


def test_overrides_shrink_to_none():
    assert find(pvs.mosaic_tpu_compiler_overrides(vmem_bytes=16 * MIB), lambda _: True) == {}


@given(pvs.mosaic_tpu_compiler_overrides(vmem_bytes=64 * MIB, fields=("vmem_limit_bytes", "has_side_effects")))
def test_every_override_is_a_drawn_field_with_a_legal_value(drawn):
    from jax.experimental.pallas import tpu as pltpu

    assert set(drawn) <= {"vmem_limit_bytes", "has_side_effects"}
    assert drawn.get("vmem_limit_bytes", 64 * MIB) in pvs.vmem_limits(64 * MIB)
    side = drawn.get("has_side_effects", False)
    pltpu.CompilerParams(has_side_effects=side if isinstance(side, bool) else pltpu.SideEffectType(side))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"vmem_bytes": 0}, "vmem_bytes"), ({"vmem_bytes": 16 * MIB, "fields": ("flags",)}, "flags"),
    ({"vmem_bytes": 16 * MIB, "fields": "vmem_limit_bytes"}, "fields"),
])
def test_bad_override_arguments_are_named(kwargs, match):
    with pytest.raises(pvs.StrategyError, match=match):
        pvs.mosaic_tpu_compiler_overrides(**kwargs)
