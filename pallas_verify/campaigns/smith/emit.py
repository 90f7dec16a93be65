"""The kernel emitter: a program (``strategies.programs``) as the source of one
``pl.pallas_call`` (``def kernel(x0, ...)``, no ``interpret=``: the backend chooses), and
the expression emitter both emitters share (``source.py`` emits the reference).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strategies._expressions import expression_dtype

__all__ = [
    "EXACT_DOT",
    "EXACT_SUM",
    "HEADER",
    "exact_source",
    "expression_source",
    "identity_source",
    "kernel_source",
    "leaf_names",
    "out_source",
    "reduced_value",
    "uses",
]

HEADER = """import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""

_UNARY = {"neg": "(-{})", "abs": "jnp.abs({})", "tanh": "jnp.tanh({})", "square": "jnp.square({})",
          "floor": "jnp.floor({})", "round_bf16": "lax.convert_element_type(lax.convert_element_type({}, "
          "jnp.bfloat16), jnp.float32)"}
_BINARY = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "max": "jnp.maximum({}, {})",
           "min": "jnp.minimum({}, {})"}
_CMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!=", "gt": ">", "ge": ">="}
_REDUCE = {"sum": "jnp.sum", "max": "jnp.max", "min": "jnp.min"}
_COMBINE = {"sum": "({} + {})", "max": "jnp.maximum({}, {})", "min": "jnp.minimum({}, {})"}
_IDENTITY = {("sum", "float32"): "0", ("sum", "int32"): "0", ("max", "float32"): "-jnp.inf",
             ("min", "float32"): "jnp.inf", ("max", "int32"): "jnp.iinfo(jnp.int32).min",
             ("min", "int32"): "jnp.iinfo(jnp.int32).max"}
Program = dict[str, Any]
_INT32_SAFE = (-2147483520.0, 2147483520.0)  # the float32 values nearest the int32 range, inside it


def expression_source(expr: tuple, names: dict[str, Any]) -> str:
    """Source of ``expr`` with leaves named by ``names`` (``in``/``iota`` lists, ``smem``)."""
    head = expr[0]
    if head == "in":
        return names["in"][expr[1]]
    if head == "iota":
        return names["iota"][expr[1]]
    if head == "smem":
        return names["smem"]
    if head == "const":
        return f"jnp.asarray({expr[2]}, jnp.{expr[1]})"
    if head == "cast":
        inner = expression_source(expr[2], names)
        if expr[1] == "int32" and expression_dtype(expr[2], names["dtypes"]) != "int32":
            inner = f"jnp.clip(jnp.nan_to_num({inner}), {_INT32_SAFE[0]}, {_INT32_SAFE[1]})"
        return f"lax.convert_element_type({inner}, jnp.{expr[1]})"
    if head == "un":
        return _UNARY[expr[1]].format(expression_source(expr[2], names))
    if head == "bin":
        return _BINARY[expr[1]].format(expression_source(expr[2], names), expression_source(expr[3], names))
    a, b, c, d = (expression_source(e, names) for e in expr[2:])
    return f"jnp.where({a} {_CMP[expr[1]]} {b}, {c}, {d})"


def uses(expr: tuple, head: str) -> set[Any]:
    if expr[0] == head:
        return {expr[1] if len(expr) > 1 else None}
    return set().union(*(uses(e, head) for e in expr[1:] if isinstance(e, tuple)))


def exact_source(value: str, step: int, bound: int) -> str:
    """``value`` rounded to multiples of 1/step within [-bound, bound]: sums and dots of such
    values are exact in float32 in any order (the bounds keep them under 2**24 steps), so a
    backend that accumulates in another order must still agree with the reference."""
    return f"jnp.clip(jnp.round({value} * {step}) / {step}, -{bound}, {bound})"


EXACT_SUM, EXACT_DOT = (64, 64), (8, 8)


def identity_source(op: str, work: str) -> str:
    """The identity of reduction ``op`` in ``work`` arithmetic, as a 0-d array."""
    return f"jnp.asarray({_IDENTITY[(op, work)]}, jnp.{work})"


