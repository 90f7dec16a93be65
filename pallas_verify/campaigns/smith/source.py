"""The reference emitter, and a program as one module of source with both functions.

``reference(x0, ...)`` computes on whole arrays with plain ``jax.numpy``/``lax`` what the
kernel computes block by block: an index map becomes a whole-array transform (a
transpose, a permutation of blocks, a tiling, a block repeated along an axis), a program
id plus an iota the global iota, a reduction across grid steps one reduction, a masked
store a ``jnp.where``. ``compile_program`` execs ``program_source`` once per program and
returns its ``kernel`` and ``reference``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pallas_verify.campaigns.smith.emit import kernel_source
from pallas_verify.campaigns.smith.exprsrc import (
    EXACT_DOT,
    HEADER,
    REDUCE,
    UNARY,
    Names,
    condition_source,
    exact_source,
    expression_source,
    identity_source,
    out_source,
    reduced_value,
)
from strategies._expressions import uses

__all__ = ["Compiled", "compile_program", "program_source", "reference_source"]

Program = dict[str, Any]


def _split(shape: Sequence[int], a: int, outer: int, inner: int) -> tuple[int, ...]:
    return (*shape[:a], outer, inner, *shape[a + 1:])


def _blocks(x: str, role: tuple, program: Program) -> str:
    """``x`` with its blocks along ``role[1]`` permuted as the role's index map reads them
    (padded with the role's fill past a ragged end first), cut back to the array's size."""
    a = role[1]
    shape, size, block, grid = list(program["shape"]), program["shape"][a], program["block"][a], program["grid"][a]
    if role[-1] is not None:
        pad = [(0, 0)] * len(shape)
        pad[a] = (0, grid * block - size)
        x = f"jnp.pad({x}, {pad}, constant_values={role[-1]})"
    blocks = f"{x}.reshape({_split(shape, a, grid, block)})"
    if role[0] == "reverse":
        moved = f"jnp.flip({blocks}, {a})"
    elif role[0] == "offset":
        moved = f"jnp.roll({blocks}, {-role[2]}, axis={a})"
    else:
        moved = f"jnp.take({blocks}, jnp.asarray({list(program['table'][1])}), axis={a})"
    whole = list(shape)
    whole[a] = grid * block
    return f"lax.slice_in_dim({moved}.reshape({tuple(whole)}), 0, {size}, axis={a})"


def _view(k: int, role: tuple, program: Program) -> str:
    """``v{k} = ...``: input ``k`` as the whole array its blocks stand for."""
    x, shape = f"x{k}", tuple(program["shape"])
    if role[0] == "transpose":
        return f"v{k} = jnp.swapaxes({x}, -1, -2)"
    if role[0] in ("reverse", "offset", "table"):
        return f"v{k} = {_blocks(x, role, program)}"
    if role[0] == "pin":
        a = role[1]
        return f"v{k} = lax.slice_in_dim(jnp.concatenate([{x}] * {program['grid'][a]}, axis={a}), 0, {shape[a]}, axis={a})"
    if role[0] == "repeat":
        a, r, block, grid = role[1], role[2], program["block"][role[1]], program["grid"][role[1]]
        reps = tuple(r if d == a + 1 else 1 for d in range(len(shape) + 1))
        return f"v{k} = jnp.tile({x}.reshape({_split(shape, a, grid, block // r)}), {reps}).reshape({shape})"
    if role[0] == "any" and role[1][0] != "identity":
        return f"v{k} = {_blocks(x, (role[1][0], 0, *role[1][1:], None), program)}"
    return f"v{k} = {x}"


def _gathered(k: int, program: Program) -> str:
    """A loop's input read every ``steps``-th row and stored in contiguous rows."""
    (rows, n), (bm, _), step = program["shape"], program["block"], program["step_rows"]
    return f"v{k} = x{k}.reshape({(rows // bm, step, bm // step, n)}).transpose(0, 2, 1, 3).reshape({(rows, n)})"


def _names(program: Program, tile: Sequence[int]) -> Names:
    shape, block = tuple(program["shape"]), program["block"]

    def roll(src: str, axis: int, shift: int) -> str:
        split = _split(shape, axis, shape[axis] // tile[axis], tile[axis])
        return f"jnp.roll({src}.reshape({split}), {shift}, axis={axis + 1}).reshape({shape})"

    table = program.get("table")
    tbl = f"jnp.asarray({list(table[1])}, jnp.int32)[i{table[0]} // {block[table[0]]}]" if table else "tb"
    return Names(inputs=[f"v{k}" for k in range(len(program["inputs"]))], dtypes=[d for _, d, _ in program["inputs"]],
                 iota=[f"i{a}" for a in range(len(shape))], pid=[f"(i{a} // {block[a]})" for a in range(len(shape))],
                 shape=shape, roll=roll, bitcast=lambda src, dtype: f"lax.bitcast_convert_type({src}, jnp.{dtype})",
                 tbl=tbl)


def _reference_lines(program: Program) -> list[str]:
    skeleton, shape = program["skeleton"], tuple(program["shape"])
    if skeleton == "matmul":
        if program["inputs"][0][1] == "int8":
            return [f"return (jnp.dot(x0, x1, preferred_element_type=jnp.int32).astype(jnp.{program['outputs'][0][1]}),)"]
        x, y = exact_source("x0", *EXACT_DOT), exact_source("x1", *EXACT_DOT)
        return [f"return (jnp.dot({x}, {y}, preferred_element_type=jnp.float32).astype(jnp.{program['outputs'][0][1]}),)"]
    gather = program.get("stride") == "gather"
    lines = [_gathered(k, program) if gather else _view(k, role, program)
             for k, (_, _, role) in enumerate(program["inputs"])]
    parts = [program["outputs"], program.get("store_masks"), program.get("load_masks"), program.get("table")]
    used = set().union(*(uses(p, "iota") | uses(p, "pid") | uses(p, "tbl") for p in parts))
    mask = program.get("mask")
    used |= {program["reduce"][1][-1]} if mask is not None else set()
    used |= {0} if program.get("smem") or _overhangs(program) else set()
    lines += [f"i{a} = lax.broadcasted_iota(jnp.int32, {shape}, {a})" for a in sorted(used)]
    lines += [f"sm = i0 // {program['block'][0]} + 1"] if program.get("smem") else []
    tile = (program["step_rows"], program["block"][1]) if skeleton == "loop" else program["block"]
    names = _names(program, tile)
    for k, load in enumerate(program.get("load_masks") or ()):
        if load is not None and len(load) > 2 and load[2]:  # rows s further on, where they lie in the block and array
            b0, s = program["block"][0], load[2]
            inside = f"(i0 % {b0} + {s} < {b0}) & (i0 + {s} < {shape[0]})"
            lines.append(f"v{k} = jnp.where(({condition_source(load[0], names)}) & {inside}, "
                         f"jnp.roll(v{k}, -{s}, axis=0), jnp.asarray({load[1]}, v{k}.dtype))")
        elif load is not None:
            lines.append(f"v{k} = jnp.where({condition_source(load[0], names)}, v{k}, jnp.asarray({load[1]}, v{k}.dtype))")
    if skeleton in ("reduce", "accumulate"):
        op, axes, work, post = program["reduce"]
        _, out_dtype, expr = program["outputs"][0]
        value = reduced_value(program, expression_source(expr, names), shape)
        value = value if mask is None else f"jnp.where(i{axes[-1]} < {mask}, {value}, {identity_source(op, work)})"
        reduced = f"{REDUCE[op]}({value}, axis={tuple(axes)}, keepdims=True)"
        reduced = UNARY[post].format(reduced) if post else reduced
        return [*lines, f"return ({out_source(reduced, out_dtype, program['outputs'][0][0])},)"]
    outs = []
    masks = program.get("store_masks") or (None,) * len(program["outputs"])
    for (s, d, e), m in zip(program["outputs"], masks, strict=True):
        value = out_source(expression_source(e, names), d, s)
        if m is not None:
            value = f"jnp.where({condition_source(m[0], names)}, {value}, {out_source(expression_source(m[1], names), d, s)})"
        outs.append(value)
    return [*lines, f"return ({', '.join(outs)},)"]


def _overhangs(program: Program) -> bool:
    return any(m is not None and len(m) > 2 and m[2] for m in program.get("load_masks") or ())


def reference_source(program: Program) -> str:
    """``def reference(x0, ...)``: the program on whole arrays, pure JAX."""
    args = ", ".join(f"x{k}" for k in range(len(program["inputs"])))
    return "\n".join([f"def reference({args}):", *("    " + line for line in _reference_lines(program)), ""])


def program_source(program: Program) -> str:
    """A module defining ``kernel`` and ``reference`` for ``program``."""
    return "\n".join([HEADER, "", kernel_source(program), "", reference_source(program), *_vmapped(program)])


def _vmapped(program: Program) -> list[str]:
    """Under the program's ``vmap``, the kernel and the reference alike, batched the same way."""
    if not program.get("vmap"):
        return []
    _, axes, out_axis = program["vmap"]
    return [f"{f} = jax.vmap({f}, in_axes={tuple(axes)!r}, out_axes={out_axis})" for f in ("kernel", "reference")] + [""]


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
