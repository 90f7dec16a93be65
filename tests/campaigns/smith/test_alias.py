"""smith's aliases: any input read with the identity map, its operand index after the
scalar-prefetch table's, another input read through the table after the aliased writes."""

from __future__ import annotations

import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.campaigns.smith.source import compile_program, program_source

from ._classes import planted

# x0 + x1 over two row blocks, written over x0; x1's block at step g is table[g] = (1, 0)[g].
_PROGRAM = {"skeleton": "map", "semantics": ("arbitrary", "arbitrary"), "vmem_limit": None, "shape": (16, 128),
            "block": (8, 128), "grid": (2, 1), "order": (0, 1), "table": (0, (1, 0)),
            "inputs": (((16, 128), "float32", ("identity",)), ((16, 128), "float32", ("table", 0, None))),
            "outputs": (((16, 128), "float32", ("bin", "add", ("in", 0), ("in", 1))),), "alias": True,
            "alias_input": 0, "store_masks": (None,), "load_masks": (None, None), "vmap": None}
_X0 = np.arange(16 * 128, dtype=np.float32).reshape(16, 128) % 13
_X1 = -3 * _X0 - 1


def _run(interpret: object) -> np.ndarray:
    with pltpu.force_tpu_interpret_mode(interpret):
        return np.asarray(compile_program(_PROGRAM).kernel(_X0, _X1)[0])


@pytest.mark.parametrize("interpret", [True, pltpu.InterpretParams()], ids=["interpret", "tpu_interpret"])
def test_an_alias_after_the_table_runs_on_both_interpreters(interpret: object) -> None:
    assert "input_output_aliases={1: 0}" in program_source(_PROGRAM)  # operand 1: the table is operand 0
    expected = np.asarray(compile_program(_PROGRAM).reference(_X0, _X1)[0])
    np.testing.assert_array_equal(expected, _X0 + np.concatenate([_X1[8:], _X1[:8]]))
    np.testing.assert_array_equal(_run(interpret), expected)


def test_the_alias_sync_bug_shows_on_this_program() -> None:
    expected = np.asarray(compile_program(_PROGRAM).reference(_X0, _X1)[0])
    with planted("alias_sync_by_operand_index"):
        wrong = _run(True)
    assert not np.array_equal(wrong, expected)
    np.testing.assert_array_equal(_run(True), expected)
