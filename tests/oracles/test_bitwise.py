"""bitwise_equal: element-wise equality of bits, the comparison of the metamorphic and
divergence oracles."""

from __future__ import annotations

import numpy as np
import pytest

from pallas_verify.oracles.base import bitwise_equal

X = np.arange(8, dtype=np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.float64])
def test_bitwise_equal_compares_bits(dtype):
    a = np.arange(6).astype(dtype)
    b = a.copy()
    b[3] = b[3] + 1
    assert bitwise_equal(a, a.copy()).all()
    assert list(bitwise_equal(a, b)) == [True, True, True, False, True, True]


def test_bitwise_equal_sees_the_sign_of_zero_and_nan_payloads_and_rejects_other_shapes():
    zero = np.array([0.0, np.nan], np.float32)
    other = np.array([-0.0, np.nan], np.float32)
    assert list(bitwise_equal(zero, other)) == [False, True]
    payload = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert not bitwise_equal(np.array([np.nan], np.float32), payload).any()
    assert not bitwise_equal(X, X.astype(np.float64)).any()  # same values, other dtype
    assert not bitwise_equal(X, X.reshape(2, 4)).any()
