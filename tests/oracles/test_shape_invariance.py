"""The shape_invariance rerun: the same rows inside an array twice as long must give the same
bits (``oracles/shape_invariance.py``, plan in ``_jax_compat/shapes.py``), where the kernel
claims it and its spec allows it."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import find
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from pallas_verify import _jax_compat
from pallas_verify.backends import registry
from pallas_verify.oracles.shape_invariance import grown, sliced
from pallas_verify.runner import Runner
from reference_kernels.mutants import shapes

X = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
ROWS = pl.BlockSpec((8, 128), lambda i: (i, 0))


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _call(x, *, index=None, params=None):
    spec = ROWS if index is None else pl.BlockSpec((8, 128), index)
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // 8,),
                          in_specs=[spec], out_specs=ROWS, compiler_params=params)(x)


def _plan(fn, *args):
    return _jax_compat.shape_plan(jax.make_jaxpr(fn)(*args))


def test_inputs_grow_by_copies_and_outputs_are_cut_back():
    x, w = np.ones((2, 3)), np.zeros((3, 4))
    big_x, same_w = grown([x, w], [0, None])
    assert big_x.shape == (4, 3) and same_w is w
    assert sliced([np.ones((4, 4))], [np.ones((2, 4))], [0])[0].shape == (2, 4)
    assert sliced([np.ones((3, 4))], [np.ones((2, 4))], [0]) is None  # the kernel did not grow with them


def test_the_plan_follows_the_grid_axis_the_blocks_are_indexed_by():
    plan = _plan(shapes.size_tiled_matmul_spec.kernel, np.ones((8, 256), np.float32), np.ones((256, 128), np.float32))
    assert (plan.call, plan.grid_axis, plan.semantics) == ("_rows_matmul_kernel", 0, "parallel")
    assert (plan.inputs, plan.outputs) == ((0, None), (0,))  # the weights are not tiled along the rows
    assert _plan(jax.jit(_call), X).inputs == (0,)  # through a jit around the call


@pytest.mark.parametrize(("fn", "reason"), [
    (lambda x: _call(x, params=pltpu.CompilerParams(shape_invariant_numerics=False)),
     "declare shape_invariant_numerics=False"),
    (lambda x: _call(x, index=lambda i: ((i + 1) % 2, 0)), "computed from the grid index"),
    (lambda x: _call(_call(x)), "2 kernel call(s)"),
    (lambda x: _call(x)[:8], "output 0 is changed by the function after the call"),
    (lambda x: _call(x * 2), "input 0 is computed by the function before the call"),
])
def test_a_kernel_without_a_plan_says_why(fn, reason):
    assert reason in _plan(fn, X)


def _check(spec, backend="tpu_interpret"):
    config = find(spec.configs, lambda _: True)
    inputs = tuple(find(spec.inputs(config), lambda _: True))
    with Runner(spec, isolate="never") as runner:
        found = runner.check(config, inputs, registry.get(backend), {})
        return found, runner.references.notes


def test_rows_rounded_by_a_tile_chosen_from_the_shape_are_found():
    [finding], _ = _check(shapes.size_tiled_matmul_spec)
    assert finding.kind == "shape_invariance"
    assert "grid axis 0 grown 2 times" in finding.message and "out: " in finding.message
    assert finding.evidence["grown_shapes"] == [[16, 256], [256, 128]]
    assert _check(shapes.k_tiled_matmul_spec) == ([], set())


def test_a_kernel_that_declares_no_invariance_is_not_held_to_it():
    unclaimed = dataclasses.replace(shapes.size_tiled_matmul_spec, name="unclaimed", kernel=_unclaimed_matmul)
    found, notes = _check(unclaimed)
    assert found == []
    assert any("declare shape_invariant_numerics=False" in n for n in notes), notes


def _unclaimed_matmul(x, w):
    """The mutant's kernel (its K tile chosen from the rows), declaring its numerics shape-dependent."""
    m, k = x.shape
    bk = k if m <= 8 else 128
    return pl.pallas_call(
        shapes._rows_matmul_kernel, grid=(m // 8, k // bk),
        in_specs=[pl.BlockSpec((8, bk), lambda i, kk: (i, kk)), pl.BlockSpec((bk, 128), lambda i, kk: (kk, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, kk: (i, 0)), out_shape=jax.ShapeDtypeStruct((m, 128), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(shape_invariant_numerics=False))(x, w)


def _per_block_share(x_ref, o_ref):  # each row divided by the number of row blocks
    o_ref[...] = x_ref[...] / jnp.float32(pl.num_programs(0))


def per_block_share(x):
    return pl.pallas_call(_per_block_share, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // 8,),
                          in_specs=[ROWS], out_specs=ROWS)(x)


def test_rows_the_reference_computes_from_the_array_s_extent_are_left_out():
    spec = pv.KernelSpec(name="per_block_share", kernel=per_block_share,
                         reference=lambda x: x / (x.shape[0] // 8), configs=st.just({}), inputs=lambda c: st.just((X,)))
    found, notes = _check(spec)
    assert found == []
    assert notes == {"tpu_interpret: the shape_invariance rerun was left out (the reference's rows depend on the other "
                     "rows along the tiled axis)"}


def test_the_rerun_checks_the_first_example_and_one_every_few_after_at_most_three():
    from pallas_verify.case import Case
    from pallas_verify.oracles.shape_invariance import RERUNS_PER_BACKEND, SPACING, ShapeRerun

    spec = pv.KernelSpec(name="copy_rows", kernel=lambda x, n: _call(x), reference=lambda x, n: x, configs=st.just({}),
                         inputs=lambda _: st.just((X,)))
    notes: set[str] = set()
    shape = ShapeRerun(notes=notes)
    due = [shape.due(Case(spec=spec, config={"n": n}, inputs=(np.zeros((8 * (n + 1), 128), np.float32),),
                          backend="tpu_interpret")) is not None for n in range(4 * SPACING)]
    assert [i for i, d in enumerate(due) if d] == [0, SPACING, 2 * SPACING][:RERUNS_PER_BACKEND]
    assert any("one every 5 after, at most 3" in n for n in notes), notes
