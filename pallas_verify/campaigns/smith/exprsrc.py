"""Expressions as source text, shared by the kernel and the reference emitters.

Both emitters name the leaves of an expression (``Names``) in their own terms: the kernel
computes on one block (or one ``pl.ds`` slice of it), the reference on whole arrays. The
operators are emitted alike, so both compute the same thing; only ``pltpu.roll`` (a
whole-array reference rolls within each block) and bitcasts (``pltpu.bitcast`` in the
kernel, ``lax.bitcast_convert_type`` in the reference) differ in spelling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from strategies._expressions import expression_dtype

__all__ = ["EXACT_DOT", "EXACT_SUM", "HEADER", "REDUCE", "UNARY", "Names", "combine_source", "condition_source",
           "exact_source", "expression_source", "identity_source", "out_source", "reduced_value"]

HEADER = """import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""

UNARY = {"neg": "(-{})", "abs": "jnp.abs({})", "tanh": "jnp.tanh({})", "square": "jnp.square({})",
         "floor": "jnp.floor({})", "round_bf16": "lax.convert_element_type(lax.convert_element_type({}, "
         "jnp.bfloat16), jnp.float32)"}
# Integer division and remainder: a zero divisor becomes 1, INT32_MIN is nudged up (so
# INT32_MIN / -1 cannot overflow): every case is defined, on every backend.
_SAFE = "jnp.maximum({}, -2147483647), jnp.where({b} == 0, 1, {b})"
_BINARY = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "max": "jnp.maximum({}, {})",
           "min": "jnp.minimum({}, {})", "div": "lax.div(" + _SAFE + ")", "rem": "lax.rem(" + _SAFE + ")",
           "floordiv": "jnp.floor_divide(" + _SAFE + ")", "mod": "jnp.remainder(" + _SAFE + ")"}
_CMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!=", "gt": ">", "ge": ">="}
REDUCE = {"sum": "jnp.sum", "max": "jnp.max", "min": "jnp.min"}
_COMBINE = {"sum": "({} + {})", "max": "jnp.maximum({}, {})", "min": "jnp.minimum({}, {})"}
_IDENTITY = {("sum", "float32"): "0", ("sum", "int32"): "0", ("max", "float32"): "-jnp.inf",
             ("min", "float32"): "jnp.inf", ("max", "int32"): "jnp.iinfo(jnp.int32).min",
             ("min", "int32"): "jnp.iinfo(jnp.int32).max"}
_INT32_SAFE = (-2147483520.0, 2147483520.0)  # the float32 values nearest the int32 range, inside it
_FINITE = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}  # fp8 conversions of larger values are not IEEE
EXACT_SUM, EXACT_DOT = (64, 64), (8, 8)


@dataclasses.dataclass(frozen=True)
class Names:
    """How one emitter spells the leaves of an expression, and the shape values take.

    Attributes:
      inputs: the input values (``v0``, ...); dtypes: their dtypes.
      iota, pid: per array dim, the global index and the block index.
      shape: the shape an expression's value takes (the block, or the whole array).
      roll: ``(source, axis, shift) -> source`` of a roll of a ``shape``-shaped value.
      bitcast: ``(source, dtype) -> source`` of a same-width bitcast.
      smem, tbl: the SMEM scalar and the scalar-prefetch table entry, where the program has them.
    """

    inputs: Sequence[str]
    dtypes: Sequence[str]
    iota: Sequence[str]
    pid: Sequence[str]
    shape: tuple[int, ...]
    roll: Callable[[str, int, int], str]
    bitcast: Callable[[str, str], str]
    smem: str = "sm"
    tbl: str = "tb"


def expression_source(expr: tuple, names: Names) -> str:
    """Source of ``expr`` with its leaves spelled by ``names``."""
    head = expr[0]
    if head == "in":
        return names.inputs[expr[1]]
    if head in ("iota", "pid"):
        return getattr(names, head)[expr[1]]
    if head in ("smem", "tbl"):
        return getattr(names, head)
    if head == "const":
        return f"jnp.asarray({expr[2]}, jnp.{expr[1]})"
    if head == "cast":
        inner = expression_source(expr[2], names)
        if expr[1] == "int32" and expression_dtype(expr[2], names.dtypes) not in ("int32", "int8"):
            # in float32: the bounds do not fit a narrower float (numpy warns on the overflow)
            inner = f"jnp.clip(jnp.nan_to_num(lax.convert_element_type({inner}, jnp.float32)), {_INT32_SAFE[0]}, " \
                f"{_INT32_SAFE[1]})"
        return f"lax.convert_element_type({inner}, jnp.{expr[1]})"
    if head == "bitcast":
        inner = expression_source(expr[2], names)
        if expr[1] == "float32":  # the low 23 bits as the mantissa of a float in [1, 2)
            inner = f"(({inner} & 8388607) | 1065353216)"
        return names.bitcast(inner, expr[1])
    if head == "roll":
        return names.roll(f"jnp.broadcast_to({expression_source(expr[3], names)}, {names.shape})", expr[1], expr[2])
    if head == "un":
        return UNARY[expr[1]].format(expression_source(expr[2], names))
    if head == "bin":
        a, b = expression_source(expr[2], names), expression_source(expr[3], names)
        return _BINARY[expr[1]].format(a, b, b=b)
    a, b, c, d = (expression_source(e, names) for e in expr[2:])
    return f"jnp.where({a} {_CMP[expr[1]]} {b}, {c}, {d})"


def condition_source(cond: tuple, names: Names) -> str:
    """A mask ``(cmp, a, b)`` as a boolean array of ``names.shape``."""
    a, b = (expression_source(e, names) for e in cond[1:])
    return f"jnp.broadcast_to({a} {_CMP[cond[0]]} {b}, {names.shape})"


def exact_source(value: str, step: int, bound: int) -> str:
    """``value`` rounded to multiples of 1/step within [-bound, bound]: sums and dots of such
    values are exact in float32 in any order (the bounds keep them under 2**24 steps), so a
    backend that accumulates in another order must still agree with the reference."""
    return f"jnp.clip(jnp.round({value} * {step}) / {step}, -{bound}, {bound})"


def identity_source(op: str, work: str) -> str:
    """The identity of reduction ``op`` in ``work`` arithmetic, as a 0-d array."""
    return f"jnp.asarray({_IDENTITY[(op, work)]}, jnp.{work})"


def combine_source(op: str, a: str, b: str) -> str:
    return _COMBINE[op].format(a, b)


def reduced_value(program: dict[str, Any], expr_src: str, shape: Sequence[int]) -> str:
    """The value a reduction program reduces: its expression in the work dtype, over
    ``shape``, made exact (``exact_source``) for a float sum."""
    op, _, work, _ = program["reduce"]
    value = f"jnp.broadcast_to(lax.convert_element_type({expr_src}, jnp.{work}), {tuple(shape)})"
    return exact_source(value, *EXACT_SUM) if op == "sum" and work == "float32" else value


def out_source(value: str, dtype: str, shape: Sequence[int]) -> str:
    """``value`` converted to an output of ``dtype`` (fp8: clipped to its finite range first)."""
    if dtype in _FINITE:
        value = f"jnp.clip({value}, -{_FINITE[dtype]}, {_FINITE[dtype]})"
    return f"jnp.broadcast_to(lax.convert_element_type({value}, jnp.{dtype}), {tuple(shape)})"
