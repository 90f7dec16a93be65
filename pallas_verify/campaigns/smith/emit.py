"""The kernel emitter: a program (``strategies.programs``) as the source of one
``pl.pallas_call`` (``def kernel(x0, ...)``, no ``interpret=``: the backend chooses).

Grid axis ``i`` walks array dim ``order[i]``; the emitted code names the program id of
the axis that walks dim ``a`` ``g{a}`` (and index maps take them in grid order). A
program with a scalar-prefetch table passes it as the call's first operand
(``PrefetchScalarGridSpec``); its index maps and body see it as ``t``/``t_ref``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pallas_verify.campaigns.smith.exprsrc import (
    EXACT_DOT,
    REDUCE,
    UNARY,
    Names,
    combine_source,
    condition_source,
    exact_source,
    expression_source,
    identity_source,
    out_source,
    reduced_value,
)
from strategies._expressions import uses

__all__ = ["block_of", "kernel_source"]

Program = dict[str, Any]


def _names(program: Program, tile: Sequence[int], iota: list[str], pid: list[str]) -> Names:
    rank = len(tile)

    def bitcast(src: str, dtype: str) -> str:
        if rank >= 2:
            return f"pltpu.bitcast(jnp.broadcast_to({src}, {tuple(tile)}), jnp.{dtype})"
        return f"lax.bitcast_convert_type({src}, jnp.{dtype})"

    return Names(inputs=[f"v{k}" for k in range(len(program["inputs"]))], dtypes=[d for _, d, _ in program["inputs"]],
                 iota=iota, pid=pid, shape=tuple(tile), roll=lambda src, axis, shift: f"pltpu.roll({src}, {shift}, {axis})",
                 bitcast=bitcast, tbl=f"t_ref[g{program['table'][0]}]" if program.get("table") else "tb")


# -- index maps and block specs ------------------------------------------------------------


def block_of(role: tuple, block: Sequence[int]) -> tuple[int, ...]:
    """The block an input of ``role`` is read in, next to an output block ``block``."""
    out = list(block)
    if role[0] in ("broadcast", "reduced"):
        out[role[1]] = 1
    elif role[0] == "transpose":
        out[-1], out[-2] = out[-2], out[-1]
    elif role[0] == "repeat":
        out[role[1]] //= role[2]
    return tuple(out)


def _mapped(program: Program, role: tuple, table: str = "t") -> str:
    """The block index along ``role[1]`` that an input of ``role`` reads at this step."""
    a, grid = role[1], program["grid"]
    if role[0] == "reverse":
        return f"{grid[a] - 1} - g{a}"
    if role[0] == "offset":
        return f"(g{a} + {role[2]}) % {grid[a]}"
    return f"{table}[g{a}]"  # table


def _index_map(program: Program, role: tuple, rank: int) -> str:
    order = program["order"]
    params = [f"g{a}" for a in order] + (["t"] if program.get("table") else [])
    idx = [f"g{a}" if a in order else "0" for a in range(rank)]  # dims the grid does not walk: block 0
    if role[0] in ("broadcast", "pin", "reduced"):
        for a in role[1:]:
            idx[a] = "0"
    elif role[0] in ("reverse", "offset", "table"):
        idx[role[1]] = _mapped(program, role)
    elif role[0] == "transpose":
        idx[-1], idx[-2] = idx[-2], idx[-1]
    return f"lambda {', '.join(params)}: ({', '.join(idx)},)"


def _spec(program: Program, role: tuple, block: Sequence[int]) -> str:
    if role[0] == "any":
        return "pl.BlockSpec(memory_space=pl.ANY)"
    return f"pl.BlockSpec({tuple(block)}, {_index_map(program, role, len(block))})"


def _out_block(program: Program) -> tuple[int, ...]:
    if program["skeleton"] in ("reduce", "accumulate"):
        axes = program["reduce"][1]
        return tuple(1 if a in axes else b for a, b in enumerate(program["block"]))
    return tuple(program["block"][:2]) if program["skeleton"] == "matmul" else tuple(program["block"])


def _specs(program: Program) -> tuple[list[str], list[str], list[str]]:
    """(in_specs, out_specs, scratch_shapes) sources."""
    skeleton, block = program["skeleton"], program["block"]
    if skeleton == "matmul":
        bm, bn, bk = block
        acc = "int32" if program["inputs"][0][1] == "int8" else "float32"
        ins = [f"pl.BlockSpec({(bm, bk)}, lambda g0, g1, g2: (g0, g2))", f"pl.BlockSpec({(bk, bn)}, lambda g0, g1, g2: (g2, g1))"]
        return ins, [f"pl.BlockSpec({(bm, bn)}, lambda g0, g1, g2: (g0, g1))"], [f"pltpu.VMEM({(bm, bn)}, jnp.{acc})"]
    ins = [_spec(program, role, block_of(role, block)) for _, _, role in program["inputs"]]
    out_role = ("reduced", *program["reduce"][1]) if skeleton == "accumulate" else ("identity",)
    outs = [_spec(program, out_role, _out_block(program)) for _ in program["outputs"]]
    scratch: list[str] = []
    if skeleton == "accumulate" and program["acc"] == "scratch":
        scratch.append(f"pltpu.VMEM({_out_block(program)}, jnp.{program['reduce'][2]})")
    elif skeleton == "loop" and program["smem"]:
        scratch.append("pltpu.SMEM((1,), jnp.int32)")
    elif skeleton == "dma":
        sems = "pltpu.SemaphoreType.DMA" + (f"(({program['chunks']},))" if program["semaphores"] == "own" else "")
        scratch += [f"pltpu.VMEM({tuple(block)}, jnp.{program['inputs'][0][1]})", sems]
    return ins, outs, scratch


# -- bodies --------------------------------------------------------------------------------


def _program_ids(program: Program) -> list[str]:
    order = program["order"]
    return [f"g{a} = pl.program_id({order.index(a)})" for a in sorted(order)]


def _iotas(used: set[int], shape: Sequence[int], offsets: Sequence[str]) -> list[str]:
    return [f"i{a} = {offsets[a]}lax.broadcasted_iota(jnp.int32, {tuple(shape)}, {a})" for a in sorted(used)]


def _used(program: Program, *extra: Any) -> set[int]:
    """Dims whose global index the body needs (iotas of the expressions and masks)."""
    found: set[int] = set()
    for e in (*(expr for _, _, expr in program["outputs"]), *(program.get("store_masks") or ()),
              *(program.get("load_masks") or ()), *extra):
        found |= uses(e, "iota")
    return found


def _load(program: Program, k: int, role: tuple, names: Names, ref: str, read: str | None = None) -> list[str]:
    """``v{k} = ...``: input ``k``'s block as the output block's positions see it (``read``:
    the source that reads the whole of ``ref``; default ``ref[...]``)."""
    block, x = program["block"], read or f"{ref}[...]"
    dtype = f"{ref}.dtype"
    mask = (program.get("load_masks") or (None,) * (k + 1))[k]
    if mask is not None and len(mask) > 2 and mask[2]:  # a window overhanging the ref by s rows
        cond, other, s = mask
        row = f"lax.broadcasted_iota(jnp.int32, {tuple(block)}, 0)"
        inside = f"({row} + {s} < {block[0]}) & (g0 * {block[0]} + {row} + {s} < {program['shape'][0]})"
        return [f"c{k} = ({condition_source(cond, names)}) & {inside}",
                f"v{k} = jnp.where(c{k}, pltpu.load({ref}.at[pl.ds(g0 * 0 + {s}, {block[0]})], mask=c{k}), "
                f"jnp.asarray({other}, {dtype}))"]
    if mask is not None:
        cond, other = mask[:2]
        return [f"c{k} = {condition_source(cond, names)}",
                f"v{k} = jnp.where(c{k}, pltpu.load({ref}, mask=c{k}), jnp.asarray({other}, {dtype}))"]
    if role[0] == "transpose":
        return [f"v{k} = jnp.swapaxes({x}, -1, -2)"]
    if role[0] == "repeat":
        reps = tuple(role[2] if a == role[1] else 1 for a in range(len(block)))
        return [f"v{k} = jnp.tile({x}, {reps})"]
    if role[0] in ("reverse", "offset", "table") and role[-1] is not None:  # masked past the array's end
        a = role[1]
        src = f"({_mapped(program, role, 't_ref')}) * {block[a]} + lax.broadcasted_iota(jnp.int32, {tuple(block)}, {a})"
        return [f"v{k} = jnp.where({src} < {program['shape'][a]}, {x}, jnp.asarray({role[-1]}, {dtype}))"]
    return [f"v{k} = {x}"]


def _store(ref: str, target: str, expr: tuple, dtype: str, shape: Sequence[int], mask: Any, names: Names) -> list[str]:
    """Store ``expr`` into ``ref`` (``target``: the same as a ref); with a mask, the
    output first holds the mask's base value and ``pltpu.store`` writes where it is on."""
    value = out_source(expression_source(expr, names), dtype, shape)
    if mask is None:
        return [f"{ref} = {value}"]
    cond, base = mask
    return [f"{ref} = {out_source(expression_source(base, names), dtype, shape)}",
            f"pltpu.store({target}, {value}, mask={condition_source(cond, names)})"]