def reduced_value(program: Program, expr_src: str, shape: Sequence[int]) -> str:
    """The value a reduction program reduces: its expression in the work dtype, over
    ``shape``, made exact (``exact_source``) for a float sum."""
    op, _, work, _ = program["reduce"]
    value = f"jnp.broadcast_to(lax.convert_element_type({expr_src}, jnp.{work}), {tuple(shape)})"
    return exact_source(value, *EXACT_SUM) if op == "sum" and work == "float32" else value


def out_source(value: str, dtype: str, shape: Sequence[int]) -> str:
    return f"jnp.broadcast_to(lax.convert_element_type({value}, jnp.{dtype}), {tuple(shape)})"


# -- index maps ----------------------------------------------------------------------------


def _dims_in_grid_order(program: Program) -> list[int]:
    """The array dim each grid axis walks (the transposed layout reverses them)."""
    rank = len(program["grid"])
    return list(range(rank))[::-1] if program["layout"] == "transposed" else list(range(rank))


def _index_map(program: Program, role: tuple, rank: int) -> str:
    grid = program["grid"]
    params = ", ".join(f"g{a}" for a in _dims_in_grid_order(program))
    idx = [f"g{a}" if a < len(grid) else "0" for a in range(rank)]  # dims the grid does not walk: block 0
    if role[0] == "broadcast":
        idx[role[1]] = "0"
    elif role[0] == "reverse":
        idx[role[1]] = f"{grid[role[1]] - 1} - g{role[1]}"
    elif role[0] == "offset":
        idx[role[1]] = f"(g{role[1]} + {role[2]}) % {grid[role[1]]}"
    elif role[0] == "transpose":
        idx[-1], idx[-2] = idx[-2], idx[-1]
    elif role[0] == "reduced":
        idx[-1] = "0"
    return f"lambda {params}: ({', '.join(idx)},)"


def _block_spec(program: Program, role: tuple, block: Sequence[int]) -> str:
    if role[0] == "any":
        return "pl.BlockSpec(memory_space=pl.ANY)"
    return f"pl.BlockSpec({tuple(block)}, {_index_map(program, role, len(block))})"


def _role_block(role: tuple, block: tuple[int, ...]) -> tuple[int, ...]:
    out = list(block)
    if role[0] == "broadcast":
        out[role[1]] = 1
    elif role[0] == "transpose":
        out[-1], out[-2] = out[-2], out[-1]
    elif role[0] == "reduced":
        out[-1] = 1
    return tuple(out)


# -- kernels -------------------------------------------------------------------------------


def _program_ids(program: Program) -> list[str]:
    order = _dims_in_grid_order(program)
    return [f"g{a} = pl.program_id({order.index(a)})" for a in range(len(program["grid"]))]


def _iota_lines(program: Program, used: set[int], shape: Sequence[int], offsets: Sequence[str]) -> list[str]:
    return [f"i{a} = {offsets[a]}lax.broadcasted_iota(jnp.int32, {tuple(shape)}, {a})" for a in sorted(used)]


def leaf_names(program: Program, rank: int) -> dict[str, Any]:
    """How the emitted code names each leaf kind (the same in kernel and reference)."""
    dtypes = [d for _, d, _ in program["inputs"]]
    return {"in": [f"v{k}" for k in range(len(dtypes))], "iota": [f"i{a}" for a in range(rank)], "smem": "sm",
            "dtypes": dtypes}


def _map_body(program: Program) -> list[str]:
    block, grid = program["block"], program["grid"]
    lines = _program_ids(program)
    used = set().union(*(uses(e, "iota") for _, _, e in program["outputs"]))
    lines += _iota_lines(program, used, block, [f"g{a} * {block[a]} + " for a in range(len(grid))])
    for k, (_, _, role) in enumerate(program["inputs"]):
        load = f"x{k}_ref[...]"
        lines.append(f"v{k} = jnp.swapaxes({load}, -1, -2)" if role[0] == "transpose" else f"v{k} = {load}")
    names = leaf_names(program, len(grid))
    for j, (_, dtype, expr) in enumerate(program["outputs"]):
        lines.append(f"o{j}_ref[...] = {out_source(expression_source(expr, names), dtype, block)}")
    return lines


