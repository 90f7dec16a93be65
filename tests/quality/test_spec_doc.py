"""docs/spec.md documents every KernelSpec field with its default, and its example builds."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pallas_verify as pv

DOC = Path(__file__).parents[2] / "docs" / "spec.md"


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        match = re.match(r"\| `(\w+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [c.strip() for c in match.group(2).split("|")]
    return rows


def test_every_kernelspec_field_is_documented_with_its_default():
    rows = _rows()
    for field in dataclasses.fields(pv.KernelSpec):
        assert field.name in rows, f"docs/spec.md has no row for KernelSpec.{field.name}"
        _, default, *_ = rows[field.name]
        if field.default is not dataclasses.MISSING:
            assert ast.literal_eval(default.strip("`")) == field.default, (field.name, default)
        elif field.default_factory is not dataclasses.MISSING:
            assert ast.literal_eval(default.strip("`")) == field.default_factory(), (field.name, default)
        else:
            assert default == "required", (field.name, default)


def test_the_example_spec_builds():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    names: dict[str, object] = {}
    exec(compile(code, str(DOC), "exec"), names)
    spec = names["SPEC"]
    assert isinstance(spec, pv.KernelSpec) and spec.transforms == ("vmap",)