def _map_body(program: Program) -> list[str]:
    block, rank = program["block"], len(program["block"])
    names = _names(program, block, [f"i{a}" for a in range(rank)], [f"g{a}" for a in range(rank)])
    lines = _program_ids(program)
    lines += _iotas(_used(program), block, [f"g{a} * {block[a]} + " for a in range(rank)])
    for k, (_, _, role) in enumerate(program["inputs"]):
        lines += _load(program, k, role, names, f"x{k}_ref")
    masks = program.get("store_masks") or (None,) * len(program["outputs"])
    for j, ((_, dtype, expr), mask) in enumerate(zip(program["outputs"], masks, strict=True)):
        lines += _store(f"o{j}_ref[...]", f"o{j}_ref", expr, dtype, block, mask, names)
    return lines


def _reduce_body(program: Program) -> list[str]:
    op, axes, work, post = program["reduce"]
    block, shape, (_, out_dtype, expr) = program["block"], program["shape"], program["outputs"][0]
    rank, mask = len(block), program.get("mask")
    names = _names(program, block, [f"i{a}" for a in range(rank)], [f"g{a}" for a in range(rank)])
    lines = _program_ids(program)
    ragged = [a for a in axes if shape[a] % block[a]]
    lines += _iotas(_used(program) | set(ragged) | ({axes[-1]} if mask is not None else set()), block,
                    [f"g{a} * {block[a]} + " for a in range(rank)])
    for k, (_, _, role) in enumerate(program["inputs"]):
        lines += _load(program, k, role, names, f"x{k}_ref")
    ident = identity_source(op, work)
    valid = [f"(i{a} < {shape[a]})" for a in ragged] + ([f"(i{axes[-1]} < {mask})"] if mask is not None else [])
    value = reduced_value(program, expression_source(expr, names), block)
    value = f"jnp.where({' & '.join(valid)}, {value}, {ident})" if valid else value
    reduced = f"{REDUCE[op]}({value}, axis={tuple(axes)}, keepdims=True)"
    post_src = UNARY[post] if post else "{}"
    if program["skeleton"] == "reduce":
        return [*lines, f"o0_ref[...] = {out_source(post_src.format(reduced), out_dtype, _out_block(program))}"]
    acc = "acc_ref" if program["acc"] == "scratch" else "o0_ref"
    first = " & ".join(f"(g{a} == 0)" for a in axes)
    last = " & ".join(f"(g{a} == {program['grid'][a] - 1})" for a in axes)
    lines += [f"@pl.when({first})", "def _init():", f"    {acc}[...] = jnp.full({acc}.shape, {ident})",
              f"{acc}[...] = {combine_source(op, f'{acc}[...]', reduced)}"]
    if acc == "acc_ref" or post:
        lines += [f"@pl.when({last})", "def _finalize():",
                  f"    o0_ref[...] = {out_source(post_src.format(f'{acc}[...]'), out_dtype, _out_block(program))}"]
    return lines


