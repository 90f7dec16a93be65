"""Arrays: dtype-aware, small by default, edge values on request, deterministic, cheap."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

import strategies as pvs

FIND = settings(database=None, max_examples=500)
ALL_DTYPES = [
    "float32",
    "bfloat16",
    "float16",
    "int32",
    "int8",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
]


@given(st.data(), st.sampled_from(ALL_DTYPES), st.lists(st.integers(0, 6), max_size=3))
def test_arrays_have_the_shape_dtype_and_small_values_asked_for(data, dtype, shape):
    array = data.draw(pvs.arrays(shape=shape, dtype=dtype))
    assert array.shape == tuple(shape)
    assert array.dtype == jnp.dtype(dtype)
    values = array.astype(np.float64)
    assert np.all(np.isfinite(values))
    edges = np.abs(np.asarray(pvs.edge_values(dtype), dtype=np.float64))
    big = np.abs(values) > pvs.DEFAULT_INT_MAGNITUDE
    assert np.isin(np.abs(values[big]), edges).all()
    assert big.sum() <= 4


@given(pvs.arrays(shape=(512, 512), dtype="bfloat16"))
def test_big_arrays_are_cheap_to_draw(array):
    assert array.shape == (512, 512)


def test_arrays_are_deterministic_from_the_draw():
    def run():
        seen = []

        @settings(derandomize=True, database=None, max_examples=15)
        @given(pvs.arrays(shape=(64, 64), dtype="float32"))
        def collect(array):
            seen.append(array.copy())

        collect()
        return seen

    first, second = run(), run()
    assert len(first) == len(second) > 5
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_nan_and_inf_only_when_asked():
    assert not any(np.isnan(v) for v in pvs.edge_values("float32"))
    assert np.isnan(pvs.edge_values("float32", allow_nan=True)).any()
    assert np.isinf(pvs.edge_values("float16", allow_infinity=True)).any()
    assert not np.isinf(pvs.edge_values("float8_e4m3fn", allow_infinity=True)).any()
    nan = find(pvs.arrays(shape=(4, 4), allow_nan=True), lambda a: np.isnan(a).any(), settings=FIND)
    assert np.isnan(nan.ravel()[0])
    assert not nan.ravel()[1:].any()


def test_edge_values_include_negative_zero_subnormals_and_large_values():
    edges = pvs.edge_values("float32")
    assert any(v == 0 and np.signbit(v) for v in edges)
    assert np.finfo(np.float32).smallest_subnormal in edges
    assert max(edges) ** 2 < np.finfo(np.float32).max
    negative_zero = find(
        pvs.arrays(shape=(3,)), lambda a: np.signbit(a).any() and not a.any(), settings=FIND
    )
    assert np.signbit(negative_zero[0])


def test_arrays_shrink_to_zeros():
    assert not find(pvs.arrays(shape=(8, 128)), lambda a: True, settings=FIND).any()
    ints = find(pvs.arrays(shape=(8,), dtype="int8"), lambda a: True, settings=FIND)
    assert ints.dtype == np.int8
    assert not ints.any()


def test_dtypes_shrink_to_float32_and_follow_the_backend():
    assert find(pvs.dtypes(), lambda d: True, settings=FIND) == "float32"
    tpu = pvs.dtypes(backend="mosaic_tpu:v5e", fp8=True)
    assert find(tpu, lambda d: d.startswith("float8"), settings=FIND) == "float8_e4m3fn"
    assert find(pvs.dtypes(backend="triton"), lambda d: d == "float16", settings=FIND)
    floats = pvs.dtypes(backend="mosaic_gpu", floating_only=True)
    with pytest.raises(NoSuchExample):
        find(floats, lambda d: "int" in d or d == "bool", settings=FIND)
