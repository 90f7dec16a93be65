"""A kernel under a transform (jax only): what backends run and blame traces.

``vmap`` maps the kernel over a leading batch dimension of every input; ``grad`` takes
its VJP at the primals of a grad example (primals, cotangents, then an int32 array whose
length counts the primals) with respect to the floating-point inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pallas_verify.errors import InvalidArgument
from pallas_verify.spec import TRANSFORMS, KernelSpec

__all__ = ["WRAPS", "inexact", "kernel_under", "split", "transformed", "vjp"]


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


def _vmap_wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    import jax

    return jax.vmap(fn)


def _grad_wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *xs: vjp(fn, xs)



#: transform -> how a function runs under it.
WRAPS: Mapping[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {"vmap": _vmap_wrap, "grad": _grad_wrap}
assert tuple(WRAPS) == TRANSFORMS, "every transform of spec.TRANSFORMS needs exactly one wrap"


def _wrap(transform: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if transform not in WRAPS:
        raise InvalidArgument(f"transform={transform!r} is not one of {TRANSFORMS}.")
    return WRAPS[transform]


def transformed(fn: Callable[..., Any], transform: str | None) -> Callable[..., Any]:
    """``fn`` (the kernel bound to its config) under ``transform`` (None: ``fn`` itself)."""
    return fn if transform is None else _wrap(transform)(fn)


def kernel_under(spec: KernelSpec, transform: str | None) -> Callable[..., Any]:
    """``kernel(*inputs, **config)`` under ``transform``: what blame should trace."""
    if transform is None:
        return spec.kernel
    wrap = _wrap(transform)
    return lambda *xs, **config: wrap(functools.partial(spec.kernel, **config))(*xs)
