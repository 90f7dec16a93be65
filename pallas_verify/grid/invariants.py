"""The static check's part that asks jax itself: ``GridMapping.check_invariants`` on every
pallas_call of the kernel (``_jax_compat.grid_invariant_errors``).

A violation is jax's structure of the call being inconsistent (a transform or a
lowering-side rewrite that produced a malformed grid mapping), not a property of the
kernel's own indexing, which jax validates while tracing: it is reported as an
``exception`` naming the call and jax's assertion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.grid.check import GridIssue

__all__ = ["invariant_issues"]


def invariant_issues(kernel: Callable[..., Any], inputs: Sequence[Any], config: Mapping[str, Any]) -> list[GridIssue]:
    """One ``exception`` issue per pallas_call of ``kernel(*inputs, **config)`` whose
    GridMapping breaks jax's invariants."""
    avals = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in inputs]
    with _jax_compat.gpu_device_facts():
        closed = jax.make_jaxpr(lambda *xs: kernel(*xs, **config))(*avals)
    return [GridIssue(kind="exception", call=name, message=(
        f"{name}: the pallas_call's GridMapping breaks jax's own invariants (GridMapping.check_invariants "
        f"under jax.enable_checks): {error}. Pallas built an inconsistent call: report it to JAX with "
        "this kernel, or simplify its grid specification"))
        for name, error in _jax_compat.grid_invariant_errors(closed)]
