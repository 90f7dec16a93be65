"""Typed element-wise expression trees: the leaves and operators of generated programs.

An expression is a nested tuple (JSON-able, ``repr`` round-trips):

- ``("in", k)``: input ``k``'s value (its own dtype; a cast node converts it);
- ``("iota", a)``: the global index along array dim ``a`` (int32);
- ``("smem",)``: the scalar the kernel keeps in SMEM scratch (int32, loop programs);
- ``("const", dtype, v)``: a small constant;
- ``("un", op, e)``, ``("bin", op, a, b)``: element-wise operators (UNARY, BINARY);
- ``("where", cmp, a, b, c, d)``: ``jnp.where(a cmp b, c, d)`` (COMPARISONS);
- ``("cast", dtype, e)``: ``e.astype(dtype)``; a float -> int32 cast saturates (NaN -> 0)
  first, since XLA leaves out-of-range conversions undefined (fused and unfused code differ).

Arithmetic is done in float32 or int32 (WORK_DTYPES); bfloat16 appears as an input
dtype, an output dtype and as a rounding cast (``float32 -> bfloat16 -> float32``), so a
reference fused by XLA and a kernel run op by op round at the same places.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

__all__ = ["BINARY", "COMPARISONS", "UNARY", "WORK_DTYPES", "expression_dtype", "expression_productions", "expressions"]

WORK_DTYPES = ("float32", "int32")
UNARY = {"float32": ("neg", "abs", "tanh", "square", "floor", "round_bf16"), "int32": ("neg", "abs", "square")}
BINARY = ("add", "sub", "mul", "max", "min")
COMPARISONS = ("lt", "le", "eq", "ne", "gt", "ge")
Expr = tuple[Any, ...]


def _leaf(draw: st.DrawFn, dtype: str, inputs: Sequence[str], leaves: Sequence[Expr]) -> Expr:
    """An input (shrinks toward input 0), an extra leaf, or a constant; cast to ``dtype``."""
    choices = [("in", k) for k in range(len(inputs))] + list(leaves) + [("const", dtype, None)]
    leaf = draw(st.sampled_from(choices))
    if leaf[0] == "const":
        return ("const", dtype, draw(st.integers(-3, 3)))
    have = inputs[leaf[1]] if leaf[0] == "in" else "int32"
    return leaf if have == dtype else ("cast", dtype, leaf)


def expressions(*, dtype: str, inputs: Sequence[str], leaves: Sequence[Expr] = (),
                max_depth: int = 3) -> st.SearchStrategy[Expr]:
    """Expressions of ``dtype`` (in WORK_DTYPES) over ``inputs`` (their dtypes) and
    ``leaves`` (int32 extra leaves such as iota). Shrinks toward input 0 itself."""

    @st.composite
    def draw_expr(draw: st.DrawFn, dtype: str, depth: int) -> Expr:
        kinds = ["leaf"] if depth <= 0 else ["leaf", "un", "bin", "where", "cast"]
        kind = draw(st.sampled_from(kinds))
        if kind == "leaf":
            return _leaf(draw, dtype, inputs, leaves)
        if kind == "un":
            return ("un", draw(st.sampled_from(UNARY[dtype])), draw(draw_expr(dtype, depth - 1)))
        if kind == "bin":
            op = draw(st.sampled_from(BINARY))
            return ("bin", op, draw(draw_expr(dtype, depth - 1)), draw(draw_expr(dtype, depth - 1)))
        if kind == "where":
            cmp_dtype = draw(st.sampled_from(WORK_DTYPES))
            cmp = draw(st.sampled_from(COMPARISONS))
            a, b = draw(draw_expr(cmp_dtype, depth - 1)), draw(draw_expr(cmp_dtype, depth - 1))
            return ("where", cmp, a, b, draw(draw_expr(dtype, depth - 1)), draw(draw_expr(dtype, depth - 1)))
        other = next(d for d in WORK_DTYPES if d != dtype)
        return ("cast", dtype, draw(draw_expr(other, depth - 1)))

    return draw_expr(dtype, max_depth)


def expression_productions(expr: Expr, dtypes: Sequence[str]) -> list[str]:
    """Grammar productions used by ``expr`` (``dtypes``: the inputs' dtypes)."""
    head = expr[0]
    if head == "in":
        return []
    if head in ("iota", "smem"):
        return [head]
    if head == "const":
        return ["const"]
    if head == "cast":
        inner = expr[2]
        src = expression_dtype(inner, dtypes)
        return [f"cast:{src}->{expr[1]}", *expression_productions(inner, dtypes)]
    if head == "un":
        return [f"unary:{expr[1]}", *expression_productions(expr[2], dtypes)]
    if head == "bin":
        return [f"binary:{expr[1]}", *expression_productions(expr[2], dtypes), *expression_productions(expr[3], dtypes)]
    out = [f"where:{expr[1]}"]
    for sub in expr[2:]:
        out += expression_productions(sub, dtypes)
    return out


def expression_dtype(expr: Expr, dtypes: Sequence[str]) -> str:
    """The dtype ``expr`` evaluates to (``dtypes``: the inputs' dtypes)."""
    head = expr[0]
    if head == "in":
        return dtypes[expr[1]]
    if head in ("iota", "smem"):
        return "int32"
    if head in ("const", "cast"):
        return expr[1]
    if head == "where":
        return expression_dtype(expr[4], dtypes)
    return expression_dtype(expr[2], dtypes)
