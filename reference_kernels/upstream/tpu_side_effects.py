"""Plain-JAX reproducer: a ``has_side_effects=True`` kernel inside a ``jax.jit`` is dropped
when its result is unused (jax 0.12.0.1).

``pltpu.CompilerParams(has_side_effects=True)`` is documented to keep XLA from merging or
removing a kernel, and a bare ``pallas_call`` that sets it is lowered even when nothing uses
its result. Put the same call inside a ``jax.jit`` (as most kernel wrappers are) and JAX's
dead-code elimination drops the whole jit call before lowering: the declaration is a
param of the ``pallas_call`` equation, not an effect the jit's DCE looks at. Lowering
for TPU needs no TPU (an abstract TPU device); ``tests/catalog/test_tpu_side_effects.py``
keeps the reproducer showing it, so a fix upstream is noticed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

__all__ = ["custom_calls_when_unused"]


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _kernel(x: jax.Array) -> jax.Array:
    return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pltpu.CompilerParams(has_side_effects=True))(x)


def custom_calls_when_unused(*, inside_jit: bool) -> int:
    """How many TPU custom calls JAX lowers for a program that calls the side-effecting kernel
    once and returns its input (the kernel's result unused): 1 is right; JAX 0.12.0.1 lowers
    1 for the bare kernel and 0 when the kernel sits inside ``jax.jit``."""
    kernel = jax.jit(_kernel) if inside_jit else _kernel

    def program(x: jax.Array) -> jax.Array:
        kernel(x)
        return x

    device = AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    mesh = AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=device)
    with jax.sharding.use_abstract_mesh(mesh):
        lowered = jax.jit(program).trace(jax.ShapeDtypeStruct((8, 128), jnp.float32)).lower(lowering_platforms=("tpu",))
    return lowered.as_text().count("tpu_custom_call")
