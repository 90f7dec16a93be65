"""docs/seed-coverage.md has a row, with an explanation, for every field of the five Pallas
APIs in the installed JAX: a field added upstream fails this test until it is explained."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import tpu as pltpu

from pallas_verify import _jax_compat

DOC = Path(__file__).resolve().parents[2] / "docs" / "seed-coverage.md"
_ROW = re.compile(r"^\| ([^|]+) \| `([A-Za-z_]\w*)` \| (.+) \|$")


def _rows() -> dict[tuple[str, str], str]:
    rows = {}
    for line in DOC.read_text().splitlines():
        match = _ROW.match(line)
        if match:
            for api in match.group(1).split(", "):
                rows[(api.strip(), match.group(2))] = match.group(3)
    return rows


def _fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _apis() -> dict[str, list[str]]:
    return {
        "InterpretParams": _fields(pltpu.InterpretParams),
        "InterpretGPUParams": _fields(plgpu.InterpretGPUParams),
        "pltpu.CompilerParams": _fields(pltpu.CompilerParams),
        "plgpu.CompilerParams": _fields(plgpu.CompilerParams),
        "pallas_call": list(inspect.signature(pl.pallas_call).parameters),
        "GridMapping": [*_fields(_jax_compat.grid_mapping_class()), "check_invariants"],
    }


@pytest.mark.parametrize("api", list(_apis()))
def test_every_field_has_a_row_that_explains_it(api):
    rows = _rows()
    fields = _apis()[api]
    assert fields, api
    missing = [f for f in fields if (api, f) not in rows]
    assert not missing, f"docs/seed-coverage.md has no row for {api}: {missing}"
    short = [f for f in fields if len(rows[(api, f)].strip()) < 40]
    assert not short, f"rows of {api} without an explanation: {short}"


def test_no_row_names_a_field_jax_does_not_have():
    known = {(api, f) for api, fields in _apis().items() for f in fields}
    stale = sorted(set(_rows()) - known)
    assert not stale, f"docs/seed-coverage.md explains fields the installed JAX lacks: {stale}"
