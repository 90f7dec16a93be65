"""Planted interpreter bugs: a small wrong rule in the HLO interpreter (``interpret=True``),
for measuring whether smith campaigns find backend bugs. Tests only.

``planted(name)`` patches ``hlo_interpreter.kernel_to_hlo_jaxpr`` so every kernel body the
HLO interpreter evaluates is re-traced with one primitive's rule replaced; the reference
(plain ``jax.jit``) and the other interpreters are untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax._src.pallas import hlo_interpreter

Rule = Callable[[Any, list[Any]], list[Any] | None]


def _iota_wrong_axis(eqn: Any, args: list[Any]) -> list[Any] | None:
    """An iota along the wrong axis for rank 3."""
    if eqn.primitive.name != "iota" or len(eqn.params["shape"]) != 3:
        return None
    params = dict(eqn.params, dimension=(eqn.params["dimension"] + 1) % 3)
    return [eqn.primitive.bind(*args, **params)]


def _max_identity_int(eqn: Any, args: list[Any]) -> list[Any] | None:
    """reduce_max over int32 with identity 0 instead of the int32 minimum."""
    if eqn.primitive.name != "reduce_max" or args[0].dtype != jnp.int32:
        return None
    return [jnp.maximum(eqn.primitive.bind(*args, **eqn.params), 0)]


def _cast_truncates(eqn: Any, args: list[Any]) -> list[Any] | None:
    """float32 -> bfloat16 conversion that truncates instead of rounding to nearest even."""
    if (eqn.primitive.name != "convert_element_type" or args[0].dtype != jnp.float32
            or eqn.params["new_dtype"] != jnp.bfloat16):
        return None
    bits = lax.bitcast_convert_type(args[0], jnp.uint32) & jnp.uint32(0xFFFF0000)
    return [lax.convert_element_type(lax.bitcast_convert_type(bits, jnp.float32), jnp.bfloat16)]


def _select_ignores_other(eqn: Any, args: list[Any]) -> list[Any] | None:
    """A masked select (``jnp.where``) that ignores its ``other`` value where the mask is
    off when that value is a fill (a zero, as masks of padding use): the masked-load bug."""
    if eqn.primitive.name != "select_n" or len(args) != 3 or not eqn.invars[1].aval.shape:
        return None
    return [jnp.where(args[0], args[2], jnp.where(args[1] == 0, args[2], args[1]))]


MUTANTS: dict[str, Rule] = {
    "iota_wrong_axis_rank3": _iota_wrong_axis,
    "reduce_max_int32_identity": _max_identity_int,
    "cast_f32_bf16_truncates": _cast_truncates,
    "masked_select_ignores_other": _select_ignores_other,
}


def _evaluate(jaxpr: Any, consts: list[Any], args: list[Any], rule: Rule) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if type(v).__name__ == "Literal" else env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = rule(eqn, ins)
        if outs is None:
            params = {k: _retraced(v, rule) for k, v in eqn.primitive.get_bind_params(eqn.params).items()}
            result = eqn.primitive.bind(*ins, **params)
            outs = result if eqn.primitive.multiple_results else [result]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _retraced(value: Any, rule: Rule) -> Any:
    """Sub-jaxprs (``jit`` bodies such as ``jnp.where``'s, loop bodies, ``pl.when``
    branches) with the rule planted too. JAX 0.12 has no ``ClosedJaxpr`` class: a closed
    jaxpr is a ``core.Jaxpr`` carrying ``consts`` and ``in_avals``, recognised by those."""
    if isinstance(value, tuple):
        return tuple(_retraced(v, rule) for v in value)
    if not all(hasattr(value, a) for a in ("jaxpr", "consts", "in_avals")):  # a closed jaxpr (JAX 0.12: core.Jaxpr)
        return value
    inner, consts = value.jaxpr, list(value.consts)
    return jax.make_jaxpr(lambda *xs: _evaluate(inner, consts, list(xs), rule))(*value.in_avals)


@contextlib.contextmanager
def planted(name: str) -> Iterator[None]:
    """Run the HLO interpreter with mutant ``name`` planted; caches cleared around it."""
    from pallas_verify.backends import execute

    rule, original = MUTANTS[name], hlo_interpreter.kernel_to_hlo_jaxpr

    def mutated(jaxpr: Any, consts: Any, grid_mapping: Any) -> Any:
        closed, _, scratch = original(jaxpr, consts, grid_mapping)
        inner = getattr(closed, "jaxpr", closed)
        inner_consts = list(getattr(closed, "consts", []))
        avals = [v.aval for v in inner.invars]
        with grid_mapping.trace_env():
            new = jax.make_jaxpr(lambda *xs: _evaluate(inner, inner_consts, list(xs), rule))(*avals)
        return new, new.consts, scratch

    def clear() -> None:
        execute._JIT_CACHE.clear()
        jax.clear_caches()

    clear()
    hlo_interpreter.kernel_to_hlo_jaxpr = mutated
    try:
        yield
    finally:
        hlo_interpreter.kernel_to_hlo_jaxpr = original
        clear()
