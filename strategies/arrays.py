"""Numpy arrays for kernel inputs: a Hypothesis-drawn seed fills them, edge values are
placed by Hypothesis, so big arrays cost the same to draw as small ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from strategies._dtypes import FAMILY_DTYPES, FP8_DTYPES, as_dtype, family_of
from strategies._validation import check_bool, check_int, check_shape
from strategies.errors import InvalidStrategyValue

__all__ = ["DEFAULT_INT_MAGNITUDE", "arrays", "dtypes", "edge_values"]

DEFAULT_INT_MAGNITUDE = 8
FILLS = ("zeros", "uniform", "uniform", "uniform")  # index 0 is the shrink target


def dtypes(
    *, backend: str = "mosaic_tpu", floating_only: bool = False, fp8: bool = False
) -> st.SearchStrategy[str]:
    """Names of the dtypes ``backend``'s family takes as kernel operands: float32,
    bfloat16, float16 (GPU families), int32, int8, bool, and with ``fp8=True``
    float8_e4m3fn and float8_e5m2 (newer chips only; the full compile checks).

    Shrinks toward ``"float32"``.

    Example: ``dtypes(backend="triton", floating_only=True)`` draws "float32",
    "bfloat16", "float16".
    """
    family = family_of("dtypes", backend)
    names = FAMILY_DTYPES[family] + (FP8_DTYPES if check_bool("dtypes", "fp8", fp8) else ())
    if check_bool("dtypes", "floating_only", floating_only):
        names = tuple(n for n in names if jnp.issubdtype(jnp.dtype(n), jnp.floating))
    return st.sampled_from(names)


def _large(finfo: Any) -> float:
    """The largest power of two whose square is finite in the dtype."""
    return float(2.0 ** (int(finfo.maxexp) // 2 - 1))


def edge_values(
    dtype: Any,
    *,
    allow_extremes: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> tuple[Any, ...]:
    """The edge values placed into arrays of ``dtype``, simplest first.

    Floats: 0, -0, 1, -1, a large power of two whose square is finite, the smallest
    normal and subnormal, each with both signs; ``allow_extremes`` adds the largest
    finite values, ``allow_nan`` NaN, ``allow_infinity`` +-inf (for dtypes that
    have it: float8_e4m3fn does not). Ints: 0, 1, -1 and the
    type's min and max. Bool: False, True.
    """
    dt = as_dtype("edge_values", "dtype", dtype)
    if dt == np.bool_:
        return (False, True)
    if jnp.issubdtype(dt, jnp.integer):
        info = jnp.iinfo(dt)
        return tuple(dict.fromkeys(v for v in (0, 1, -1, info.max, info.min) if info.min <= v))
    info = jnp.finfo(dt)
    magnitudes = [1.0, _large(info), float(info.smallest_normal), float(info.smallest_subnormal)]
    if allow_extremes:
        magnitudes.append(float(info.max))
    values = [0.0, -0.0] + [s * m for m in magnitudes for s in (1.0, -1.0)]
    values += [float("nan")] if allow_nan else []
    has_inf = bool(np.isinf(np.asarray(np.inf).astype(dt)))
    values += [float("inf"), float("-inf")] if allow_infinity and has_inf else []
    return tuple(values)


def _background(
    rng: np.random.Generator, shape: tuple, dt: np.dtype, magnitude: float
) -> np.ndarray:
    """Uniform values in [-magnitude, magnitude] (ints: whole numbers, clipped to the type)."""
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if jnp.issubdtype(dt, jnp.integer):
        info = jnp.iinfo(dt)
        bound = int(magnitude)
        low, high = max(int(info.min), -bound), min(int(info.max), bound)
        return rng.integers(low, high, size=shape, endpoint=True).astype(dt)
    return rng.uniform(-magnitude, magnitude, size=shape).astype(np.float32).astype(dt)


def _build(shape: tuple, dt: np.dtype, magnitude: float, draw: tuple) -> np.ndarray:
    fill, seed, placements = draw
    if FILLS[fill] == "zeros":
        out = np.zeros(shape, dt)
    else:
        out = _background(np.random.default_rng(seed), shape, dt, magnitude)
    flat = out.reshape(-1)
    for index, value in placements:
        flat[index] = np.asarray(value).astype(dt)
    return out


def arrays(
    *,
    shape: Sequence[int],
    dtype: Any = "float32",
    max_magnitude: float | None = None,
    max_edge_values: int = 4,
    allow_extremes: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> st.SearchStrategy[np.ndarray]:
    """Numpy arrays of ``shape`` and ``dtype``, deterministic from the Hypothesis draw.

    Hypothesis draws a fill (zeros, or uniform values from a drawn seed, filled by
    numpy) and up to ``max_edge_values`` placements of ``edge_values(dtype, ...)``;
    drawing a 512x512 array costs the same as a 2x2 one. Values are small by default
    (floats in [-1, 1], ints in [-8, 8]; ``max_magnitude`` changes it) so that matmul
    and softmax references stay well conditioned; edge values are few, their large
    magnitude squares to a finite number, and NaN, inf and the largest finite values
    come only when asked (``allow_nan``, ``allow_infinity``, ``allow_extremes``).

    Shrinks toward all zeros: the zeros fill, seed 0, no edge values; a placement
    shrinks toward index 0 and the value 0.

    Example: ``arrays(shape=(512, 512), dtype="bfloat16")``.
    """
    where = "arrays"
    shape = check_shape(where, "shape", shape, min_dim=0, min_rank=0)
    dt = as_dtype(where, "dtype", dtype)
    magnitude = _magnitude(where, dt, max_magnitude)
    count = check_int(where, "max_edge_values", max_edge_values, min_value=0)
    edges = edge_values(
        dt,
        allow_extremes=check_bool(where, "allow_extremes", allow_extremes),
        allow_nan=check_bool(where, "allow_nan", allow_nan),
        allow_infinity=check_bool(where, "allow_infinity", allow_infinity),
    )
    size = int(np.prod(shape))
    placement = st.tuples(st.integers(0, max(size - 1, 0)), st.sampled_from(edges))
    draws = st.tuples(
        st.integers(0, len(FILLS) - 1),
        st.integers(0, 2**32 - 1),
        st.lists(placement, max_size=count if size else 0),
    )
    return draws.map(lambda d: _build(shape, dt, magnitude, d))


def _magnitude(where: str, dt: np.dtype, max_magnitude: Any) -> float:
    """The bound of background values: the argument, or 1 (floats) / 8 (ints)."""
    if max_magnitude is None:
        return 1.0 if jnp.issubdtype(dt, jnp.floating) else float(DEFAULT_INT_MAGNITUDE)
    if isinstance(max_magnitude, bool) or not isinstance(max_magnitude, (int, float)):
        raise InvalidStrategyValue(
            f"{where}(max_magnitude={max_magnitude!r}): expected a positive number, "
            "e.g. max_magnitude=1.0."
        )
    if not 0 < max_magnitude < float("inf"):
        raise InvalidStrategyValue(
            f"{where}(max_magnitude={max_magnitude!r}): must be finite and > 0, "
            "e.g. max_magnitude=1.0."
        )
    return float(max_magnitude)
