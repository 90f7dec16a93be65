"""smith's programs under ``jax.vmap``: drawn axes per operand (aliased ones included), the
reference vmapped the same way, on both interpreters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, settings
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.campaigns.smith.source import compile_program, program_source
from strategies.programs import batched_shape, program_productions, program_vmaps

from ._classes import planted

# x0 + x1 written over x0 (input 0 aliased to output 0), the aliased input batched along
# axis 1 (before its last two dims) and the second input not batched; outputs along axis 0.
_SHAPE = (2, 16, 128)
_ALIASED = {"skeleton": "map", "semantics": ("parallel",) * 3, "vmem_limit": None, "shape": _SHAPE,
            "block": (1, 8, 128), "grid": (2, 2, 1), "order": (0, 1, 2), "table": None,
            "inputs": ((_SHAPE, "float32", ("identity",)), (_SHAPE, "float32", ("identity",))),
            "outputs": ((_SHAPE, "float32", ("bin", "add", ("in", 0), ("in", 1))),), "alias": True,
            "alias_input": 0, "store_masks": (None,), "load_masks": (None, None), "vmap": (3, (1, None), 0)}


def _inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    return tuple(rng.integers(-50, 50, batched_shape(_SHAPE, _ALIASED["vmap"], k)).astype(np.float32)
                 for k in range(2))


def _run(interpret: object) -> list[np.ndarray]:
    with pltpu.force_tpu_interpret_mode(interpret):
        return [np.asarray(x) for x in compile_program(_ALIASED).kernel(*_inputs())]


def test_the_kernel_and_its_reference_are_vmapped_alike() -> None:
    source = program_source(_ALIASED)
    assert "kernel = jax.vmap(kernel, in_axes=(1, None), out_axes=0)" in source
    assert "reference = jax.vmap(reference, in_axes=(1, None), out_axes=0)" in source
    assert "dimension_semantics" not in source  # TPU interpret mode cannot vmap a kernel that sets them
    x0, x1 = _inputs()
    assert x0.shape == (2, 3, 16, 128) and x1.shape == _SHAPE
    expected = np.moveaxis(x0, 1, 0) + x1
    np.testing.assert_array_equal(np.asarray(compile_program(_ALIASED).reference(x0, x1)[0]), expected)


@pytest.mark.parametrize("interpret", [True, pltpu.InterpretParams()], ids=["interpret", "tpu_interpret"])
def test_an_aliased_input_batched_on_another_axis_runs_on_both_interpreters(interpret: object) -> None:
    x0, x1 = _inputs()
    expected = np.moveaxis(x0, 1, 0) + x1
    np.testing.assert_array_equal(_run(interpret)[0], expected)
    with planted("vmap_aliased_axis_not_moved"):  # the batching rule's bug shows on this program
        try:
            wrong = _run(interpret)[0]
        except Exception:  # failing outright shows it too
            return
    assert not np.array_equal(wrong, expected)


def test_every_operand_gets_a_drawn_axis_the_aliased_one_included() -> None:
    """``program_vmaps`` draws for every non-dma program (``pallas_programs``): here it reaches the
    aliased input on a non-zero axis beside an unbatched input, and shrinks to no vmap."""
    unbatched = {**_ALIASED, "vmap": None}
    found = find(program_vmaps(unbatched), lambda v: v is not None and v[1][0] not in (None, 0) and v[1][1] is None,
                 settings=settings(database=None, max_examples=500, derandomize=True))
    assert "vmap:aliased:other_axis" in program_productions({**unbatched, "vmap": found})
    assert find(program_vmaps(unbatched), lambda v: True) is None

