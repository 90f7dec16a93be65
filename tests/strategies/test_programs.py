"""pallas_programs: valid programs whose emitted source round-trips and which shrink small."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from pallas_verify.campaigns.smith.source import compile_program, program_source
from strategies import InvalidStrategyValue, pallas_programs, program_productions
from strategies.programs import SKELETONS, input_values, program_inputs

# A test that the strategy draws some value takes the first one it draws: shrinking it
# (most of such a search's time) is for the tests of what the minimal example is.
FIRST_FOUND = tuple(p for p in Phase if p is not Phase.shrink)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pallas_programs())
def test_program_repr_and_source_round_trip(program: dict) -> None:
    again = eval(repr(program))
    assert again == program
    source = program_source(program)
    tree = ast.parse(source)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert names == {"kernel", "reference"}
    assert program_source(again) == source
    assert "pl.pallas_call(" in source and "interpret=" not in source
    assert f"skeleton:{program['skeleton']}" in program_productions(program)


@settings(max_examples=40, deadline=None)
@given(pallas_programs())
def test_blocks_are_tpu_legal(program: dict) -> None:
    for shape, _, role in program["inputs"]:
        assert all(n >= 1 for n in shape), (shape, role)
    block = program["block"]
    if program["skeleton"] != "matmul" and len(block) >= 2:
        shape = program["shape"]
        assert block[-1] == shape[-1] or block[-1] % 128 == 0
        assert block[-2] == shape[-2] or block[-2] % 8 == 0
    if program["skeleton"] == "dma":
        assert program["shape"][0] % block[0] == 0  # DMAs never read past the array


@pytest.mark.parametrize("production", ["binary:mul", "skeleton:accumulate", "make_async_copy"])
def test_shrinks_to_a_small_program(production: str) -> None:
    minimal = find(pallas_programs(), lambda p: production in program_productions(p),
                   settings=settings(database=None, max_examples=2000))
    assert production in program_productions(minimal)
    assert len(program_productions(minimal)) <= 16
    points = 1
    for n in minimal["grid"]:
        points *= n
    assert points == 1


def test_minimal_program_is_the_identity_map() -> None:
    minimal = find(pallas_programs(), lambda p: p["skeleton"] == "map", settings=settings(database=None))
    assert minimal["outputs"][0][2] == ("in", 0) and len(minimal["inputs"]) == 1
    assert minimal["grid"] == (1,) and minimal["inputs"][0][1] == "float32"


@pytest.mark.parametrize("skeletons", [(), ("maps",), "map"])
def test_bad_skeletons(skeletons: object) -> None:
    with pytest.raises(InvalidStrategyValue, match=r"skeletons=.*choose a non-empty tuple from"):
        pallas_programs(skeletons=skeletons)  # type: ignore[arg-type]


@pytest.mark.parametrize("skeleton", SKELETONS)
def test_each_skeleton_alone(skeleton: str) -> None:
    @settings(max_examples=3, deadline=None, database=None)
    @given(pallas_programs(skeletons=(skeleton,)))
    def check(program: dict) -> None:
        assert program["skeleton"] == skeleton
        assert f"skeleton:{skeleton}" in program_productions(program)

    check()


def _reduction_and_inputs(**kw: object) -> st.SearchStrategy[tuple[dict, tuple]]:
    programs = pallas_programs(skeletons=("reduce",), max_depth=0, **kw)
    return programs.flatmap(lambda p: st.tuples(st.just(p), program_inputs(p)))


def _rows(program: dict, x: np.ndarray) -> np.ndarray:
    """Input 0's reduced rows (the reduced axis last), cut to the program's valid length."""
    rows = np.moveaxis(np.asarray(x), program["reduce"][1], -1)
    return rows if program.get("mask") is None else rows[..., :program["mask"]]


@pytest.mark.slow
@pytest.mark.parametrize("op", ["max", "min"])
def test_an_int32_reduced_row_of_one_sign_is_drawn(op: str) -> None:
    """A max over a row that is all negative (a min over one all positive) is wrong when
    the backend's identity is 0: the strategy draws such rows, and the reference agrees."""
    sign = -1 if op == "max" else 1

    def exposes(pair: tuple) -> bool:
        program, (x,) = pair
        if program["reduce"][:1] != (op,) or program["reduce"][2] != "int32" or program["outputs"][0][2] != ("in", 0):
            return False
        rows = _rows(program, x)
        return rows.shape[-1] > 0 and bool(np.any(np.all(rows * sign > 0, axis=-1)))

    program, inputs = find(_reduction_and_inputs(), exposes, settings=settings(database=None, max_examples=2000, derandomize=True))
    (out,) = compile_program(program).reference(*inputs)
    rows = _rows(program, inputs[0])
    whole = np.all(rows * sign > 0, axis=-1)
    assert np.all(np.asarray(out).reshape(whole.shape)[whole] * sign > 0)


