"""The static check on what real kernels do: scalar operands (rank-0 BlockSpecs), squeezed
dims, splash-style scalar-prefetch index maps, pl.kernel, and calls it cannot analyse."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.grid import check as gridcheck
from pallas_verify.grid import trace as gridtrace
from pallas_verify.grid.check import SKIPPED, check_grid, grid_mappings


def _scale(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[...]


def scaled(s, x, *, out_map=lambda i: (i, 0), semantics=("arbitrary",)):
    """x times a scalar operand passed through a rank-0 BlockSpec (as GPU decode attention's kv_seq_len)."""
    return pl.pallas_call(
        _scale,
        grid=(2,),
        in_specs=[pl.BlockSpec((), lambda i: ()), pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), out_map),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
    )(s, x)


S, X = np.float32(2.0), np.ones((16, 128), np.float32)


def test_rank0_block_spec_is_checked_not_crashed():
    assert check_grid(scaled, (S, X), {}) == []
    (call,) = grid_mappings(scaled, (S, X), {})
    assert call.inputs[0].array_shape == () and call.inputs[0].block_shape == ()
    assert gridtrace.block_indices(call, call.inputs[0], gridtrace.grid_points(call.grid)).shape == (2, 0)
    # The other operands are still judged: a racy output next to a scalar operand is found.
    issues = check_grid(scaled, (S, X), {"out_map": lambda i: (0, 0), "semantics": ("parallel",)})
    assert [i.kind for i in issues] == ["race", "uninitialized_read"]


def _copy_rows(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def squeezed(x, *, out_map):
    return pl.pallas_call(
        _copy_rows,
        grid=(4,),
        in_specs=[pl.BlockSpec((None, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((pl.Squeezed(), 128), out_map),
        out_shape=jax.ShapeDtypeStruct((4, 128), jnp.float32),
    )(x)


def test_squeezed_dims_count_as_size_one_blocks():
    x = np.zeros((4, 128), np.float32)
    assert check_grid(squeezed, (x,), {"out_map": lambda i: (i, 0)}) == []
    (issue,) = check_grid(squeezed, (x,), {"out_map": lambda i: (i // 2, 0)})
    assert issue.kind == "uninitialized_read" and "2 of 4 blocks" in issue.message


def _copy_prefetched(steps_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]


def splash_like(steps, x):
    """As in jax's splash attention: index maps read a 2-D SMEM table with a constant row
    (a typed-int index), under a squeezed head dimension."""
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(2, steps.shape[1]),
        in_specs=[pl.BlockSpec((None, 8, 128), lambda h, i, s: (h, s[0, i], 0))],
        out_specs=pl.BlockSpec((None, 8, 128), lambda h, i, s: (h, s[0, i], 0)),
    )
    return pl.pallas_call(
        _copy_prefetched,
        grid_spec=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(steps, x)


def test_splash_style_prefetch_index_maps_are_evaluated():
    x = np.zeros((2, 32, 128), np.float32)
    assert check_grid(splash_like, (np.array([[3, 2, 1, 0]], np.int32), x), {}) == []
    issues = check_grid(splash_like, (np.array([[3, 3, 1, 0]], np.int32), x), {})
    assert [(i.kind, i.block) for i in issues] == [("uninitialized_read", (0, 2, 0))]
    issues = check_grid(splash_like, (np.array([[0, 1, 2, 4]], np.int32), x), {})
    assert [(i.kind, i.operand, i.block) for i in issues] == [
        ("out_of_bounds", "input 0", (0, 4, 0)), ("out_of_bounds", "output 0", (0, 4, 0)),
        ("uninitialized_read", "output 0", (0, 3, 0))]


def gridless(x):
    @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=pltpu.TensorCoreMesh(axis_name="c", num_cores=1))
    def copy(x_ref, o_ref):
        pltpu.sync_copy(x_ref, o_ref)

    return copy(x)


def test_pl_kernel_is_reported_as_skipped_with_the_reason():
    (issue,) = check_grid(gridless, (jax.ShapeDtypeStruct((8, 128), jnp.float32),), {})
    assert issue.kind == SKIPPED and not issue.is_finding
    assert issue.message.startswith("static check skipped for copy: ")
    assert "pl.kernel/core_map" in issue.message and "dynamic searches" in issue.message


def test_a_call_that_cannot_be_read_is_skipped_and_the_others_still_checked(monkeypatch):
    real = gridtrace._pallas_call

    def fails_on_first(eqn, args, position):
        if position == 0:
            raise NotImplementedError("a block dim of a future JAX")
        return real(eqn, args, position)

    def two_calls(x):
        y = squeezed(x, out_map=lambda i: (i, 0))
        return squeezed(y, out_map=lambda i: (i // 2, 0))

    monkeypatch.setattr(gridtrace, "_pallas_call", fails_on_first)
    skipped, unwritten = check_grid(two_calls, (jax.ShapeDtypeStruct((4, 128), jnp.float32),), {})
    assert skipped.kind == SKIPPED
    assert skipped.message == ("static check skipped for _copy_rows: its grid mapping could not be read "
                               "(NotImplementedError: a block dim of a future JAX)")
    assert unwritten.kind == "uninitialized_read"


def test_an_index_map_that_cannot_be_evaluated_is_skipped_with_the_reason(monkeypatch):
    def fails(call, operand, points):
        raise ValueError("Invalid type of idxer: Future")

    monkeypatch.setattr(gridcheck, "block_indices", fails)
    issues = check_grid(squeezed, (np.zeros((4, 128), np.float32),), {"out_map": lambda i: (i, 0)})
    assert [(i.kind, i.operand) for i in issues] == [(SKIPPED, "input 0"), (SKIPPED, "output 0")]
    assert issues[1].message == ("static check skipped for _copy_rows: the index_map of output 0 could not be "
                                 "evaluated (ValueError: Invalid type of idxer: Future); the dynamic searches "
                                 "still run it")


def test_calls_inside_shard_map_are_checked():
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))

    def sharded(s, x, **config):
        inner = lambda a: scaled(s, a, **config)  # noqa: E731
        return jax.shard_map(inner, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False)(x)

    assert check_grid(sharded, (S, X), {}) == []
    issues = check_grid(sharded, (S, X), {"out_map": lambda i: (0, 0), "semantics": ("parallel",)})
    assert [i.kind for i in issues] == ["race", "uninitialized_read"]


def element_rows(x):
    """Row windows at element offsets (pl.Element), as ragged kernels use them."""
    return pl.pallas_call(
        _copy_rows,
        grid=(2,),
        in_specs=[pl.BlockSpec((pl.Element(8), 128), lambda i: (i * 8, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
    )(x)


def test_element_dims_are_named_as_not_judged_and_the_rest_is_checked():
    (issue,) = check_grid(element_rows, (jax.ShapeDtypeStruct((16, 128), jnp.float32),), {})
    assert (issue.kind, issue.operand) == (SKIPPED, "input 0")
    assert issue.message.startswith("static check skipped for _copy_rows: input 0 has block dims Element(8)")


def bounded_rows(x):
    return pl.pallas_call(
        _copy_rows,
        grid=(2,),
        in_specs=[pl.BlockSpec((pl.BoundedSlice(8), 128), lambda i: (pl.ds(i * 8, 8), 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
    )(x)


def test_bounded_slice_dims_are_named_as_not_judged():
    (issue,) = check_grid(bounded_rows, (jax.ShapeDtypeStruct((16, 128), jnp.float32),), {})
    assert (issue.kind, issue.operand) == (SKIPPED, "input 0")
    assert "block dims BoundedSlice(8)" in issue.message
