"""Mosaic TPU compiler params of a traced function: read, overridden, named and counted
(``_jax_compat.params``), without compiling anything."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

from pallas_verify import _jax_compat

X = np.ones((8, 128), np.float32)


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _traced(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2
    pltpu.trace_value("total", jnp.sum(x_ref[...]))


def _printing(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        pl.debug_print("first block {}", x_ref[0, 0])

    o_ref[...] = x_ref[...]


def _call(body, x, params=None):
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,),
                          in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), compiler_params=params)(x)


def _jaxpr(fn):
    return jax.make_jaxpr(fn)(X)


def test_each_call_says_what_it_declares_and_what_outlives_it():
    def fn(x):
        y = _call(_double, x, pltpu.CompilerParams(vmem_limit_bytes=1 << 20, has_side_effects=True))
        y = jax.jit(lambda v: _call(_traced, v))(y)
        return _call(_printing, y, pltpu.CompilerParams(has_side_effects=pltpu.SideEffectType.DATAFLOW_SIDE_EFFECTING))

    first, second, third = _jax_compat.mosaic_calls(_jaxpr(fn))
    assert (first.index, first.name, first.side_effects, first.inside_jit) == (0, "_double", (), False)
    assert first.declared == {"vmem_limit_bytes": 1 << 20, "has_side_effects": "side_effecting"}
    assert first.side_effect_type == "side_effecting"
    assert second.side_effect_type == "pure" and second.inside_jit
    [line] = second.side_effects
    assert line.startswith("pltpu.trace_value (trace_value) at ") and "test_params.py" in line
    assert third.side_effect_type == "dataflow_side_effecting"
    assert [s.split(" (")[0] for s in third.side_effects] == ["a debug print or callback"]  # once, though in a cond


def test_overrides_reach_every_mosaic_call_and_leave_other_lowerings_alone():
    def fn(x):
        y = _call(_double, x)
        z = jax.jit(lambda v: _call(_double, v, pltpu.CompilerParams(dimension_semantics=("parallel",))))(y)
        return _call(_double, z, pltriton.CompilerParams())

    overrides = {"vmem_limit_bytes": 4 << 20, "allow_input_fusion": True, "has_side_effects": "dataflow_side_effecting",
                 "disable_bounds_checks": True}
    with _jax_compat.force_interpret(True):  # traced for the HLO interpreter, so it runs here
        rewritten = _jax_compat.with_compiler_params(_jaxpr(fn), overrides)
    calls = _jax_compat.mosaic_calls(rewritten)
    assert len(calls) == 2  # the Triton call is not a Mosaic TPU one
    for call in calls:
        assert call.declared["vmem_limit_bytes"] == 4 << 20
        assert call.declared["allow_input_fusion"] == [True] * call.operands
        assert call.declared["has_side_effects"] == "dataflow_side_effecting"
        assert call.declared["disable_bounds_checks"] is True
    assert calls[1].declared["dimension_semantics"] == ["parallel"]  # the kernel's own fields stay
    params = [e.params["compiler_params"] for e in _jax_compat.equations(rewritten.jaxpr) if e.primitive.name == "pallas_call"]
    assert isinstance(params[-1], pltriton.CompilerParams)
    np.testing.assert_array_equal(_jax_compat.evaluator(rewritten)(X)[0], X * 8)  # it still computes the same


def test_bool_side_effects_stay_bools():
    rewritten = _jax_compat.with_compiler_params(_jaxpr(lambda x: _call(_double, x)), {"has_side_effects": True})
    [call] = _jax_compat.mosaic_calls(rewritten)
    assert call.side_effect_type == "side_effecting"


def test_tagged_calls_sit_in_named_scopes_and_are_counted_in_hlo_text():
    tagged = _jax_compat.tagged(_jaxpr(lambda x: _call(_double, _call(_double, x))))
    scopes = [str(e.source_info.name_stack) for e in tagged.jaxpr.eqns if e.primitive.name == "pallas_call"]
    assert scopes == ["pv_kernel_0", "pv_kernel_1"]
    hlo = "\n".join([
        '  %pv_kernel_0.3 = f32[8,128] fusion(%a), kind=kCustom, calls=%fused, metadata={op_name="jit(f)/pv_kernel_0/pallas_call"}',
        '  ROOT %x.4 = f32[8,128] custom-call(%b), custom_call_target="tpu_custom_call", metadata={op_name="jit(f)/pv_kernel_0/pallas_call"}',
        '  %pv_kernel_1.1 = f32[8,128] custom-call(%c), custom_call_target="tpu_custom_call", metadata={op_name="jit(f)/pv_kernel_1/pallas_call"}',
        '  %pv_kernel_1.2 = f32[8,128] custom-call(%c), custom_call_target="tpu_custom_call", metadata={op_name="jit(f)/pv_kernel_1/pallas_call"}',
        '  %other = f32[8,128] custom-call(%c), custom_call_target="tpu_custom_call", metadata={op_name="jit(f)/pallas_call"}',
    ])
    assert _jax_compat.count_calls(hlo) == {0: 1, 1: 2}  # a fusion around a call counts once


@pytest.mark.parametrize(("kind", "mib"), [("TPU v4", 16), ("TPU v5 lite", 128), ("TPU v5", 64), ("TPU v6 lite", 128),
                                          ("TPU7x", 64)])
def test_vmem_per_core_comes_from_jax_s_chip_table(kind, mib):
    assert _jax_compat.tpu_vmem_bytes(kind) == mib << 20


def test_an_unknown_device_kind_is_named():
    with pytest.raises(ValueError, match="'TPU v9'"):
        _jax_compat.tpu_vmem_bytes("TPU v9")
