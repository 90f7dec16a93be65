"""KernelSpec validation: every bad field names itself, its value and the fix."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

import pallas_verify as pv


def _ok(*_, **__):
    return None


GOOD = {
    "name": "k",
    "kernel": _ok,
    "reference": _ok,
    "configs": st.just({}),
    "inputs": lambda config: st.just(()),
}

BAD = [
    ({"name": ""}, r"name=''"),
    ({"name": "has space"}, r"name='has space'.*letters, digits"),
    ({"name": 3}, r"name=3"),
    ({"kernel": "matmul"}, r"kernel='matmul' must be callable"),
    ({"reference": None}, r"reference=None must be callable"),
    ({"inputs": [1, 2]}, r"inputs=\[1, 2\] must be callable"),
    ({"configs": {"block": 128}}, r"configs=\{'block': 128\}.*SearchStrategy.*fixed_dictionaries"),
    ({"tolerance": 1e-3}, r"tolerance=0.001 must be None or pv.Tolerance"),
    ({"platforms": "tpu"}, r"platforms='tpu' must be a tuple of strings, e.g. \('tpu',\)"),
    ({"platforms": ("tpuu",)}, r"platforms item 'tpuu' is not one of .*Did you mean 'tpu'"),
    ({"platforms": ()}, r"platforms=\(\) must name at least one"),
    ({"features": ("ok", "")}, r"features item '' must be a non-empty string"),
    ({"transforms": ("vmpa",)}, r"transforms item 'vmpa'.*Did you mean 'vmap'"),
    ({"unsupported": {"mosaic_tpu:v4": ""}}, r"unsupported=.*must map backend globs to reasons"),
    ({"bitwise_stable": "yes"}, r"bitwise_stable='yes' must be True or False"),
]


@pytest.mark.parametrize(("change", "match"), BAD, ids=[next(iter(c)) + str(i) for i, (c, _) in enumerate(BAD)])
def test_bad_spec_is_rejected_with_the_field_and_value(change, match):
    with pytest.raises(pv.InvalidSpec, match=match):
        pv.KernelSpec(**{**GOOD, **change})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"rtol": -1.0, "atol": 0.0}, r"rtol=-1.0 must be finite and >= 0"),
     ({"rtol": 0.0, "atol": "1"}, r"atol='1' must be a number"),
     ({"rtol": float("nan"), "atol": 0.0}, r"rtol=nan")],
)
def test_bad_tolerance(kwargs, match):
    with pytest.raises(pv.InvalidSpec, match=match):
        pv.Tolerance(**kwargs)


def test_invalid_spec_is_a_type_error_under_the_root():
    assert issubclass(pv.InvalidSpec, TypeError)
    assert issubclass(pv.InvalidSpec, pv.PallasVerifyError)


def test_unsupported_globs_match_backend_names():
    spec = pv.KernelSpec(**GOOD, unsupported={"mosaic_tpu:v4": "int8 matmul needs v5+", "triton:*": "no triton"})
    assert spec.unsupported_reason("mosaic_tpu:v4") == "int8 matmul needs v5+"
    assert spec.unsupported_reason("triton:h100") == "no triton"
    assert spec.unsupported_reason("mosaic_tpu:v5e") is None


def test_valid_spec_normalises_lists_to_tuples():
    spec = pv.KernelSpec(**GOOD, platforms=["tpu", "gpu"], features=["ragged"])
    assert spec.platforms == ("tpu", "gpu")
    assert spec.features == ("ragged",)