def _reduce_body(program: Program) -> list[str]:
    op, axis, work, post = program["reduce"]
    block, (_, out_dtype, expr) = program["block"], program["outputs"][0]
    lines = [*_program_ids(program), "v0 = x0_ref[...]"]
    rank, mask = len(block), program.get("mask")
    used = uses(expr, "iota") | ({axis} if program["skeleton"] == "accumulate" or mask is not None else set())
    lines += _iota_lines(program, used, block, [f"g{a} * {block[a]} + " for a in range(rank)])
    value = reduced_value(program, expression_source(expr, leaf_names(program, rank)), block)
    post_src = _UNARY[post] if post else "{}"
    ident = identity_source(op, work)
    if program["skeleton"] == "reduce":
        value = value if mask is None else f"jnp.where(i{axis} < {mask}, {value}, {ident})"
        reduced = f"{_REDUCE[op]}({value}, axis={axis}, keepdims=True)"
        return [*lines, f"o0_ref[...] = lax.convert_element_type({post_src.format(reduced)}, jnp.{out_dtype})"]
    acc = "acc_ref" if program["acc"] == "scratch" else "o0_ref"
    last, size = rank - 1, program["shape"][-1]
    lines += [f"@pl.when(g{last} == 0)", "def _init():", f"    {acc}[...] = jnp.full({acc}.shape, {ident})",
              f"v = jnp.where(i{last} < {size if mask is None else mask}, {value}, {ident})",
              f"{acc}[...] = {_COMBINE[op].format(f'{acc}[...]', f'{_REDUCE[op]}(v, axis=-1, keepdims=True)')}"]
    if acc == "acc_ref" or post:
        lines += [f"@pl.when(g{last} == {program['grid'][-1] - 1})", "def _finalize():",
                  f"    o0_ref[...] = lax.convert_element_type({post_src.format(f'{acc}[...]')}, jnp.{out_dtype})"]
    return lines


def _matmul_body(program: Program) -> list[str]:
    k = program["inputs"][0][0][1]
    bm, bn, bk = program["block"]
    out_dtype = program["outputs"][0][1]
    return [
        "g2 = pl.program_id(2)", "@pl.when(g2 == 0)", "def _init():",
        f"    acc_ref[...] = jnp.zeros({(bm, bn)}, jnp.float32)",
        f"cols = g2 * {bk} + lax.broadcasted_iota(jnp.int32, {(bm, bk)}, 1)",
        f"rows = g2 * {bk} + lax.broadcasted_iota(jnp.int32, {(bk, bn)}, 0)",
        f"x = {exact_source('x0_ref[...]', *EXACT_DOT)}", f"y = {exact_source('x1_ref[...]', *EXACT_DOT)}",
        f"x = jnp.where(cols < {k}, x, jnp.zeros_like(x))", f"y = jnp.where(rows < {k}, y, jnp.zeros_like(y))",
        "acc_ref[...] += jnp.dot(x, y, preferred_element_type=jnp.float32)",
        f"@pl.when(g2 == {program['grid'][2] - 1})", "def _finalize():",
        f"    o0_ref[...] = acc_ref[...].astype(jnp.{out_dtype})",
    ]


def _loop_body(program: Program) -> list[str]:
    (bm, bn), step = program["block"], program["step_rows"]
    _, out_dtype, expr = program["outputs"][0]
    names = leaf_names(program, 2)
    used = uses(expr, "iota")
    lines = _program_ids(program) + (["s_ref[0] = g0 + 1"] if program["smem"] else [])
    inner = [f"rows = pl.ds(pl.multiple_of(t * {step}, {step}), {step})"]
    inner += _iota_lines(program, used, (step, bn), [f"g0 * {bm} + t * {step} + ", f"g1 * {bn} + "])
    inner += [f"v{k} = x{k}_ref[rows, :]" for k in range(len(program["inputs"]))]
    inner += ["sm = s_ref[0]"] if program["smem"] else []
    inner += [f"o0_ref[rows, :] = {out_source(expression_source(expr, names), out_dtype, (step, bn))}", "return carry"]
    return [*lines, "def step(t, carry):", *("    " + s for s in inner), f"lax.fori_loop(0, {bm // step}, step, 0)"]


