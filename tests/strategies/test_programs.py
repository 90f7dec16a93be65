"""pallas_programs: valid programs whose emitted source round-trips and which shrink small."""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, find, given, settings

from pallas_verify.campaigns.smith.source import program_source
from strategies import InvalidStrategyValue, pallas_programs, program_productions
from strategies.programs import SKELETONS


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
