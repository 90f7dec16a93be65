"""Ragged sizes and array shapes: every kind appears, budgets hold, shrinking reaches one block."""

import math

from hypothesis import find, given, settings
from hypothesis import strategies as st

import strategies as pvs

FIND = settings(database=None, max_examples=500)


@given(st.data(), st.integers(1, 300), st.integers(1, 6))
def test_ragged_sizes_stay_within_the_block_budget(data, block, max_blocks):
    size = data.draw(pvs.ragged_sizes(block=block, max_blocks=max_blocks))
    assert size >= 1
    assert math.ceil(size / block) <= max_blocks


@given(st.data(), st.sampled_from(pvs.RAGGED_KINDS))
def test_each_kind_alone_gives_sizes_of_that_kind(data, kind):
    block = 128
    size = data.draw(pvs.ragged_sizes(block=block, max_blocks=4, kinds=(kind,)))
    remainder = size % block
    expected = {
        "exact": remainder == 0,
        "short": remainder == block - 1,
        "over": remainder == 1,
        "small": size < block,
        "prime": size > 1 and all(size % p for p in range(2, math.isqrt(size) + 1)),
    }
    assert expected[kind], (kind, size)


def test_every_kind_of_raggedness_is_reachable():
    strategy = pvs.ragged_sizes(block=8, max_blocks=4)
    assert find(strategy, lambda s: s % 8 == 7, settings=FIND) == 7
    assert find(strategy, lambda s: s % 8 == 1, settings=FIND) == 9
    assert find(strategy, lambda s: s == 5, settings=FIND) == 5
    assert find(strategy, lambda s: s in (13, 29), settings=FIND) in (13, 29)


def test_ragged_sizes_shrink_to_one_block():
    assert find(pvs.ragged_sizes(block=128), lambda s: True, settings=FIND) == 128
    assert find(pvs.ragged_sizes(block=8), lambda s: s % 8, settings=FIND) == 7


def test_impossible_kinds_are_left_out():
    # block 1 has no 'small' size and one block leaves no room for 'over'.
    sizes = pvs.ragged_sizes(block=1, max_blocks=1, kinds=("exact", "small", "over"))
    assert find(sizes, lambda s: True, settings=FIND) == 1


@given(st.data(), st.lists(st.integers(1, 200), min_size=1, max_size=3), st.integers(1, 12))
def test_array_shapes_respect_the_grid_budget(data, block_shape, budget):
    shape = data.draw(pvs.array_shapes(block_shape=block_shape, max_grid_points=budget))
    assert len(shape) == len(block_shape)
    assert math.prod(math.ceil(a / b) for a, b in zip(shape, block_shape, strict=True)) <= budget


def test_array_shapes_shrink_to_the_block_shape():
    strategy = pvs.array_shapes(block_shape=(8, 128))
    assert find(strategy, lambda s: True, settings=FIND) == (8, 128)
    assert find(strategy, lambda s: s[1] % 128, settings=FIND) == (8, 127)
