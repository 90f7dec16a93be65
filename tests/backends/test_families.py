"""The one table of compile families and what is derived from it."""

from __future__ import annotations

import pytest

from pallas_verify.backends import families
from pallas_verify.backends.compiled import compile_backends
from pallas_verify.backends.lowering import unsupported_reason
from pallas_verify.execution.placement import RAY_ACCELERATOR_TYPES, hardware_for
from strategies._dtypes import BACKEND_FAMILIES, FAMILY_DTYPES


def test_the_family_table_names_the_families_strategies_draws_dtypes_for():
    assert tuple(f.name for f in families.FAMILIES) == BACKEND_FAMILIES == tuple(FAMILY_DTYPES)


def test_every_family_compiles_for_every_target_of_its_platform():
    names = [b.name for b in compile_backends()]
    assert len(names) == len(set(names))
    for f in families.FAMILIES:
        chips = families.TPU_CHIPS if f.platform == "tpu" else families.GPU_TARGETS
        assert {n for n in names if n.startswith(f.name + ":")} == {f"{f.name}:{c.name}" for c in chips}
    assert {b.family for b in compile_backends() if b.platforms == frozenset({"gpu"})} == {"triton", "mosaic_gpu"}


def test_a_lowering_another_family_serves_is_named_with_how_to_ask_for_it():
    reason = unsupported_reason("triton", ["mosaic_tpu"])
    assert reason is not None and "pltpu.CompilerParams" in reason and "pl.triton.CompilerParams" in reason
    assert unsupported_reason("mosaic_tpu", ["default"]) is None
    assert unsupported_reason("mosaic_gpu", ["default"]) is not None


def test_placement_reads_platforms_and_ray_types_from_the_table():
    assert hardware_for("mosaic_gpu:h100") == "gpu:h100" and hardware_for("mosaic_tpu:v5e") == "tpu:v5e"
    assert RAY_ACCELERATOR_TYPES["v5e"] == "TPU-V5LITEPOD" and RAY_ACCELERATOR_TYPES["b200"] == "B200"


def test_an_unknown_family_is_named_with_the_choices():
    with pytest.raises(KeyError, match=r"'cuda'.*mosaic_tpu"):
        families.family("cuda")
