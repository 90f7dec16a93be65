"""A planted HLO-interpreter bug for the divergence tests: ``neg`` of float32 one bit off.

Importing this module plants it (the reproducer test puts a ``sitecustomize`` that
imports it on the path of a subprocess, so the interpreters' worker has it too).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from tests.campaigns.smith import _mutants


def neg_one_bit_off(eqn: Any, args: list[Any]) -> list[Any] | None:
    """float32 negation with the lowest mantissa bit flipped: within any tolerance, never
    bitwise equal to the right answer."""
    if eqn.primitive.name != "neg" or args[0].dtype != jnp.float32:
        return None
    bits = lax.bitcast_convert_type(-args[0], jnp.uint32) ^ jnp.uint32(1)
    return [lax.bitcast_convert_type(bits, jnp.float32)]


NAME = "neg_one_bit_off"
_mutants.RULES.setdefault(NAME, neg_one_bit_off)
_mutants.MUTANTS.setdefault(NAME, _mutants.Mutant("interpret", "the rule of neg in kernel bodies",
                                                  lambda: _mutants._rule(NAME)))


_PLANTED: list[object] = []


def plant() -> None:
    """Plant the bug for the rest of this process (the context is kept alive: a collected
    generator would restore the interpreter)."""
    context = _mutants.planted(NAME)
    context.__enter__()
    _PLANTED.append(context)
