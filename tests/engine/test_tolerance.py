"""Tolerances by dtype, ULP distance, and the mismatch table."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pallas_verify as pv
from pallas_verify.tolerance import compare, default_tolerance, element_errors, ulp_distance


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


def test_headline_counts_nan_disagreements_before_any_error_norm():
    expected = np.arange(1024, dtype=np.float32).reshape(32, 32)
    truth = expected.astype(np.float64)
    text = compare("out", np.full((32, 32), np.nan, np.float32), expected, None, truth).describe()
    assert text.startswith("out: shape=(32, 32) dtype=float32: 1024/1024 bad (100%), "
                           "1024 of 1024 elements NaN where float64 is finite, first bad at (0, 0)"), text
    assert "kernel error" not in text and "max abs" not in text  # no norm over zero finite elements


def test_headline_counts_each_kind_of_non_finite_disagreement_then_judges_the_rest():
    expected = np.array([1.0, 2.0, 3.0, np.nan, np.inf, 6.0], np.float32)
    actual = np.array([np.nan, np.nan, np.inf, 4.0, np.inf, 7.0], np.float32)
    truth = np.array([1.0, 2.0, 3.0, np.nan, 5.0, 6.0])
    judged = compare("out", actual, expected, None, truth)
    assert judged.nonfinite == ("2 of 6 elements NaN where float64 is finite",
                                "1 of 6 elements inf where float64 is finite",
                                "1 of 6 elements finite where float64 is NaN")
    assert judged.finite == 1 and judged.n_bad == 5  # 7 where 6 is expected; inf where inf is
    text = judged.describe()
    nan_at, norm_at = text.index("2 of 6 elements NaN"), text.index("over the 1 element finite on both sides")
    assert nan_at < norm_at < text.index("kernel error") < text.index("max abs 1")
    # Without a ground truth the reference is named; infinities keep their sign.
    bare = compare("out", np.array([-np.inf], np.float32), np.array([np.inf], np.float32), None)
    assert bare.nonfinite == ("1 of 1 element -inf where the reference is inf",)


def test_element_errors_treat_nan_and_inf_like_values():
    actual = np.array([1.0, np.nan, np.inf, np.nan, 2.0], np.float32)
    expected = np.array([1.0, np.nan, np.inf, 1.0, 2.5], np.float32)
    assert element_errors(actual, expected).tolist() == [0.0, 0.0, 0.0, float("inf"), 0.5]


def test_the_headline_measures_relative_and_ulp_errors_away_from_cancellation():
    rng = np.random.default_rng(0)
    expected = rng.uniform(0.5, 2.0, 1000).astype(np.float32)
    expected[:10] = np.float32(1e-9)  # outputs that cancel to near zero
    actual = expected + np.float32(1e-6)  # the same absolute error everywhere
    c = compare("out", actual, expected, pv.Tolerance(rtol=0.0, atol=1e-3))
    assert c.max_abs == pytest.approx(1e-6, rel=0.2) and c.scale == pytest.approx(2.0, rel=1e-2)  # float32 rounding
    assert c.max_rel < 3e-6 and c.max_ulp <= 20  # not 1000 and ~1e7 ULP from the near-zero elements
    assert "(scale 2: max |reference|)" in c.describe() and "above 1/1024 of the scale" in c.describe()

