"""Dimension semantics keep parallel axes a prefix and reductions arbitrary."""

from hypothesis import find, given, settings
from hypothesis import strategies as st

import strategies as pvs

FIND = settings(database=None, max_examples=500)


@st.composite
def grids_with_reductions(draw):
    num_axes = draw(st.integers(0, 5))
    reductions = draw(
        st.lists(st.integers(0, max(num_axes - 1, 0)), unique=True, max_size=num_axes)
    )
    return num_axes, tuple(reductions) if num_axes else ()


def _is_prefix(semantics):
    parallel = [s == "parallel" for s in semantics]
    return parallel == sorted(parallel, reverse=True)


@given(st.data(), grids_with_reductions())
def test_semantics_satisfy_the_prefix_rule_and_keep_reductions_arbitrary(data, grid):
    num_axes, reductions = grid
    semantics = data.draw(pvs.dimension_semantics(num_axes=num_axes, reduction_axes=reductions))
    assert len(semantics) == num_axes
    assert set(semantics) <= set(pvs.SEMANTICS)
    assert _is_prefix(semantics)
    assert all(semantics[axis] == "arbitrary" for axis in reductions)


@given(st.data(), grids_with_reductions())
def test_unsafe_semantics_still_satisfy_the_prefix_rule(data, grid):
    num_axes, reductions = grid
    semantics = data.draw(
        pvs.unsafe_dimension_semantics(num_axes=num_axes, reduction_axes=reductions)
    )
    assert len(semantics) == num_axes
    assert _is_prefix(semantics)


def test_only_the_unsafe_variant_marks_a_reduction_parallel():
    unsafe = pvs.unsafe_dimension_semantics(num_axes=3, reduction_axes=(2,))
    assert find(unsafe, lambda s: s[2] == "parallel", settings=FIND) == ("parallel",) * 3
    safe = pvs.dimension_semantics(num_axes=3, reduction_axes=(2,))
    assert find(safe, lambda s: True, settings=FIND) == ("arbitrary",) * 3
    assert find(safe, lambda s: "parallel" in s, settings=FIND) == (
        "parallel",
        "arbitrary",
        "arbitrary",
    )
