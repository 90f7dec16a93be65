"""aliasing: reads of an aliased input after its elements were written back, found statically."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.grid import alias as aliasing
from pallas_verify.grid.check import check_grid, grid_mappings, grid_points
from reference_kernels.mutants import hazards

BM, BK = 8, 128
X = jax.ShapeDtypeStruct((4 * BM, BK), jnp.float32)


def _add_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...]


def in_place(x, *, maps, out_map, alias, semantics=("arbitrary",), grid=(4,), block=(BM, BK)):
    """out = a + b where a and b are ``x`` through ``maps``; output aliased to input ``alias``."""
    return pl.pallas_call(
        _add_kernel,
        grid=grid,
        in_specs=[pl.BlockSpec(block, m) for m in maps],
        out_specs=pl.BlockSpec(block, out_map),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={alias: 0},
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
    )(x, x)


def hazards_of(kernel, inputs=(X,), **config):
    return [i for i in check_grid(kernel, inputs, config) if i.kind == aliasing.ALIAS_HAZARD]


def _own(i):
    return (i, 0)


def _next(i):
    return ((i + 1) % 4, 0)


def _prev(i):
    return ((i + 3) % 4, 0)


def test_reading_the_next_block_through_the_alias_is_a_hazard_naming_points_and_fix():
    [issue] = hazards_of(in_place, maps=(_own, _next), out_map=_own, alias=1)
    assert issue.call == "_add_kernel"
    assert issue.operand == "input 1 aliased to output 0"
    assert issue.block == (0, 0)
    assert issue.grid_points == ((0,), (3,))  # written at (0,), read back at (3,)
    for text in ("input 1 aliased to output 0", "block (0, 0)", "(0,)", "(3,)", "elements [0:8, 0:128]",
                 "separate (un-aliased) input", "'arbitrary'"):
        assert text in issue.message


def test_reading_the_block_the_previous_step_wrote_is_a_hazard():
    # The fetch for step i is issued during step i - 1, while its write-back is in flight.
    [issue] = hazards_of(in_place, maps=(_own, _prev), out_map=_own, alias=1)
    assert issue.grid_points == ((0,), (1,))
    assert "the fetch for (1,) is issued during (0,) (prefetch)" in issue.message


def test_reading_and_writing_the_own_block_in_place_is_clean():
    assert hazards_of(in_place, maps=(_own, _next), out_map=_own, alias=0) == []


def test_hazard_only_under_the_two_core_split_says_so():
    def ahead(i):
        return (jnp.minimum(i + 1, 3), 0)

    assert hazards_of(in_place, maps=(_own, ahead), out_map=_own, alias=1, semantics=("arbitrary",)) == []
    [issue] = hazards_of(in_place, maps=(_own, ahead), out_map=_own, alias=1, semantics=("parallel",))
    assert "split over 2 cores" in issue.message
    assert issue.grid_points == ((2,), (1,))  # core 1 writes block 2, core 0 reads it


def test_accumulating_in_place_over_an_arbitrary_axis_is_clean_and_k_outer_is_not():
    acc, x = (jax.ShapeDtypeStruct(s, jnp.float32) for s in ((2 * BM, BK), (2 * BM, 2 * BK)))
    assert hazards_of(hazards.accumulate_in_place, (acc, x)) == []
    [issue] = hazards_of(hazards.accumulate_in_place, (acc, x), k_outer=True)
    assert issue.grid_points == ((0, 0), (1, 0))


def _window_kernel(x_ref, o_ref, *, rows):
    o_ref[...] = x_ref[rows] * 2


def windowed_in_place(x, *, offset, rows):
    """Output block i from a 16-row window of ``x`` at element row ``offset(i)``, in place."""
    return pl.pallas_call(
        functools.partial(_window_kernel, rows=rows),
        grid=(3,),
        in_specs=[pl.BlockSpec((pl.Element(2 * BM), BK), lambda i: (offset(i), 0))],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={0: 0},
    )(x)


def test_element_offsets_are_located_in_elements():
    config = {"offset": lambda i: i * BM, "rows": slice(0, BM)}
    [call] = grid_mappings(windowed_in_place, (X,), config)
    assert call.inputs[0].element_window == (2 * BM, None)
    lo, hi = aliasing.element_boxes(call.inputs[0], np.array([[8, 0]]))
    assert lo.tolist() == [[8, 0]]
    assert hi.tolist() == [[24, 128]]
    # Step i reads rows 8i:8i+16: its own block and the next, both written back later.
    assert hazards_of(windowed_in_place, **config) == []


def test_a_window_reaching_back_over_a_written_block_is_a_hazard():
    # Steps 0 and 1 share the window at row 0 (one fetch); step 2 fetches rows 8:24, and
    # rows 8:16 were written back by step 1. In block indices the window is "block 1".
    config = {"offset": lambda i: jnp.maximum(i - 1, 0) * BM, "rows": slice(BM, 2 * BM)}
    [issue] = hazards_of(windowed_in_place, **config)
    assert "elements [8:16, 0:128]" in issue.message
    assert issue.grid_points == ((1,), (2,))


def test_aliased_any_operands_are_left_to_the_kernel_and_not_flagged():
    def any_in_place(x):
        def body(x_hbm, o_hbm):
            del x_hbm, o_hbm

        return pl.pallas_call(
            body,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            input_output_aliases={0: 0},
        )(x)

    assert hazards_of(any_in_place) == []


def test_core_split_follows_contiguous_chunks_of_the_parallel_prefix():
    [call] = grid_mappings(in_place, (X,), {"maps": (_own, _own), "out_map": _own, "alias": 0,
                                            "semantics": ("parallel",)})
    points = grid_points(call.grid)
    assert aliasing.core_of(call, points, 1).tolist() == [0, 0, 0, 0]
    assert aliasing.core_of(call, points, 2).tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("mutant", hazards.MUTANTS[:3], ids=lambda m: m.name)
def test_hazard_mutants_are_flagged_and_their_twins_are_clean(mutant):
    for spec, flagged in ((mutant.spec, True), (mutant.twin, False)):
        inputs = tuple(np.asarray(x) for x in find(spec.inputs({}), lambda _: True))
        assert bool(hazards_of(spec.kernel, inputs)) is flagged, spec.name


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_grouped_and_pairwise_conflict_searches_agree_on_tiled_blocks(data):
    def events(n):
        blocks = np.array(data.draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1)), min_size=n, max_size=n)),
                          np.int64).reshape(n, 2)
        cores = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), np.int64)
        steps = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), np.int64)
        lo = blocks * np.array([BM, BK])
        return aliasing._Events(cores, steps, blocks, lo, lo + np.array([BM, BK]), blocks)

    reads, writes = events(data.draw(st.integers(1, 8))), events(data.draw(st.integers(1, 8)))
    grouped = aliasing._first_conflict(reads, writes, tiled=True)
    pairwise = aliasing._first_conflict(reads, writes, tiled=False)
    assert (grouped is None) == (pairwise is None)
    if grouped is not None:
        assert grouped[0] == pairwise[0]  # the same first read
        r, w = grouped
        assert (reads.block[r] == writes.block[w]).all()
        assert reads.core[r] != writes.core[w] or reads.step[r] > writes.step[w]


def test_a_large_in_place_grid_is_checked_by_blocks_not_pairwise():
    big = jax.ShapeDtypeStruct((8 * 2048, BK), jnp.float32)
    issues = check_grid(in_place, (big,), {"maps": (_own, lambda i: ((i + 1) % 2048, 0)), "out_map": _own,
                                           "alias": 1, "grid": (2048,), "semantics": ("parallel",)})
    assert [i.kind for i in issues] == ["alias_hazard"]
    assert issues[0].grid_points == ((0,), (2047,))  # the last step reads block 0 back


def test_an_aliased_window_that_cannot_be_located_is_skipped_with_the_reason():
    def bounded(x):
        return pl.pallas_call(
            _copy_rows,
            grid=(4,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(BM), BK), lambda i: (pl.ds(i * BM, BM), 0))],
            out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            input_output_aliases={0: 0},
        )(x)

    [issue] = [i for i in check_grid(bounded, (X,), {}) if i.operand == "input 0 aliased to output 0"]
    assert issue.kind == "skipped"
    assert not issue.is_finding
    assert "neither a block nor a pl.Element window" in issue.message


def _copy_rows(x_ref, o_ref):
    o_ref[...] = x_ref[...]
