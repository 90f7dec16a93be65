"""Bounds of Triton-style loads and stores on the HLO interpreter (JAX 0.12 internals).

``pl.load`` / ``pl.store`` (and ``plt.load`` / ``plt.store``) take a mask: lanes it lets
through must lie inside the ref. The HLO interpreter discharges them (``pallas/primitives.py:
_load_discharge_rule``, ``_swap_discharge_rule``) on a copy of the ref padded by the slice
size, then drops the padding: a store past the end vanishes and a load past it reads fill,
so a mask off by one passes there (and a GPU writes or reads past the array). Inside
``checked_bounds`` those two rules first compute, for every lane, whether the mask lets it
through outside the ref's shape; if any does, the run fails with
``IndexError: Out-of-bounds masked store ...`` naming the kernel line, the ref shape, the
first bad index and how many lanes, which the engine reports as ``out_of_bounds``.

The check is traced into the kernel: it applies to runs traced inside the context (the
HLO interpreter's backend enters it for each case), and costs one ``any`` per access plus
a host callback only when something is out of bounds.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["checked_bounds"]

_LOCK = threading.RLock()


def _lanes(indexer: Any) -> tuple[Any, Any] | None:
    """(out-of-bounds flag per lane, per-dimension position per lane) of an NDIndexer, or
    None for an indexing form this check does not model."""
    import jax.numpy as jnp
    from jax import lax
    from jax._src.state.indexing import Slice

    indices, dims = indexer.indices, indexer.shape
    if all(isinstance(s, Slice) or not jnp.shape(s) for s in indices):
        shape = tuple(int(s.size) for s in indices if isinstance(s, Slice))
        positions, axis = [], 0
        for s in indices:
            if isinstance(s, Slice):
                iota = lax.broadcasted_iota(jnp.int32, shape, axis)
                positions.append(jnp.asarray(s.start, jnp.int32) + int(s.stride) * iota)
                axis += 1
            else:
                positions.append(jnp.broadcast_to(jnp.asarray(s, jnp.int32), shape))
    elif all(not isinstance(s, Slice) for s in indices):
        shape = jnp.broadcast_shapes(*(jnp.shape(s) for s in indices))
        positions = [jnp.broadcast_to(jnp.asarray(s, jnp.int32), shape) for s in indices]
    else:
        return None
    outside = jnp.zeros(shape, bool)
    for position, dim in zip(positions, dims, strict=True):
        outside = outside | (position < 0) | (position >= int(dim))
    return outside, jnp.stack(positions, axis=-1) if positions else None


def _raise(kind: str, where: str, shape: tuple[int, ...], count: Any, first: Any) -> None:
    at = tuple(int(v) for v in first)
    raise IndexError(
        f"Out-of-bounds masked {kind} at {where}: {int(count)} lane(s) that the mask lets through lie outside "
        f"the ref of shape {shape} (the first at index {at}); on a GPU this {kind} goes past the array. "
        "Mask every lane past the end (e.g. mask=offsets < n).")


def _check(kind: str, ref_aval: Any, transforms: list[Any], mask: Any) -> None:
    import jax.numpy as jnp
    from jax import lax
    from jax._src import source_info_util
    from jax._src.state import indexing
    from jax.experimental import io_callback

    if not transforms or not isinstance(transforms[-1], indexing.NDIndexer):
        return
    lanes = _lanes(transforms[-1])
    if lanes is None:
        return
    outside, positions = lanes
    if positions is None:  # a rank-0 ref: nothing can be out of its bounds
        return
    bad = outside if mask is None else outside & jnp.broadcast_to(jnp.asarray(mask, bool), outside.shape)
    flat = jnp.reshape(positions, (-1, positions.shape[-1]))
    bad = jnp.reshape(bad, (-1,))
    where = source_info_util.summarize(source_info_util.current())
    report = functools.partial(_raise, kind, where, tuple(int(d) for d in transforms[-1].shape))

    def call() -> None:
        io_callback(report, None, jnp.sum(bad), flat[jnp.argmax(bad)], ordered=False)

    lax.cond(jnp.any(bad), call, lambda: None)


def _head(rule: Any) -> int:
    """How many arguments come before the flat operands of ``rule``, a discharge rule: one
    context (JAX 0.11 and later), or the input and output avals (0.10)."""
    import inspect

    return 1 if next(iter(inspect.signature(rule).parameters)) == "ctx" else 2


def _in_avals(head: tuple[Any, ...]) -> Any:
    return head[0].in_avals if len(head) == 1 else head[0]


def _checked_load(rule: Any) -> Any:
    skip = _head(rule)

    def checked(*args: Any, args_tree: Any, **params: Any) -> Any:
        _ref, transforms, mask, _other = args_tree.unflatten(args[skip:])
        _check("load", _in_avals(args[:skip])[0], list(transforms), mask)
        return rule(*args, args_tree=args_tree, **params)

    return checked


def _checked_swap(rule: Any) -> Any:
    skip = _head(rule)

    def checked(*args: Any, args_tree: Any, **params: Any) -> Any:
        _ref, transforms, _val, mask = args_tree.unflatten(args[skip:])
        _check("store", _in_avals(args[:skip])[0], list(transforms), mask)
        return rule(*args, args_tree=args_tree, **params)

    return checked


@contextlib.contextmanager
def checked_bounds() -> Iterator[None]:
    """Inside, the HLO interpreter's masked loads and stores check their lanes' bounds
    (see the module docstring); one thread at a time."""
    from jax._src.pallas import primitives
    from jax._src.state import discharge

    rules = discharge._discharge_rules
    with _LOCK:
        saved = rules[primitives.load_p], rules[primitives.swap_p]
        rules[primitives.load_p] = _checked_load(saved[0])
        rules[primitives.swap_p] = _checked_swap(saved[1])
        try:
            yield
        finally:
            rules[primitives.load_p], rules[primitives.swap_p] = saved