def _matmul_body(program: Program) -> list[str]:
    k = program["inputs"][0][0][1]
    bm, bn, bk = program["block"]
    out_dtype, integer = program["outputs"][0][1], program["inputs"][0][1] == "int8"
    acc = "int32" if integer else "float32"
    x, y = ("x0_ref[...]", "x1_ref[...]") if integer else (exact_source("x0_ref[...]", *EXACT_DOT),
                                                           exact_source("x1_ref[...]", *EXACT_DOT))
    return [
        "g2 = pl.program_id(2)", "@pl.when(g2 == 0)", "def _init():",
        f"    acc_ref[...] = jnp.zeros({(bm, bn)}, jnp.{acc})",
        f"cols = g2 * {bk} + lax.broadcasted_iota(jnp.int32, {(bm, bk)}, 1)",
        f"rows = g2 * {bk} + lax.broadcasted_iota(jnp.int32, {(bk, bn)}, 0)", f"x = {x}", f"y = {y}",
        f"x = jnp.where(cols < {k}, x, jnp.zeros_like(x))", f"y = jnp.where(rows < {k}, y, jnp.zeros_like(y))",
        f"acc_ref[...] += jnp.dot(x, y, preferred_element_type=jnp.{acc})",
        f"@pl.when(g2 == {program['grid'][2] - 1})", "def _finalize():",
        f"    o0_ref[...] = acc_ref[...].astype(jnp.{out_dtype})",
    ]


