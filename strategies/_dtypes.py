"""Dtype names and the per-family dtype table, whose keys are the compile families
(one source of truth for their names)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from strategies._validation import check_choice
from strategies.errors import InvalidStrategyType

FP8_DTYPES: tuple[str, ...] = ("float8_e4m3fn", "float8_e5m2")
# What each compiler family takes as a kernel operand, float32 first (the shrink target).
# float16 is left out of Mosaic TPU (no native f16 vector unit); fp8 is opt-in because
# only newer chips have it (TPU v5p+, NVIDIA sm89+), which the full compile checks.
FAMILY_DTYPES: dict[str, tuple[str, ...]] = {
    "mosaic_tpu": ("float32", "bfloat16", "int32", "int8", "bool"),
    "triton": ("float32", "bfloat16", "float16", "int32", "int8", "bool"),
    "mosaic_gpu": ("float32", "bfloat16", "float16", "int32", "int8", "bool"),
}
# The compile families, in the order of the table above. pallas_verify's table of
# families (backends/families.py) is checked against these names when it loads.
BACKEND_FAMILIES: tuple[str, ...] = tuple(FAMILY_DTYPES)


def family_of(where: str, backend: Any) -> str:
    """The family of ``backend`` (``"mosaic_tpu"`` or ``"mosaic_tpu:v5e"`` -> mosaic_tpu)."""
    if not isinstance(backend, str):
        raise InvalidStrategyType(
            f"{where}(backend={backend!r}): expected a string, one of {BACKEND_FAMILIES!r}."
        )
    return check_choice(where, "backend", backend.split(":", 1)[0], BACKEND_FAMILIES)


def as_dtype(where: str, name: str, value: Any) -> np.dtype:
    """``value`` (a name like ``"bfloat16"``, a numpy or jax dtype) as a numpy dtype."""
    try:
        return np.dtype(jnp.dtype(value))
    except TypeError as error:
        known = sorted({*FAMILY_DTYPES["triton"], *FP8_DTYPES})
        raise InvalidStrategyType(
            f"{where}({name}={value!r}): not a dtype ({error}). Pass a name such as "
            f"{', '.join(repr(k) for k in known)}."
        ) from None


def storage_bits(dtype: np.dtype) -> int:
    """Bits per element as Mosaic TPU stores it (bool is stored as 32-bit)."""
    return 32 if dtype == np.bool_ else dtype.itemsize * 8


def preferred_sublane_tile(dtype: Any) -> int:
    """The sublane tile Mosaic TPU prefers for ``dtype``: 8 for 32-bit, 16 for 16-bit,
    32 for 8-bit (packed rows). Always a multiple of the hard rule's 8."""
    return max(8, 256 // storage_bits(as_dtype("preferred_sublane_tile", "dtype", dtype)))
