"""What a matrix unit rounds a dot's operands to, for the rounded-dot ground truth
(``reference.Truth.dots``): the narrowest narrow float input of the reference, or TF32 for
float32 inputs on an NVIDIA GPU that takes them so (``_jax_compat.dots_in_tf32``), and the
rounding itself as the float64 evaluation makes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pallas_verify import _jax_compat

__all__ = ["dot_rounding", "has_dot", "rounded"]


def dot_rounding(dtypes: list[np.dtype]) -> np.dtype | str | None:
    """What a kernel's matrix unit may round the dot operands of a reference taking
    ``dtypes`` to: the narrowest narrow float input, else TF32 for float32 inputs where
    jax's device takes them so (``_jax_compat.dots_in_tf32``), else None."""
    narrowest = _narrowest(dtypes)
    if narrowest is not None:
        return narrowest
    if any(d == np.float32 for d in dtypes) and _jax_compat.dots_in_tf32():
        return _jax_compat.TF32
    return None


def rounded(value: Any, rounding: Any) -> Any:
    """``value`` rounded to ``rounding`` (a dtype, or TF32), kept in its own dtype.

    The narrow value passes an optimization barrier: XLA's GPU compiler removes a round
    trip through a narrower float (float64 to bfloat16 and back) where it may keep excess
    precision, which would leave the rounding unmade (seen in the compiled HLO for an H100,
    ``tests/catalog/test_matrix_unit_rounding.py``)."""
    from jax import lax

    if isinstance(rounding, str):  # _jax_compat.TF32
        exponent, mantissa = _jax_compat.TF32_BITS
        return lax.reduce_precision(value, exponent_bits=exponent, mantissa_bits=mantissa)
    return lax.optimization_barrier(value.astype(rounding)).astype(value.dtype)


def has_dot(jaxpr: Any) -> bool:
    """Whether ``jaxpr`` (or a body inside it) multiplies matrices."""
    return any(eqn.primitive.name == "dot_general" or any(has_dot(j) for j, _ in _jax_compat.sub_jaxprs(eqn))
               for eqn in jaxpr.eqns)


def _narrowest(dtypes: Iterable[np.dtype]) -> np.dtype | None:
    """The narrowest float dtype narrower than 32 bits among ``dtypes`` (None: none)."""
    import jax.numpy as jnp

    narrow = [d for d in dtypes if jnp.issubdtype(d, jnp.floating) and np.dtype(d).itemsize < 4]
    return min(narrow, key=lambda d: d.itemsize) if narrow else None
