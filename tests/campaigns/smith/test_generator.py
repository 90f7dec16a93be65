"""The program generator alone (no backend runs): what it never draws."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from strategies.programs import pallas_programs, program_hazards

# The shape of a false finding on correct JAX: int32(tanh(float32(iota))) in a loop
# program. tanh(8.0) is 0.99999977 when XLA folds the reference's constant iota and 1.0
# at run time, so the int32 output is 0 in the reference and 1 in the kernel.
_TANH_IOTA = {"skeleton": "loop", "semantics": ("parallel", "arbitrary"), "vmem_limit": None, "shape": (127, 487),
              "block": (32, 256), "grid": (4, 2), "order": (0, 1), "table": None,
              "inputs": (((127, 487), "float32", ("identity",)),),
              "outputs": (((127, 487), "int32",
                           ("cast", "int32", ("un", "tanh", ("cast", "float32", ("iota", 0))))),),
              "smem": False, "step_rows": 16, "stride": "none"}


def test_an_inexact_value_at_a_boundary_is_a_hazard() -> None:
    assert program_hazards(_TANH_IOTA) == ["output 0: tanh feeds a boundary"]
    as_float = {**_TANH_IOTA, "outputs": (((127, 487), "float32", _TANH_IOTA["outputs"][0][2][2]),)}
    assert program_hazards(as_float) == []  # a float32 output is judged with a tolerance
    compared = ("where", "lt", ("un", "tanh", ("in", 0)), ("const", "float32", 1), ("in", 0), ("const", "float32", 0))
    as_where = {**_TANH_IOTA, "outputs": (((127, 487), "float32", compared),)}
    assert program_hazards(as_where) == ["output 0: tanh feeds a boundary"]


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(pallas_programs())
def test_no_drawn_program_sends_an_inexact_value_to_a_boundary(program: dict) -> None:
    assert program_hazards(program) == [], program
    # ...nor meets a known upstream limitation (docs/upstream-findings.md): a masked store over
    # a tile with a trailing dim shorter than its first (TPU interpret mode's false
    # out-of-bounds error), a float8 copied in DMA chunks (the HLO interpreter's slow compile).
    if any(program.get("store_masks") or ()):
        tile = (program["step_rows"], program["block"][1]) if program["skeleton"] == "loop" else program["block"]
        assert all(n >= tile[0] for n in tile[1:]), program
    if program["skeleton"] == "dma":
        assert "float8" not in program["inputs"][0][1]


def test_a_program_read_back_from_a_json_report_gives_the_same_source() -> None:
    """A reproducer is written from the program as the report stores it (JSON: lists, not
    tuples); its source must define every iota its kernel and reference use (a smith
    reproducer once raised NameError: name 'i0' is not defined)."""
    import json

    from hypothesis import find, settings
    from hypothesis.errors import NoSuchExample

    from pallas_verify.campaigns.smith.source import program_source
    from strategies.programs import pallas_programs

    with pytest.raises(NoSuchExample):
        find(pallas_programs(), lambda p: program_source(json.loads(json.dumps(p))) != program_source(p),
             settings=settings(database=None, max_examples=300, derandomize=True))
