"""Tolerances by dtype, ULP distance, and the mismatch table."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pallas_verify as pv
from pallas_verify.tolerance import compare, default_tolerance, ulp_distance


@pytest.mark.parametrize(
    ("dtype", "rtol", "atol"),
    [(np.float32, 1.3e-6, 1e-5), (ml_dtypes.bfloat16, 1.6e-2, 1e-5), (np.float16, 1e-3, 1e-5),
     (np.int32, 0.0, 0.0), (np.int8, 0.0, 0.0), (np.bool_, 0.0, 0.0)],
)
def test_default_tolerances_follow_the_table(dtype, rtol, atol):
    tol = default_tolerance(np.dtype(dtype))
    assert (tol.rtol, tol.atol) == (rtol, atol)


def test_ulp_distance_counts_representable_steps_across_zero():
    one = np.float32(1.0)
    assert ulp_distance(np.array([np.nextafter(one, 2)]), np.array([one]))[0] == 1
    tiny = np.array([np.nextafter(np.float32(0), 1)])
    assert ulp_distance(tiny, -tiny)[0] == 2
    assert ulp_distance(np.array([0.0], np.float32), np.array([-0.0], np.float32))[0] == 0


def test_nan_positions_must_match_both_ways():
    actual = np.array([1.0, np.nan, 3.0], np.float32)
    expected = np.array([1.0, 2.0, np.nan], np.float32)
    result = compare("out", actual, expected, None)
    assert result.bad.tolist() == [False, True, True]
    assert compare("out", expected, expected, None).ok


def test_inf_must_match_sign():
    result = compare("out", np.array([np.inf], np.float32), np.array([-np.inf], np.float32), None)
    assert not result.ok


def test_integers_are_exact():
    assert not compare("out", np.array([1, 2], np.int32), np.array([1, 3], np.int32), None).ok


def test_override_tolerance_is_used():
    a, e = np.array([1.0], np.float32), np.array([1.1], np.float32)
    assert not compare("out", a, e, None).ok
    assert compare("out", a, e, pv.Tolerance(rtol=0.2, atol=0.0)).ok


def test_description_names_every_statistic():
    actual = np.zeros((4, 4), np.float32)
    expected = np.zeros((4, 4), np.float32)
    expected[2, 1] = 1.0
    text = compare("out[0]", actual, expected, None).describe()
    assert "out[0]: shape=(4, 4) dtype=float32: 1/16 bad (6.25%)" in text
    assert "max abs 1" in text and "max rel 1" in text and "max ULP" in text
    assert "first bad at (2, 1)" in text


def test_shape_and_dtype_problems_are_reported():
    assert "shape (2,) != expected (3,)" in compare("out", np.zeros(2), np.zeros(3), None).describe()
    assert "dtype" in compare("out", np.zeros(2, np.float32), np.zeros(2, np.float64), None).describe()
