"""How a function runs under a transform (jax only); ``transforms.Rule.wrap`` names these.

``vmap`` maps the function over a leading batch dimension of every input; ``grad`` takes
its VJP at the primals of a grad example (primals, cotangents, then an int32 array whose
length counts the primals) with respect to the floating-point inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["grad_wrap", "inexact", "split", "vjp", "vmap_wrap"]


def inexact(dtype: Any) -> bool:
    import jax.numpy as jnp

    return bool(jnp.issubdtype(dtype, jnp.inexact))


def split(xs: Sequence[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
    """(primals, cotangents) of a grad example: the last array's length counts the primals."""
    n = xs[-1].shape[0]
    return xs[:n], xs[n:-1]


def vjp(fn: Callable[..., Any], xs: Sequence[Any]) -> tuple[Any, ...]:
    """The VJP of ``fn`` at the primals of ``xs`` with its cotangents, per float input."""
    import jax
    import jax.numpy as jnp

    primals, cotangents = split(xs)
    diff = [i for i, x in enumerate(primals) if inexact(x.dtype)]

    def of_floats(*values: Any) -> Any:
        args = list(primals)
        for i, value in zip(diff, values, strict=True):
            args[i] = value
        return fn(*args)

    out, pullback = jax.vjp(of_floats, *(primals[i] for i in diff))
    leaves, tree = jax.tree.flatten(out)
    n_float = sum(inexact(leaf.dtype) for leaf in leaves)
    if n_float != len(cotangents):
        raise ValueError(f"the function returns {n_float} floating-point outputs but the reference "
                         f"returns {len(cotangents)}: their output structures differ.")
    it = iter(cotangents)
    cts = [jnp.asarray(next(it)).astype(leaf.dtype) if inexact(leaf.dtype)
           else np.zeros(leaf.shape, jax.dtypes.float0) for leaf in leaves]
    return tuple(pullback(jax.tree.unflatten(tree, cts)))


def vmap_wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` mapped over a leading batch dimension of every input."""
    import jax

    return jax.vmap(fn)


def grad_wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``'s VJP at the primals of a grad example (``vjp``)."""
    return lambda *xs: vjp(fn, xs)
