"""Which narrow float dtypes a kernel rounds the operands of its dots to.

A kernel that feeds its matrix unit at its inputs' precision rounds a wider value (the
float32 softmax weights of a FlashAttention-style kernel) to bf16 or f16 right before a
``dot``. The precision oracle allows such a kernel the cost of that rounding
(``reference.Truth.dots``); this module reads from the kernel body's jaxpr whether it
makes it: a ``dot_general`` operand that a ``convert_element_type`` from a wider float
made, directly or through shape-only operations, in the same body.

A float32 dot at default precision is rounded too where it runs: an NVIDIA GPU's matrix
unit takes its operands in TF32 (``_jax_compat.dots_in_tf32``). Such a dot in the body is
the fact ``_jax_compat.TF32``; the truth with that rounding is evaluated only on such a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pallas_verify import _jax_compat

__all__ = ["dot_roundings"]

# Operations that move or reshape values without changing them.
_SHAPE_ONLY = frozenset({"reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "copy", "copy_p"})


def dot_roundings(body: Any) -> tuple[str, ...]:
    """The narrow float dtypes (names, sorted) the body, or a body inside it, rounds a
    wider float to right before it meets a dot, and ``"tf32"`` where it has a float32 dot
    at default precision."""
    found: set[str] = set()
    _scan(body, found)
    return tuple(sorted(found))


def _scan(jaxpr: Any, found: set[str]) -> None:
    rounded: dict[int, str] = {}  # id(var) -> the narrow dtype a wider float was rounded to
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "convert_element_type" and _narrowing(eqn.invars[0], eqn.params.get("new_dtype")):
            rounded[id(eqn.outvars[0])] = np.dtype(eqn.params["new_dtype"]).name
        elif name in _SHAPE_ONLY and id(eqn.invars[0]) in rounded:
            rounded[id(eqn.outvars[0])] = rounded[id(eqn.invars[0])]
        elif name == "dot_general":
            found.update(rounded[id(v)] for v in eqn.invars if id(v) in rounded)
            if _default_float32(eqn):
                found.add(_jax_compat.TF32)
        for sub, _ in _jax_compat.sub_jaxprs(eqn):
            _scan(sub, found)


def _default_float32(eqn: Any) -> bool:
    """Whether a ``dot_general`` multiplies float32 operands at default precision (no
    precision, or ``DEFAULT`` for both; an algorithm preset is not)."""
    from jax import lax

    if not all(np.dtype(v.aval.dtype) == np.float32 for v in eqn.invars):
        return False
    precision = eqn.params.get("precision")
    if precision is None:
        return True
    return isinstance(precision, tuple) and all(p in (None, lax.Precision.DEFAULT) for p in precision)


def _narrowing(var: Any, new_dtype: Any) -> bool:
    """Whether converting ``var`` to ``new_dtype`` rounds a float to a float narrower than
    32 bits (and than it)."""
    aval = getattr(var, "aval", None)
    if aval is None or new_dtype is None:
        return False
    old, new = np.dtype(aval.dtype), np.dtype(new_dtype)
    return _float(old) and _float(new) and new.itemsize < 4 and new.itemsize < old.itemsize


def _float(dtype: np.dtype) -> bool:
    import jax.numpy as jnp

    return bool(jnp.issubdtype(dtype, jnp.floating))