@pytest.mark.slow
def test_an_empty_masked_row_reduces_to_the_identity() -> None:
    program = find(pallas_programs(skeletons=("reduce", "accumulate")),
                   lambda p: p["reduce"][2] == "int32" and p["reduce"][0] == "max" and p.get("mask") == 0,
                   settings=settings(database=None, max_examples=2000, derandomize=True, phases=FIRST_FOUND))
    assert "mask:empty_row" in program_productions(program)
    inputs = tuple(np.ones(s, np.dtype(d) if d != "bfloat16" else np.float32) for s, d, _ in program["inputs"])
    (out,) = compile_program(program).reference(*inputs)
    assert np.all(np.asarray(out) == np.asarray(np.iinfo(np.int32).min).astype(np.asarray(out).dtype))


@pytest.mark.slow
def test_a_masked_sum_whose_fill_matters_is_drawn() -> None:
    """Masked-off elements hold nonzero values, so a backend that ignored the ``where``
    fill would sum them: the reference's result differs from the unmasked sum."""

    def exposes(pair: tuple) -> bool:
        program, (x,) = pair
        mask = program.get("mask")
        expr = program["outputs"][0][2]
        if program["reduce"][0] != "sum" or ("in", 0) not in (expr, expr[-1]) or mask in (None, 0):
            return False
        rows = np.moveaxis(np.asarray(x, np.float64), program["reduce"][1], -1)
        return mask < rows.shape[-1] and bool(np.any(rows[..., mask:] != 0))

    program, inputs = find(_reduction_and_inputs(), exposes, settings=settings(database=None, max_examples=2000, derandomize=True))
    assert "mask:valid_length" in program_productions(program)
    (out,) = compile_program(program).reference(*inputs)
    unmasked = np.asarray(inputs[0], np.float64).sum(axis=program["reduce"][1], keepdims=True)
    assert not np.array_equal(np.asarray(out, np.float64), unmasked)


@pytest.mark.parametrize("kind", ["negative", "positive", "offset", "extreme"])
def test_input_value_ranges(kind: str) -> None:
    checks = {
        "negative": lambda a: a.size > 0 and np.all(a < 0),
        "positive": lambda a: a.size > 0 and np.all(a > 0),
        "offset": lambda a: a.size > 0 and np.all(np.abs(a) >= 500),
        "extreme": lambda a: np.any(np.abs(a) == float(np.finfo(np.float32).max)),
    }
    for dtype in ("int32", "float32", "bfloat16"):
        if kind == "extreme" and dtype != "float32":
            continue
        found = find(input_values(shape=(3, 5), dtype=dtype), lambda a: checks[kind](np.asarray(a, np.float64)),
                     settings=settings(database=None, max_examples=2000, phases=FIRST_FOUND))
        assert found.shape == (3, 5) and str(found.dtype) == dtype


def test_input_values_shrink_to_the_mixed_range() -> None:
    minimal = find(input_values(shape=(2, 3), dtype="float32"), lambda a: True, settings=settings(database=None))
    assert np.all(np.asarray(minimal) == 0)