def _dma_body(program: Program) -> list[str]:
    bm, n = program["block"]
    _, out_dtype, expr = program["outputs"][0]
    lines = ["g0 = pl.program_id(0)", f"copy = pltpu.make_async_copy(x0_ref.at[pl.ds(g0 * {bm}, {bm})], buf_ref, sem_ref)",
             "copy.start()", "copy.wait()", "v0 = buf_ref[...]"]
    lines += [f"v{k} = x{k}_ref[...]" for k in range(1, len(program["inputs"]))]
    lines += _iota_lines(program, uses(expr, "iota"), (bm, n), [f"g0 * {bm} + ", ""])
    names = leaf_names(program, 2)
    return [*lines, f"o0_ref[...] = {out_source(expression_source(expr, names), out_dtype, (bm, n))}"]


_BODIES = {"map": _map_body, "reduce": _reduce_body, "accumulate": _reduce_body, "matmul": _matmul_body,
           "loop": _loop_body, "dma": _dma_body}


def _specs(program: Program) -> tuple[list[str], list[str], list[str]]:
    """(in_specs, out_specs, scratch_shapes) sources."""
    skeleton, block = program["skeleton"], program["block"]
    if skeleton == "matmul":
        bm, bn, bk = block
        ins = [f"pl.BlockSpec({(bm, bk)}, lambda g0, g1, g2: (g0, g2))", f"pl.BlockSpec({(bk, bn)}, lambda g0, g1, g2: (g2, g1))"]
        return ins, [f"pl.BlockSpec({(bm, bn)}, lambda g0, g1, g2: (g0, g1))"], ["pltpu.VMEM(" + f"{(bm, bn)}, jnp.float32)"]
    ins = [_block_spec(program, role, _role_block(role, block)) for _, _, role in program["inputs"]]
    out_role = ("reduced",) if skeleton == "accumulate" else ("identity",)
    out_block = _role_block(out_role, block) if skeleton == "accumulate" else block
    if skeleton == "reduce":
        axis = program["reduce"][1]
        out_block = tuple(1 if a == axis else b for a, b in enumerate(block))
    outs = [_block_spec(program, out_role, out_block) for _ in program["outputs"]]
    scratch: list[str] = []
    if skeleton == "accumulate" and program["acc"] == "scratch":
        scratch.append(f"pltpu.VMEM({_role_block(('reduced',), block)}, jnp.{program['reduce'][2]})")
    elif skeleton == "loop" and program["smem"]:
        scratch.append("pltpu.SMEM((1,), jnp.int32)")
    elif skeleton == "dma":
        scratch += [f"pltpu.VMEM({tuple(block)}, jnp.{program['inputs'][0][1]})", "pltpu.SemaphoreType.DMA"]
    return ins, outs, scratch


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
    refs = [f"{a}_ref" for a in args] + [f"o{j}_ref" for j in range(len(program["outputs"]))] + _scratch_names(program)
    ins, outs, scratch = _specs(program)
    shapes = [f"jax.ShapeDtypeStruct({tuple(s)}, jnp.{d})" for s, d, _ in program["outputs"]]
    params = f"dimension_semantics={tuple(program['semantics'])!r}"
    if program.get("vmem_limit"):
        params += f", vmem_limit_bytes={program['vmem_limit']}"
    grid = tuple(program["grid"][a] for a in _dims_in_grid_order(program))  # the IR keeps array-dim order
    call = [f"        grid={grid},", _list_arg("in_specs", ins), _list_arg("out_specs", outs),
            _list_arg("out_shape", shapes)]
    if scratch:
        call.append(_list_arg("scratch_shapes", scratch))
    if program.get("alias"):
        call.append("        input_output_aliases={0: 0},")
    call.append(f"        compiler_params=pltpu.CompilerParams({params}),")
    body = ["    " + line for line in _BODIES[program["skeleton"]](program)]
    return "\n".join([f"def kernel({', '.join(args)}):", f"    def body({', '.join(refs)}):",
                      *("    " + line for line in body), "", "    outputs = pl.pallas_call(", "        body,", *call,
                      f"    )({', '.join(args)})", "    return tuple(outputs)", ""])


def _list_arg(name: str, items: list[str]) -> str:
    return f"        {name}=[\n" + "".join(f"            {item},\n" for item in items) + "        ],"
