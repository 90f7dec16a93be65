"""The reference emitter, and a program as one module of source with both functions.

``reference(x0, ...)`` computes on whole arrays with plain ``jax.numpy``/``lax`` what the
kernel computes block by block: an index map becomes a whole-array transform (a
transpose, a reversal of block order, a roll by whole blocks), a program id plus an
iota the global iota, a reduction across grid steps one reduction. ``compile_program``
execs ``program_source`` once per program and returns its ``kernel`` and ``reference``.
"""

from __future__ import annotations

import functools
from typing import Any

from pallas_verify.campaigns.smith.emit import (
    _REDUCE,
    _UNARY,
    EXACT_DOT,
    HEADER,
    exact_source,
    expression_source,
    identity_source,
    kernel_source,
    leaf_names,
    out_source,
    reduced_value,
    uses,
)

__all__ = ["Compiled", "compile_program", "program_source", "reference_source"]

Program = dict[str, Any]


def _view(k: int, shape: tuple[int, ...], role: tuple, program: Program) -> str:
    """``v{k} = ...``: input ``k`` as the whole array its blocks stand for."""
    x = f"x{k}"
    if role[0] == "transpose":
        return f"v{k} = jnp.swapaxes({x}, -1, -2)"
    if role[0] in ("reverse", "offset"):
        a = role[1]
        size, block, grid = program["shape"][a], program["block"][a], program["grid"][a]
        if role[0] == "reverse":
            blocks = (*shape[:a], grid, block, *shape[a + 1:])
            moved = f"jnp.flip({x}.reshape({blocks}), {a}).reshape({x}.shape)"
        else:
            moved = f"jnp.roll({x}, {-role[2] * block}, axis={a})"
        return f"v{k} = lax.slice_in_dim({moved}, 0, {size}, axis={a})"
    return f"v{k} = {x}"


def _reference_lines(program: Program) -> list[str]:
    skeleton, shape = program["skeleton"], tuple(program["shape"])
    if skeleton == "matmul":
        x, y = exact_source("x0", *EXACT_DOT), exact_source("x1", *EXACT_DOT)
        return [f"return (jnp.dot({x}, {y}, preferred_element_type=jnp.float32).astype(jnp.{program['outputs'][0][1]}),)"]
    lines = [_view(k, tuple(s), role, program) for k, (s, _, role) in enumerate(program["inputs"])]
    used = set().union(*(uses(e, "iota") for _, _, e in program["outputs"]))
    mask = program.get("mask")
    used |= {program["reduce"][1]} if mask is not None else set()
    smem = program.get("smem", False)
    used |= {0} if smem else set()
    lines += [f"i{a} = lax.broadcasted_iota(jnp.int32, {shape}, {a})" for a in sorted(used)]
    lines += [f"sm = i0 // {program['block'][0]} + 1"] if smem else []
    names = leaf_names(program, len(shape))
    if skeleton in ("reduce", "accumulate"):
        op, axis, work, post = program["reduce"]
        _, out_dtype, expr = program["outputs"][0]
        value = reduced_value(program, expression_source(expr, names), shape)
        value = value if mask is None else f"jnp.where(i{axis} < {mask}, {value}, {identity_source(op, work)})"
        reduced = f"{_REDUCE[op]}({value}, axis={axis}, keepdims=True)"
        reduced = _UNARY[post].format(reduced) if post else reduced
        return [*lines, f"return (lax.convert_element_type({reduced}, jnp.{out_dtype}),)"]
    outs = [out_source(expression_source(e, names), d, s) for s, d, e in program["outputs"]]
    return [*lines, f"return ({', '.join(outs)},)"]


def reference_source(program: Program) -> str:
    """``def reference(x0, ...)``: the program on whole arrays, pure JAX."""
    args = ", ".join(f"x{k}" for k in range(len(program["inputs"])))
    return "\n".join([f"def reference({args}):", *("    " + line for line in _reference_lines(program)), ""])


def program_source(program: Program) -> str:
    """A module defining ``kernel`` and ``reference`` for ``program``."""
    return "\n".join([HEADER, "", kernel_source(program), "", reference_source(program)])


class Compiled:
    """The callables (and the source) of one program."""

    def __init__(self, source: str, namespace: dict[str, Any]) -> None:
        self.source = source
        self.kernel = namespace["kernel"]
        self.reference = namespace["reference"]


@functools.lru_cache(maxsize=256)
def _compile(source: str) -> Compiled:
    namespace: dict[str, Any] = {"__name__": "pallas_verify_smith_program"}
    exec(compile(source, "<smith program>", "exec"), namespace)
    return Compiled(source, namespace)


def compile_program(program: Program) -> Compiled:
    """Emit ``program``'s source and exec it (cached by source text)."""
    return _compile(program_source(program))
