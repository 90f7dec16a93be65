"""Mosaic TPU's block-shape rules, checked statically: the rules, the rules against real
deviceless Mosaic compiles, and a kernel with illegal blocks failing on the default backends."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pallas_verify._jax_compat import mosaic_block_problem as block_problem
from pallas_verify.backends import families
from pallas_verify.backends.lowering import compile_case
from pallas_verify.case import Case
from pallas_verify.engine import verify
from pallas_verify.loader import load_spec
from pallas_verify.testing import DEFAULT_BACKENDS

SPECS = Path(__file__).with_name("_tiling_specs.py")

# (dtype, array shape, block shape): legal or not, by the rules and by libtpu 0.0.50.1.
CASES = [
    ("float32", (14, 200), (7, 100)),  # neither dim tiles nor covers the array
    ("float32", (7, 100), (7, 100)),  # the whole array: any shape
    ("float32", (16, 100), (8, 100)),  # last dim whole, second-to-last a multiple of 8
    ("float32", (9, 130), (8, 128)),  # ragged arrays take tiled blocks
    ("float32", (14, 256), (7, 128)),
    ("bfloat16", (64, 512), (8, 128)),  # packed types: (8, 128) still compiles
    ("int8", (64, 512), (8, 128)),
    ("float8_e4m3fn", (64, 512), (24, 256)),
    ("float32", (64, 512), (4, 128)),
    ("float32", (64, 512), (8, 64)),
    ("float32", (2, 64, 512), (None, 8, 128)),  # leading dims are free
    ("float32", (2, 64, 512), (2, 4, 128)),
    ("float32", (64, 512), (8, None)),  # a squeezed minor dim counts as 1
    ("float32", (1024,), (128,)),  # 1-D: a power of two of at least 128 x (32 / bits)
    ("bfloat16", (1024,), (128,)),
    ("bfloat16", (1024,), (256,)),
    ("int8", (1024,), (256,)),
    ("int8", (4096,), (1024,)),  # a multiple of 1024
    ("float32", (1000,), (100,)),
    ("float32", (1000,), (1000,)),
]
LEGAL = {(d, a, b) for d, a, b in CASES} - {
    ("float32", (14, 200), (7, 100)), ("float32", (14, 256), (7, 128)), ("float32", (64, 512), (4, 128)),
    ("float32", (64, 512), (8, 64)), ("float32", (2, 64, 512), (2, 4, 128)), ("float32", (64, 512), (8, None)),
    ("bfloat16", (1024,), (128,)), ("int8", (1024,), (256,)), ("float32", (1000,), (100,)),
}


def _block_shape(block):
    return tuple(1 if b is None else b for b in block)


@pytest.mark.parametrize(("dtype", "array", "block"), CASES, ids=lambda v: str(v).replace(" ", ""))
def test_the_rules(dtype, array, block):
    problem = block_problem(_block_shape(block), array, dtype)
    assert (problem is None) == ((dtype, array, block) in LEGAL), problem


def test_the_rules_say_which_dimension_is_wrong():
    assert block_problem((7, 100), (14, 200), "float32") == (
        "its last dimension 100 is neither a multiple of 128 nor the array's 200; its second-to-last dimension 7 "
        "is neither a multiple of 8 nor the array's 14")
    assert "power of two of at least 256 for bfloat16" in block_problem((128,), (1024,), "bfloat16")
    assert block_problem((8, 128), (16, 128), "float32", "any") == "a block in memory space any must be the whole array (16, 128)"
    assert block_problem((1, 4), (16, 128), "int32", "smem") is not None
    assert block_problem((16, 128), (16, 128), "int32", "smem") is None


def _compiles(chip: str, dtype: str, array, block) -> bool:
    spec = load_spec(f"{SPECS}::COPY")
    x = np.zeros(array, dtype=getattr(ml_dtypes, dtype, None) or np.dtype(dtype))
    case = Case(spec=spec, config={"block": block}, inputs=(x,), backend=f"mosaic_tpu:{chip}", mode={},
                transform=None)
    outcome, _ = compile_case(case, family="mosaic_tpu", target=chip)
    return outcome.error is None


@pytest.mark.compile
@pytest.mark.parametrize("chip", [c.name for c in families.TPU_CHIPS])
def test_the_rules_agree_with_real_mosaic_compiles(chip):
    cases = CASES if chip == "v5e" else CASES[:4] + CASES[-4:]
    disagree = [(d, a, b) for d, a, b in cases if _compiles(chip, d, a, b) != ((d, a, b) in LEGAL)]
    assert disagree == []


def test_an_illegal_tpu_block_fails_on_the_default_backends(tmp_path):
    report = verify(load_spec(f"{SPECS}::ODD_BLOCKS"), list(DEFAULT_BACKENDS), max_examples=1, profile="ci",
                    out_dir=tmp_path, shrink_budget_s=0.0)
    static = next(f for f in report.findings if f.backend == "static")
    assert static.kind == "compile_error"
    assert static.message.startswith("_add_one: Mosaic TPU cannot compile this kernel's blocks")
    assert "block (7, 100) of x_ref (input 0), array (14, 200) float32: its last dimension 100" in static.message
    assert "(e.g. block (8, 128))" in static.message
    cells = {r.backend: r for r in report.results if r.transform is None}
    assert (cells["static"].status, cells["static"].reasons) == ("fail", ("compile_error",))
    assert "compile_error" not in cells["interpret"].reasons  # the interpreters run the blocks
    if "mosaic_tpu:v5e" in cells:  # libtpu installed: the compile itself fails too
        assert cells["mosaic_tpu:v5e"].status == "fail"
        assert any(f.backend == "mosaic_tpu:v5e" and f.kind == "compile_error" for f in report.findings)
