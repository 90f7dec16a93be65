"""Integer and bool outputs: compared exactly, with a meaningful relative error."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from pallas_verify.tolerance import compare


def test_integer_mismatch_reports_its_relative_error():
    actual = np.array([158_000_005, 3, 0], np.uint32)
    expected = np.array([5, 3, 0], np.uint32)
    c = compare("out", actual, expected, None)
    assert c.n_bad == 1 and c.max_abs == 158_000_000
    assert c.max_rel == 158_000_000 / 5
    assert "max rel 3.16e+07" in c.describe()


def test_integer_mismatch_against_zero_is_infinitely_relative():
    c = compare("out", np.array([1, 2], np.int32), np.array([0, 2], np.int32), None)
    assert c.max_rel == np.inf and c.max_abs == 1


def test_sub_byte_integers_compare_exactly():
    expected = np.array([1, -2, 7], ml_dtypes.int4)
    c = compare("out", np.array([1, -2, -8], ml_dtypes.int4), expected, None)
    assert c.n_bad == 1 and c.max_abs == 15 and c.max_ulp == 15
    assert compare("out", expected.copy(), expected, None).ok
