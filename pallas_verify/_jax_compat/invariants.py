"""jax's own consistency check of a pallas_call's grid (JAX 0.12 internals).

``GridMapping.check_invariants`` (and, through it, each ``BlockMapping``'s) asserts what
the rest of Pallas assumes of a traced pallas_call: one block mapping per operand, index
maps taking the grid indices and scalar-prefetch operands and returning integer scalars,
block shapes of the operands' rank, vmapped dimensions and grid names that fit the grid.
jax runs it only under ``jax_enable_checks``; this runs it on every pallas_call of a traced
function with the checks on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pallas_verify._jax_compat.tracing import call_name, equations

__all__ = ["grid_invariant_errors"]


def grid_invariant_errors(closed_jaxpr: Any) -> Iterator[tuple[str, str]]:
    """``(kernel function name, error)`` for each pallas_call whose GridMapping fails
    ``check_invariants`` under ``jax.enable_checks(True)``."""
    import jax

    for eqn in equations(getattr(closed_jaxpr, "jaxpr", closed_jaxpr)):
        mapping = eqn.params.get("grid_mapping") if eqn.primitive.name == "pallas_call" else None
        if mapping is None:
            continue
        try:
            with jax.enable_checks(True):
                mapping.check_invariants()
        except AssertionError as error:
            yield call_name(eqn), f"AssertionError: {error}"
