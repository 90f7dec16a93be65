"""Typed element-wise expression trees: the leaves and operators of generated programs.

An expression is a nested tuple (JSON-able, ``repr`` round-trips):

- ``("in", k)``: input ``k``'s value (its own dtype; a cast node converts it);
- ``("iota", a)``: the global index along array dim ``a`` (int32);
- ``("pid", a)``: the block index along array dim ``a`` (``pl.program_id`` of the grid
  axis that walks it; int32);
- ``("smem",)``: the scalar the kernel keeps in SMEM scratch (int32, loop programs);
- ``("tbl", a)``: the scalar-prefetch table's entry for this block along dim ``a`` (int32);
- ``("const", dtype, v)``: a small constant;
- ``("un", op, e)``, ``("bin", op, a, b)``: element-wise operators (UNARY, BINARY, and
  INT_BINARY for int32: division and remainder, truncating and flooring, on values of
  both signs; a zero divisor becomes 1 and INT32_MIN is nudged up, so every case is defined);
- ``("where", cmp, a, b, c, d)``: ``jnp.where(a cmp b, c, d)`` (COMPARISONS);
- ``("cast", dtype, e)``: ``e.astype(dtype)``; a float -> int32 cast saturates (NaN -> 0)
  first, since XLA leaves out-of-range conversions undefined (fused and unfused code differ);
- ``("bitcast", dtype, e)``: float32 <-> int32 bits (``pltpu.bitcast`` in the kernel); an
  int32 becomes a float in [1, 2) (its low 23 bits as the mantissa), so no NaN or
  denormal appears;
- ``("roll", axis, shift, e)``: ``pltpu.roll`` of the block-shaped value along ``axis``
  (a whole-array reference rolls within each block).

Arithmetic is done in float32 or int32 (WORK_DTYPES); narrower dtypes appear as input and
output dtypes and bfloat16 as a rounding cast (``float32 -> bfloat16 -> float32``), so a
reference fused by XLA and a kernel run op by op round at the same places.

Exactness. Every operator but the INEXACT ones (``tanh``) is correctly rounded, so any
correct backend computes it bit for bit; ``tanh`` is not (XLA's constant folder and its
run-time kernels differ in the last bit). An inexact value must never reach a
*boundary*, where one float step can become a whole integer or a whole output step: a
float -> int32 cast or bitcast, ``floor``, the bfloat16 rounding, a comparison, or an
output whose dtype is not float32. ``expressions(exact=True)`` draws no inexact operator,
and every operand of a boundary is drawn exact; ``boundary_hazards`` finds any that is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

__all__ = ["BINARY", "BOUNDARY_UNARY", "COMPARISONS", "INEXACT", "INT_BINARY", "UNARY", "WORK_DTYPES",
           "boundary_hazards", "conditions", "draw_condition", "draw_expression", "expression_dtype",
           "expression_productions", "expressions", "uses"]

WORK_DTYPES = ("float32", "int32")
UNARY = {"float32": ("neg", "abs", "tanh", "square", "floor", "round_bf16"), "int32": ("neg", "abs", "square")}
BINARY = ("add", "sub", "mul", "max", "min")
INT_BINARY = ("div", "rem", "floordiv", "mod")
COMPARISONS = ("lt", "le", "eq", "ne", "gt", "ge")
#: Operators whose float32 result is not correctly rounded (implementations differ in the last bit).
INEXACT = frozenset({"tanh"})
#: Unary operators that are boundaries: one float step of their operand can change a whole step of the result.
BOUNDARY_UNARY = frozenset({"floor", "round_bf16"})
_LEAVES = ("in", "iota", "pid", "smem", "tbl", "const")
Expr = tuple[Any, ...]


def _leaf(draw: st.DrawFn, dtype: str, inputs: Sequence[str], leaves: Sequence[Expr]) -> Expr:
    """An input (shrinks toward input 0), an extra leaf, or a constant; cast to ``dtype``."""
    choices = [("in", k) for k in range(len(inputs))] + list(leaves) + [("const", dtype, None)]
    leaf = draw(st.sampled_from(choices))
    if leaf[0] == "const":
        return ("const", dtype, draw(st.integers(-3, 3)))
    have = inputs[leaf[1]] if leaf[0] == "in" else "int32"
    return leaf if have == dtype else ("cast", dtype, leaf)


def expressions(*, dtype: str, inputs: Sequence[str], leaves: Sequence[Expr] = (), max_depth: int = 3,
                exact: bool = False, rolls: Sequence[tuple[int, int]] = ()) -> st.SearchStrategy[Expr]:
    """Expressions of ``dtype`` (in WORK_DTYPES) over ``inputs`` (their dtypes) and
    ``leaves`` (int32 extra leaves such as iota). ``exact``: no INEXACT operator anywhere
    (the value feeds a boundary: see the module docstring); inside, the operands of every
    boundary are exact whatever ``exact`` says. ``rolls``: (axis, extent) pairs along
    which the value may be rolled (by 1 .. extent - 1). Shrinks toward input 0 itself."""
    return st.composite(lambda draw: draw_expression(draw, dtype=dtype, inputs=inputs, leaves=leaves,
                                                     max_depth=max_depth, exact=exact, rolls=rolls))()


def draw_expression(draw: st.DrawFn, *, dtype: str, inputs: Sequence[str], leaves: Sequence[Expr] = (),
                    max_depth: int = 3, exact: bool = False, rolls: Sequence[tuple[int, int]] = ()) -> Expr:
    """One expression of ``expressions`` (same arguments), drawn with ``draw`` directly: a
    generator calls this once per program, so no strategy is built per draw."""

    def node(dtype: str, depth: int, exact: bool) -> Expr:
        kinds = ["leaf"] if depth <= 0 else ["leaf", "un", "bin", "where", "cast", "bitcast"] + (["roll"] if rolls else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "leaf":
            return _leaf(draw, dtype, inputs, leaves)
        if kind == "un":
            op = draw(st.sampled_from([o for o in UNARY[dtype] if not (exact and o in INEXACT)]))
            return ("un", op, node(dtype, depth - 1, exact or op in BOUNDARY_UNARY))
        if kind == "bin":
            op = draw(st.sampled_from(BINARY + (INT_BINARY if dtype == "int32" else ())))
            return ("bin", op, node(dtype, depth - 1, exact), node(dtype, depth - 1, exact))
        if kind == "where":  # the comparison is a boundary: its operands are exact
            cmp_dtype = draw(st.sampled_from(WORK_DTYPES))
            cmp = draw(st.sampled_from(COMPARISONS))
            a, b = node(cmp_dtype, depth - 1, True), node(cmp_dtype, depth - 1, True)
            return ("where", cmp, a, b, node(dtype, depth - 1, exact), node(dtype, depth - 1, exact))
        if kind == "roll":
            axis, extent = draw(st.sampled_from(list(rolls)))
            return ("roll", axis, draw(st.integers(1, extent - 1)), node(dtype, depth - 1, exact))
        other = next(d for d in WORK_DTYPES if d != dtype)  # float -> int32 (a cast or the bits) is a boundary
        return (kind, dtype, node(other, depth - 1, exact or dtype == "int32"))

    return node(dtype, max_depth, exact)


def conditions(*, inputs: Sequence[str], leaves: Sequence[Expr], max_depth: int = 2) -> st.SearchStrategy[tuple]:
    """A mask ``(cmp, a, b)``: ``a cmp b`` over exact int32 expressions (positions, mostly)."""
    return st.composite(lambda draw: draw_condition(draw, inputs=inputs, leaves=leaves, max_depth=max_depth))()


def draw_condition(draw: st.DrawFn, *, inputs: Sequence[str], leaves: Sequence[Expr], max_depth: int = 2) -> tuple:
    """One mask of ``conditions``, drawn with ``draw`` directly."""
    side = {"dtype": "int32", "inputs": inputs, "leaves": leaves, "max_depth": max_depth, "exact": True}
    return (draw(st.sampled_from(COMPARISONS)), draw_expression(draw, **side), draw_expression(draw, **side))


def boundary_hazards(expr: Expr, dtypes: Sequence[str], *, exact: bool = False) -> list[str]:
    """Where an INEXACT operator's value reaches a boundary in ``expr`` (``exact``: the
    whole value reaches one, e.g. an int32 output): one line per hazard, empty when none."""
    head = expr[0]
    if head in _LEAVES:
        return []
    if head == "un":
        here = [f"{expr[1]} feeds a boundary"] if exact and expr[1] in INEXACT else []
        return here + boundary_hazards(expr[2], dtypes, exact=exact or expr[1] in BOUNDARY_UNARY)
    if head == "bin":
        return boundary_hazards(expr[2], dtypes, exact=exact) + boundary_hazards(expr[3], dtypes, exact=exact)
    if head in ("cast", "bitcast"):
        into_int = expr[1] == "int32" and expression_dtype(expr[2], dtypes) != "int32"
        return boundary_hazards(expr[2], dtypes, exact=exact or into_int)
    if head == "roll":
        return boundary_hazards(expr[3], dtypes, exact=exact)
    if head == "where":
        return [h for e, ex in zip(expr[2:], (True, True, exact, exact), strict=True)
                for h in boundary_hazards(e, dtypes, exact=ex)]
    raise ValueError(f"not an expression: {expr!r}")


def expression_productions(expr: Expr, dtypes: Sequence[str]) -> list[str]:
    """Grammar productions used by ``expr`` (``dtypes``: the inputs' dtypes)."""
    head = expr[0]
    if head == "in":
        return []
    if head in ("iota", "smem", "pid", "tbl"):
        return [head]
    if head == "const":
        return ["const"]
    if head in ("cast", "bitcast"):
        inner = expr[2]
        src = expression_dtype(inner, dtypes)
        return [f"{head}:{src}->{expr[1]}", *expression_productions(inner, dtypes)]
    if head == "un":
        return [f"unary:{expr[1]}", *expression_productions(expr[2], dtypes)]
    if head == "bin":
        return [f"binary:{expr[1]}", *expression_productions(expr[2], dtypes), *expression_productions(expr[3], dtypes)]
    if head == "roll":
        return [f"pltpu.roll:axis{expr[1]}", *expression_productions(expr[3], dtypes)]
    out = [f"where:{expr[1]}"]
    for sub in expr[2:]:
        out += expression_productions(sub, dtypes)
    return out


def expression_dtype(expr: Expr, dtypes: Sequence[str]) -> str:
    """The dtype ``expr`` evaluates to (``dtypes``: the inputs' dtypes)."""
    head = expr[0]
    if head == "in":
        return dtypes[expr[1]]
    if head in ("iota", "smem", "pid", "tbl"):
        return "int32"
    if head in ("const", "cast", "bitcast"):
        return expr[1]
    if head == "where":
        return expression_dtype(expr[4], dtypes)
    if head == "roll":
        return expression_dtype(expr[3], dtypes)
    return expression_dtype(expr[2], dtypes)


def uses(expr: Any, head: str) -> set[Any]:
    """The first fields of every ``head`` node in ``expr`` (e.g. the dims of its iotas)."""
    if not isinstance(expr, (tuple, list)):  # lists: a program read back from a JSON report
        return set()
    if expr and expr[0] == head:
        return {expr[1] if len(expr) > 1 else None}
    parts = expr[1:] if expr and isinstance(expr[0], str) else expr  # a node's fields, or a tuple of nodes
    return set().union(*(uses(e, head) for e in parts if isinstance(e, (tuple, list))))