def _loop_body(program: Program) -> list[str]:
    (bm, bn), step, stride = program["block"], program["step_rows"], program["stride"]
    steps = bm // step
    _, out_dtype, expr = program["outputs"][0]
    contiguous = f"pl.ds(pl.multiple_of(t * {step}, {step}), {step})"
    strided = f"pl.ds(t, {step}, stride={steps})"
    rows_in, rows_out = (contiguous, contiguous) if stride == "none" else (strided, strided if stride == "same"
                                                                            else contiguous)
    row0 = f"g0 * {bm} + t + {steps} * " if stride == "same" else f"g0 * {bm} + t * {step} + "
    names = _names(program, (step, bn), ["i0", "i1"], ["g0", "g1"])
    lines = _program_ids(program) + (["s_ref[0] = g0 + 1"] if program["smem"] else [])
    inner = [f"rows_in = {rows_in}", f"rows = {rows_out}"]
    inner += _iotas(_used(program), (step, bn), [row0, f"g1 * {bn} + "])
    for k in range(len(program["inputs"])):
        inner += _load(program, k, ("identity",), names, f"x{k}_ref.at[rows_in, :]", f"x{k}_ref[rows_in, :]")
    inner += ["sm = s_ref[0]"] if program["smem"] else []
    mask = (program.get("store_masks") or (None,))[0]
    inner += _store("o0_ref[rows, :]", "o0_ref.at[rows, :]", expr, out_dtype, (step, bn), mask, names)
    inner.append("return carry")
    unroll = ", unroll=True" if stride != "none" else ""  # Mosaic takes a strided slice's start only when static
    return [*lines, "def step(t, carry):", *("    " + s for s in inner), f"lax.fori_loop(0, {steps}, step, 0{unroll})"]


