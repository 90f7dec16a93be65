"""The grid points of a pallas_call and the block each operand's index map gives at each:
every index map evaluated over a batch of points, jitted once per distinct map."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.keys import Lru

__all__ = ["block_indices", "grid_points"]


def grid_points(grid: tuple[int, ...]) -> np.ndarray:
    """All points of ``grid`` in row-major order, as an int array of shape (N, len(grid))."""
    if not grid:
        return np.zeros((1, 0), np.int32)
    mesh = np.meshgrid(*[np.arange(n, dtype=np.int32) for n in grid], indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh], axis=1)


def block_indices(call: Any, operand: Any, points: np.ndarray) -> np.ndarray:
    """The block index ``operand``'s index map gives at each of ``points`` (N, rank), for a
    ``trace.PallasCall`` and one of its ``BlockOperand``s (its prefetch values and index map)."""
    rank = len(operand.array_shape)
    if rank == 0:  # a scalar operand (a rank-0 BlockSpec): its one block is ()
        return np.zeros((len(points), 0), np.int32)
    prefetch = tuple(call.prefetch or ())
    padded = np.zeros((_bucket(len(points)), points.shape[1]), np.int32)  # a few sizes compile, not every grid's
    padded[: len(points)] = points
    evaluate = _evaluator(operand.index_map, points.shape[1], rank)
    result = evaluate(jnp.asarray(padded), *prefetch)
    return np.asarray(result)[: len(points)].reshape(len(points), rank)


def _bucket(n: int) -> int:
    """``n`` rounded up to a power of two (at least 8)."""
    return max(8, 1 << (max(n, 1) - 1).bit_length())


def _map_key(closed: Any) -> tuple[Any, ...]:
    """What makes two index maps one function: their jaxpr's text, constants and operand
    types (the same BlockSpec lambda under another config traces to an equal text)."""
    consts = tuple((np.asarray(c).dtype.str, np.shape(c), np.asarray(c).tobytes()) for c in closed.consts)
    return str(closed.jaxpr), consts, tuple((tuple(a.shape), str(a.dtype)) for a in closed.in_avals)


# Jitted index-map evaluations by _map_key; bounded for long-lived workers.
_EVALUATORS: Lru[tuple[Any, ...], Callable[..., Any]] = Lru(maxsize=512)


def _evaluator(closed: Any, ndim: int, rank: int) -> Callable[..., Any]:
    """A jitted evaluation of the index map ``closed`` over a batch of grid points, shared
    by every index map that is the same function (``_map_key``)."""
    def make() -> Callable[..., Any]:
        # Scalar-prefetch refs are discharged into plain arrays first (as Pallas's own
        # interpreter does), so index maps that read SMEM refs with typed ints evaluate.
        fn = _jax_compat.index_map_function(closed)

        def at(p, *values):
            out = fn(*[p[d] for d in range(ndim)], *values)[:rank]
            return jnp.stack([jnp.asarray(v, jnp.int32) for v in out])

        return jax.jit(jax.vmap(at, in_axes=(0,) + (None,) * (len(closed.in_avals) - ndim)))

    return _EVALUATORS.get_or_make((_map_key(closed), ndim, rank), make)
