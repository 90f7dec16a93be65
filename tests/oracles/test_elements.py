"""A mismatch's element-level evidence: which elements are wrong, by how much in units of
the bound, NaN/inf disagreements marked, the worst elements' values."""

from __future__ import annotations

import json

import numpy as np

from pallas_verify.oracles.elements import MAX_SIDE, element_evidence
from pallas_verify.spec import Tolerance
from pallas_verify.tolerance import compare


def _picture(actual, expected, tolerance=None, truth=None):
    c = compare("out", actual, expected, tolerance, truth)
    return element_evidence(c, actual, expected, truth, tolerance)


def test_the_wrong_elements_and_their_error_in_units_of_the_tolerance():
    expected = np.zeros((4, 6), np.float32)
    actual = expected.copy()
    actual[1, 2], actual[3, 5] = 0.5, 2.0
    picture = _picture(actual, expected, Tolerance(atol=0.1, rtol=0.0))
    assert picture["pool"] == [1, 1]
    assert picture["errors"][1][2] == 5.0 and picture["errors"][3][5] == 20.0
    assert sum(v for row in picture["errors"] for v in row) == 25.0  # every other element exact
    assert "atol 0.1" in picture["unit"]
    assert [w["index"] for w in picture["worst"]] == [[3, 5], [1, 2]]
    assert picture["worst"][0] == {"index": [3, 5], "kernel": 2.0, "reference": 0.0, "float64": None, "error": 20.0}
    json.dumps(picture, allow_nan=False)  # plain JSON


def test_a_nan_where_the_reference_is_finite_is_a_null_cell():
    expected = np.ones((2, 3), np.float32)
    actual = expected.copy()
    actual[0, 1] = np.nan
    picture = _picture(actual, expected)
    assert picture["errors"][0][1] is None
    assert picture["worst"][0]["kernel"] == "nan"
    json.dumps(picture, allow_nan=False)


def test_large_outputs_are_pooled_and_leading_dimensions_become_rows():
    expected = np.zeros((3, 100, 200), np.int32)
    actual = expected.copy()
    actual[2, 99, 199] = 7
    picture = _picture(actual, expected)
    rows, cols = len(picture["errors"]), len(picture["errors"][0])
    assert rows <= MAX_SIDE and cols <= MAX_SIDE
    assert picture["pool"] == [5, 4]  # 300 rows, 200 columns
    assert picture["errors"][-1][-1] == 1.0 and sum(map(sum, picture["errors"])) == 1.0
    assert picture["worst"] == [{"index": [2, 99, 199], "kernel": 7, "reference": 0, "float64": None, "error": 1.0}]


def test_an_output_that_matches_has_no_picture():
    x = np.ones(8, np.float32)
    assert _picture(x, x) is None
