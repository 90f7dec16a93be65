"""Interpreter modes: choices come from upstream, dicts are JSON-able, shrink to defaults."""

import dataclasses
import json
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import tpu as pltpu

import strategies as pvs

FIND = settings(database=None, max_examples=500)


@pytest.mark.parametrize(
    ("platform", "cls"), [("tpu", pltpu.InterpretParams), ("gpu", plgpu.InterpretGPUParams)]
)
def test_choices_are_the_literal_types_of_the_upstream_fields(platform, cls):
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if typing.get_origin(hints[field.name]) is typing.Literal:
            choices = pvs.literal_choices(platform)[field.name]
            assert set(choices) == set(typing.get_args(hints[field.name]))
            assert choices[0] == field.default


@given(pvs.tpu_interpret_modes(detect_races=None, max_cores=4))
def test_tpu_modes_are_json_dicts_that_build_interpret_params(mode):
    assert json.loads(json.dumps(mode)) == mode
    params = pvs.make_interpret_params(mode)
    assert isinstance(params, pltpu.InterpretParams)
    assert 1 <= params.num_cores_or_threads <= 4
    assert getattr(params, "on_race", "raise") == "raise"  # a field since JAX 0.12
    assert params.buffer_bounds == "logical"


@given(pvs.gpu_interpret_params(fixed={"uninitialized_memory": "zero"}))
def test_gpu_params_keep_pinned_fields(params):
    assert isinstance(params, plgpu.InterpretGPUParams)
    assert params.uninitialized_memory == "zero"
    assert params.detect_races


def test_modes_shrink_to_the_cheapest_sanitizer():
    assert find(pvs.tpu_interpret_modes(), lambda m: True, settings=FIND) == {
        "detect_races": True,
        "num_cores_or_threads": 1,
        "random_seed": 0,
        "out_of_bounds_reads": "raise",
        "uninitialized_memory": "nan",
        "dma_execution_mode": "on_wait",
    }
    assert find(pvs.gpu_interpret_modes(), lambda m: True, settings=FIND) == {
        "detect_races": True,
        "out_of_bounds_reads": "raise",
        "uninitialized_memory": "nan",
    }
    assert find(pvs.dma_execution_modes(), lambda m: True, settings=FIND) == "on_wait"
    two_cores = find(
        pvs.tpu_interpret_modes(), lambda m: m["num_cores_or_threads"] > 1, settings=FIND
    )
    assert two_cores["num_cores_or_threads"] == 2


def test_every_upstream_choice_is_drawn():
    modes = pvs.tpu_interpret_modes()
    first = settings(database=None, max_examples=200, phases=[Phase.generate])
    for field, values in pvs.literal_choices("tpu").items():
        if field in ("on_race", "buffer_bounds"):
            continue
        for value in values:
            assert (
                find(modes, lambda m, f=field, v=value: m[f] == v, settings=first)[field] == value
            )
    assert set(pvs.literal_choices("tpu")["dma_execution_mode"]) == {"eager", "on_wait"}


def _double(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(
        kernel,
        out_shape=out,
        grid=(2,),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pvs.tpu_interpret_modes())
def test_drawn_modes_run_a_kernel_in_tpu_interpret_mode(mode):
    x = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
    with pltpu.force_tpu_interpret_mode(pvs.make_interpret_params(mode)):
        out = _double(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)