def _dma_body(program: Program) -> list[str]:
    (bm, n), grid = program["block"], program["grid"][0]
    _, out_dtype, expr = program["outputs"][0]
    source, chunks = program["inputs"][0][2][1], program["chunks"]
    src = {"identity": "g0", "reverse": f"{grid - 1} - g0", "offset": f"(g0 + {source[-1]}) % {grid}",
           "table": "t_ref[g0]"}[source[0]]
    rows = bm // chunks
    lines = ["g0 = pl.program_id(0)", f"src = {src}"]
    for j in range(chunks):
        sem = f"sem_ref.at[{j}]" if program["semaphores"] == "own" else "sem_ref"
        lines.append(f"c{j} = pltpu.make_async_copy(x0_ref.at[pl.ds(src * {bm} + {j * rows}, {rows})], "
                     f"buf_ref.at[pl.ds({j * rows}, {rows})], {sem})")
    lines += [f"c{j}.start()" for j in range(chunks)]
    waits = range(chunks) if program["wait"] == "same" else reversed(range(chunks))
    lines += [f"c{j}.wait()" for j in waits] + ["v0 = buf_ref[...]"]
    lines += [f"v{k} = x{k}_ref[...]" for k in range(1, len(program["inputs"]))]
    lines += _iotas(_used(program), (bm, n), [f"g0 * {bm} + ", ""])
    names = _names(program, (bm, n), ["i0", "i1"], ["g0", "0"])
    return [*lines, f"o0_ref[...] = {out_source(expression_source(expr, names), out_dtype, (bm, n))}"]


_BODIES = {"map": _map_body, "reduce": _reduce_body, "accumulate": _reduce_body, "matmul": _matmul_body,
           "loop": _loop_body, "dma": _dma_body}


def _scratch_names(program: Program) -> list[str]:
    skeleton = program["skeleton"]
    if skeleton == "matmul" or (skeleton == "accumulate" and program["acc"] == "scratch"):
        return ["acc_ref"]
    if skeleton == "loop" and program["smem"]:
        return ["s_ref"]
    return ["buf_ref", "sem_ref"] if skeleton == "dma" else []


def kernel_source(program: Program) -> str:
    """``def kernel(x0, ...)``: the program as one ``pl.pallas_call``."""
    args = [f"x{k}" for k in range(len(program["inputs"]))]
    table = program.get("table")
    refs = (["t_ref"] if table else []) + [f"{a}_ref" for a in args] + \
        [f"o{j}_ref" for j in range(len(program["outputs"]))] + _scratch_names(program)
    ins, outs, scratch = _specs(program)
    shapes = [f"jax.ShapeDtypeStruct({tuple(s)}, jnp.{d})" for s, d, _ in program["outputs"]]
    # Under vmap no dimension_semantics: TPU interpret mode (JAX 0.12) cannot vmap a kernel
    # that sets them (an upstream limitation: the catalog's +vmap cells show it as n/a).
    params = ", ".join([*([] if program.get("vmap") else [f"dimension_semantics={tuple(program['semantics'])!r}"]),
                        *([f"vmem_limit_bytes={program['vmem_limit']}"] if program.get("vmem_limit") else [])])
    grid = tuple(program["grid"][a] for a in program["order"])
    specs = [_list_arg("in_specs", ins), _list_arg("out_specs", outs)] + ([_list_arg("scratch_shapes", scratch)]
                                                                          if scratch else [])
    if table:
        call = ["        grid_spec=pltpu.PrefetchScalarGridSpec(", f"        num_scalar_prefetch=1, grid={grid},",
                *specs, "        ),"]
        operands = [f"jnp.asarray({list(table[1])}, jnp.int32)", *args]
    else:
        call, operands = [f"        grid={grid},", *specs], args
    call.append(_list_arg("out_shape", shapes))
    if program.get("alias"):  # an operand index: the scalar-prefetch table comes first
        call.append(f"        input_output_aliases={{{program.get('alias_input', 0) + (1 if table else 0)}: 0}},")
    call.append(f"        compiler_params=pltpu.CompilerParams({params}),")
    body = ["    " + line for line in _BODIES[program["skeleton"]](program)]
    return "\n".join([f"def kernel({', '.join(args)}):", f"    def body({', '.join(refs)}):",
                      *("    " + line for line in body), "", "    outputs = pl.pallas_call(", "        body,", *call,
                      f"    )({', '.join(operands)})", "    return tuple(outputs)", ""])


def _list_arg(name: str, items: list[str]) -> str:
    return f"        {name}=[\n" + "".join(f"            {item},\n" for item in items) + "        ],"
