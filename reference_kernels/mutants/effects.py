"""Mutants of side effects XLA cannot see: a kernel that reports a profiler value.

``pltpu.trace_value`` records a value in the profile of the running program: an effect
that outlives the call and that no output carries. Unless its ``pltpu.CompilerParams`` set
``has_side_effects``, XLA treats the ``pallas_call`` as pure, merges two calls on the same
inputs into one (CSE) and drops a call whose outputs are unused (DCE), so the value is
recorded fewer times than the program asks. The mutant leaves the flag at its default; the
twin sets it. Found by the ``mosaic_tpu:<chip>`` backends, which count the kernel's custom
calls in a compiled program that calls it three times.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant
from reference_kernels.mutants._inputs import seeded_arrays

ROWS, COLS = 16, 128
BLOCK_ROWS = 8
# The HLO interpreter has no rule for the profiler primitive (NotImplementedError: MLIR
# translation rule for primitive 'trace_value' not found for platform cpu).
_NO_HLO_RULE = ("pltpu.trace_value has no HLO-interpreter rule (NotImplementedError: MLIR translation rule for "
                "primitive 'trace_value' not found for platform cpu); checked on tpu_interpret and mosaic_tpu")


def _profiled_scale_kernel(x_ref, o_ref, *, scale: float):
    o_ref[...] = x_ref[...] * scale
    pltpu.trace_value("positive_elements", jnp.sum((x_ref[...] > 0).astype(jnp.int32)))


def profiled_scale(x, *, scale: float, has_side_effects: bool):
    """``x * scale`` in row blocks, each recording how many of its elements are positive."""
    return pl.pallas_call(
        functools.partial(_profiled_scale_kernel, scale=scale),
        grid=(x.shape[0] // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(has_side_effects=has_side_effects),
    )(x)


def _profiled_scale_ref(x, *, scale: float):
    return x * jnp.asarray(scale, x.dtype)


def _spec(name: str, *, has_side_effects: bool) -> KernelSpec:
    return KernelSpec(
        name=name,
        kernel=functools.partial(profiled_scale, has_side_effects=has_side_effects),
        reference=_profiled_scale_ref,
        configs=st.fixed_dictionaries({"scale": st.sampled_from([2.0, 0.5])}),
        inputs=lambda _config: seeded_arrays([(ROWS, COLS)]),
        platforms=("tpu",),
        features=("side_effects", "profiling"),
        unsupported={"interpret": _NO_HLO_RULE},
    )


profiled_scale_spec = _spec("profiled_scale", has_side_effects=True)
profiled_scale_merged_spec = _spec("profiled_scale_merged", has_side_effects=False)

MUTANTS = [
    Mutant(
        spec=profiled_scale_merged_spec,
        twin=profiled_scale_spec,
        expects=("side_effect",),
        bug="the kernel records a profiler value but leaves has_side_effects=False, so XLA merges and drops its calls",
    ),
]
