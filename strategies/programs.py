"""Random Pallas programs for backend conformance: an intermediate form drawn from a grammar.

A program is a plain dict (``repr`` round-trips, JSON-able apart from tuples) that two
emitters turn into source text: a ``pl.pallas_call`` kernel and a pure-JAX reference on
whole arrays (``pallas_verify.campaigns.smith.emit``). Every program is valid by construction for
Mosaic TPU and both TPU-capable interpreters: block shapes come from
``tpu_block_shapes``/``tiled_configs``, grids are ``pl.cdiv`` grids (ragged edges are
masked wherever a reduction would read padding), parallel axes form a prefix, DMAs and
reversed/offset index maps read arrays that are whole multiples of their blocks.

Skeletons (SKELETONS), simplest first, each with element-wise expression trees
(``strategies._expressions``):

- ``map``: rank 1-3, 1-3 inputs each with an index map (identity, broadcast, transpose,
  reversal, offset modulo), 1-2 outputs, optional ``input_output_aliases``;
- ``reduce``: sum/max/min over one of the last two dims with keepdims, one block deep,
  optionally over a valid-length prefix of each row (``mask``: the rest is filled with the
  reduction's identity by ``jnp.where``; 0 makes every row empty);
- ``accumulate``: the same reduction across an "arbitrary" grid axis, ``pl.when``
  init/finalize, the accumulator in VMEM scratch or in the output block, masked edges;
- ``matmul``: ``jnp.dot(..., preferred_element_type=float32)`` accumulated over K;
- ``loop``: ``lax.fori_loop`` over sub-slices of the block, optional SMEM scratch;
- ``dma``: a ``pl.ANY`` input copied with ``make_async_copy`` start/wait into VMEM.

Inputs (``program_inputs``) come from ``input_values``: mixed, all-negative,
all-positive, large-offset or extreme-valued arrays, so identity- and fill-sensitive
reductions are exercised.

Shrinks toward the ``map`` skeleton, rank 1, one input, one whole-array block, float32,
the identity index map and an expression that is input 0 itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from strategies._expressions import (
    BOUNDARY_UNARY,
    INEXACT,
    UNARY,
    WORK_DTYPES,
    boundary_hazards,
    expression_productions,
    expressions,
)
from strategies.arrays import arrays
from strategies.blocks import tpu_block_shapes
from strategies.grids import cdiv_grid
from strategies.semantics import dimension_semantics
from strategies.tiled import tiled_configs

__all__ = ["PROGRAM_DTYPES", "REDUCTIONS", "SKELETONS", "VALUE_RANGES", "input_values", "pallas_programs",
           "program_hazards", "program_inputs", "program_productions"]

SKELETONS = ("map", "reduce", "accumulate", "matmul", "loop", "dma")
PROGRAM_DTYPES = ("float32", "int32", "bfloat16")
REDUCTIONS = ("sum", "max", "min")
VALUE_RANGES = ("mixed", "negative", "positive", "offset", "extreme")
MASKS = ("none", "partial", "empty")
_OFFSETS = {"int32": (1000, -1000, 2**20, -(2**20), 2**30, -(2**30)), "float32": (100.0, -100.0, 2.0**20, -(2.0**20)),
            "bfloat16": (100.0, -100.0, 2.0**20, -(2.0**20))}
_VMEM_LIMITS = (None, 8 * 2**20)
Program = dict[str, Any]


def _tile_dtype(*names: str) -> str:
    return "bfloat16" if "bfloat16" in names else "float32"


def _work(dtype: str) -> str:
    return dtype if dtype in WORK_DTYPES else "float32"


def _narrows(dtype: str) -> bool:
    """Whether an output of ``dtype`` rounds its float32 value (a boundary)."""
    return _work(dtype) == "float32" and dtype != "float32"


@st.composite
def _shapes(draw: st.DrawFn, rank: int) -> tuple[int, ...]:
    if rank == 1:
        return (draw(st.integers(1, 2500)),)
    lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
    return (*lead, draw(st.integers(1, 40)), draw(st.integers(1, 300)))


def _roles(rank: int, shape: tuple[int, ...], block: tuple[int, ...], grid: tuple[int, ...]) -> list[tuple]:
    """Index-map roles legal for an input read alongside a (shape, block) output."""
    roles: list[tuple] = [("identity",)]
    roles += [("broadcast", a) for a in range(rank)]
    if rank >= 2 and (block[-2] == shape[-2] or block[-2] % 128 == 0):
        roles.append(("transpose",))
    roles += [("reverse", a) for a in range(rank) if grid[a] >= 2]
    roles += [("offset", a, c) for a in range(rank) for c in range(1, grid[a])]
    return roles


def role_shape(role: tuple, shape: tuple[int, ...], block: tuple[int, ...], grid: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of an input array read with ``role`` next to an output of ``shape``."""
    out = list(shape)
    if role[0] == "broadcast":
        out[role[1]] = 1
    elif role[0] == "transpose":
        out[-1], out[-2] = out[-2], out[-1]
    elif role[0] in ("reverse", "offset"):
        out[role[1]] = grid[role[1]] * block[role[1]]
    return tuple(out)


def _common(draw: st.DrawFn, skeleton: str, rank: int) -> Program:
    semantics = draw(dimension_semantics(num_axes=rank, reduction_axes=(rank - 1,) if skeleton == "accumulate" else ()))
    return {"skeleton": skeleton, "semantics": semantics, "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS))}


def _map(draw: st.DrawFn, budget: int, depth: int) -> Program:
    rank = draw(st.integers(1, 3))
    in_dtypes = draw(st.lists(st.sampled_from(PROGRAM_DTYPES), min_size=1, max_size=3))
    out_dtypes = draw(st.lists(st.sampled_from(PROGRAM_DTYPES), min_size=1, max_size=2))
    shape = draw(_shapes(rank))
    block = draw(tpu_block_shapes(array_shape=shape, dtype=_tile_dtype(*in_dtypes, *out_dtypes), max_grid_points=budget))
    grid = cdiv_grid(shape, block)
    layout = draw(st.sampled_from(("row_major", "transposed"))) if rank > 1 else "row_major"
    roles = [draw(st.sampled_from(_roles(rank, shape, block, grid))) for _ in in_dtypes]
    iotas = [("iota", a) for a in range(rank)]
    outputs = tuple((shape, d, draw(expressions(dtype=_work(d), inputs=in_dtypes, leaves=iotas, max_depth=depth,
                                                exact=_narrows(d)))) for d in out_dtypes)
    # TPU interpret mode (JAX 0.12) cannot alias an array that is not a whole number of
    # blocks (docs/upstream-findings.md): aliases only where the blocks tile the array.
    exact = all(n % b == 0 for n, b in zip(shape, block, strict=True))
    alias = exact and roles[0] == ("identity",) and in_dtypes[0] == out_dtypes[0] and draw(st.booleans())
    return {**_common(draw, "map", rank), "shape": shape, "block": block, "grid": grid, "layout": layout,
            "inputs": tuple((role_shape(r, shape, block, grid), d, r) for r, d in zip(roles, in_dtypes, strict=True)),
            "outputs": outputs, "alias": alias}


def _reduction(draw: st.DrawFn, skeleton: str, budget: int, depth: int) -> Program:
    rank = draw(st.integers(2, 3))
    in_dtype, out_dtype = draw(st.sampled_from(PROGRAM_DTYPES)), draw(st.sampled_from(PROGRAM_DTYPES))
    work = _work(in_dtype)  # reduce in the input's own arithmetic (a float -> int32 cast of [-1, 1] is all zeros)
    shape = draw(_shapes(rank))
    axis = rank - 1 if skeleton == "accumulate" else draw(st.sampled_from((rank - 1, rank - 2)))
    block = list(draw(tpu_block_shapes(array_shape=shape, dtype=_tile_dtype(in_dtype, out_dtype), max_grid_points=budget)))
    if skeleton == "reduce":
        block[axis] = shape[axis]
    block = tuple(block)
    out_shape = tuple(1 if a == axis else n for a, n in enumerate(shape))
    op = draw(st.sampled_from(REDUCTIONS))
    narrows = work == "float32" and out_dtype != "float32"  # the cast of the result is a boundary
    post = draw(st.sampled_from((None, *(u for u in UNARY[work] if not (narrows and u in INEXACT)))))
    exact = narrows or (op == "sum" and work == "float32") or post in BOUNDARY_UNARY  # exact sums round: a boundary
    expr = draw(expressions(dtype=work, inputs=(in_dtype,), leaves=[("iota", a) for a in range(rank)], max_depth=depth,
                            exact=exact))
    acc = draw(st.sampled_from(("scratch", "output"))) if out_dtype == work else "scratch"
    return {**_common(draw, skeleton, rank), "shape": shape, "block": block, "grid": cdiv_grid(shape, block),
            "layout": "row_major", "inputs": ((shape, in_dtype, ("identity",)),),
            "outputs": ((out_shape, out_dtype, expr),), "reduce": (op, axis, work, post),
            "acc": acc if skeleton == "accumulate" else None, "mask": _valid_length(draw, op, shape[axis], work, out_dtype)}


def _valid_length(draw: st.DrawFn, op: str, size: int, work: str, out_dtype: str) -> int | None:
    """How many leading elements of each reduced row count (the rest is masked to the
    reduction's identity with ``jnp.where``, so the fill decides the result), or None.
    ``empty`` rows reduce to the identity itself: +-inf for a float max/min, so not where
    that would then be cast to int32 (XLA leaves the conversion of inf undefined)."""
    kinds = MASKS if op == "sum" or work == "int32" or out_dtype != "int32" else MASKS[:2]
    kind = draw(st.sampled_from(kinds))
    return None if kind == "none" else 0 if kind == "empty" else draw(st.integers(1, size))


def _matmul(draw: st.DrawFn, budget: int) -> Program:
    cfg = draw(tiled_configs(axes={"m": "sublane", "n": "lane", "k": "lane"}, reduction_axes=("k",),
                             dtypes=("float32", "bfloat16"), max_grid_points=budget))
    m, n, k, dtype = cfg["m"], cfg["n"], cfg["k"], cfg["dtype"]
    out_dtype = draw(st.sampled_from(("float32", dtype)))
    return {"skeleton": "matmul", "semantics": cfg["dimension_semantics"], "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS)),
            "shape": (m, n), "block": (cfg["block_m"], cfg["block_n"], cfg["block_k"]), "grid": cfg["grid"],
            "layout": "row_major", "inputs": (((m, k), dtype, ("lhs",)), ((k, n), dtype, ("rhs",))),
            "outputs": (((m, n), out_dtype, ("in", 0)),)}


def _rows(draw: st.DrawFn, skeleton: str, budget: int, dtypes: list[str]) -> dict[str, Any]:
    return draw(tiled_configs(axes={"rows": "sublane", "cols": "lane"}, dtypes=(_tile_dtype(*dtypes),),
                              max_block_tiles=3, ragged=skeleton == "loop", max_grid_points=budget))


def _loop(draw: st.DrawFn, skeleton: str, budget: int, depth: int) -> Program:
    in_dtypes = draw(st.lists(st.sampled_from(PROGRAM_DTYPES), min_size=1, max_size=2))
    out_dtype = draw(st.sampled_from(PROGRAM_DTYPES))
    cfg = _rows(draw, skeleton, budget, [*in_dtypes, out_dtype])
    shape = (cfg["rows"], cfg["cols"])
    if skeleton == "dma":  # the block spans whole rows; the grid walks rows only
        block, grid, semantics = (cfg["block_rows"], cfg["cols"]), (cfg["grid"][0],), cfg["dimension_semantics"][:1]
    else:
        block, grid, semantics = (cfg["block_rows"], cfg["block_cols"]), cfg["grid"], cfg["dimension_semantics"]
    smem = skeleton == "loop" and draw(st.booleans())
    leaves = [("iota", 0), ("iota", 1)] + ([("smem",)] if smem else [])
    expr = draw(expressions(dtype=_work(out_dtype), inputs=in_dtypes, leaves=leaves, max_depth=depth,
                            exact=_narrows(out_dtype)))
    first = ("any",) if skeleton == "dma" else ("identity",)
    roles = [first] + [("identity",)] * (len(in_dtypes) - 1)
    tile = 16 if _tile_dtype(*in_dtypes, out_dtype) == "bfloat16" else 8
    return {"skeleton": skeleton, "semantics": semantics, "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS)),
            "shape": shape, "block": block, "grid": grid, "layout": "row_major",
            "inputs": tuple((shape, d, r) for d, r in zip(in_dtypes, roles, strict=True)),
            "outputs": ((shape, out_dtype, expr),), "smem": smem, "step_rows": tile}


def pallas_programs(*, skeletons: tuple[str, ...] = SKELETONS, max_grid_points: int = 8,
                    max_depth: int = 3, masked_loads: bool = False) -> st.SearchStrategy[Program]:
    """Programs (dicts, see the module docstring) of the given ``skeletons``, valid by
    construction for Mosaic TPU and the TPU-capable interpreters, with at most
    ``max_grid_points`` grid points (TPU interpret mode costs about 10 ms each) and
    expressions at most ``max_depth`` deep. Shrinks toward the first skeleton, one block,
    float32 and the identity expression."""
    unknown = [s for s in skeletons if s not in SKELETONS]
    if unknown or not skeletons:
        from strategies.errors import InvalidStrategyValue

        raise InvalidStrategyValue(f"pallas_programs(skeletons={skeletons!r}): choose a non-empty tuple from {SKELETONS}.")

    @st.composite
    def draw_program(draw: st.DrawFn) -> Program:
        skeleton = draw(st.sampled_from(skeletons))
        if skeleton == "map":
            return _map(draw, max_grid_points, max_depth)
        if skeleton in ("reduce", "accumulate"):
            return _reduction(draw, skeleton, max_grid_points, max_depth)
        if skeleton == "matmul":
            return _matmul(draw, max_grid_points)
        return _loop(draw, skeleton, max_grid_points, max_depth)

    return draw_program()


def program_inputs(program: Program) -> st.SearchStrategy[tuple[Any, ...]]:
    """Input arrays for ``program``, each from its own ``input_values`` range."""
    return st.tuples(*(input_values(shape=shape, dtype=dtype) for shape, dtype, _ in program["inputs"]))


def input_values(*, shape: tuple[int, ...], dtype: str) -> st.SearchStrategy[Any]:
    """Arrays of ``shape`` and ``dtype`` from one of VALUE_RANGES, shrinking toward ``mixed``:

    - ``mixed``: ``arrays`` (small values of both signs, a few edge values);
    - ``negative`` / ``positive``: every value < 0 / > 0 (``1 + |mixed|``, edge values
      included), so a max or min of any row depends on the reduction's identity;
    - ``offset``: mixed values plus a large constant (ints up to 2**30, floats 2**20;
      int32 values clipped to the type);
    - ``extreme``: ``arrays`` whose edge values include the largest finite values.
    """

    @st.composite
    def draw_values(draw: st.DrawFn) -> Any:
        kind = draw(st.sampled_from(VALUE_RANGES))
        base = draw(arrays(shape=shape, dtype=dtype, allow_extremes=kind == "extreme", max_edge_values=4))
        if kind in ("mixed", "extreme"):
            return base
        wide = base.astype(np.float64 if dtype != "int32" else np.int64)
        if kind == "offset":
            wide = wide + draw(st.sampled_from(_OFFSETS[dtype]))
        else:
            wide = np.abs(wide) + 1
            wide = -wide if kind == "negative" else wide
        if dtype == "int32":  # the int32 edge values stay inside the type, keeping their sign
            wide = np.clip(wide, np.iinfo(np.int32).min, np.iinfo(np.int32).max)
        return wide.astype(base.dtype)

    return draw_values()


def program_productions(program: Program) -> list[str]:
    """The grammar productions ``program`` uses: skeleton, rank, index maps, operators,
    casts, reductions, scratch, ragged edges, semantics... (the coverage histogram)."""
    shape, block = program["shape"], program["block"]
    dtypes = [d for _, d, _ in program["inputs"]]
    out = [f"skeleton:{program['skeleton']}", f"rank:{len(shape)}", f"grid_rank:{len(program['grid'])}",
           f"layout:{program['layout']}", *(f"semantics:{s}" for s in sorted(set(program["semantics"])))]
    out += [f"index_map:{role[0]}" for _, _, role in program["inputs"]]
    out += [f"dtype:{d}" for d in sorted({*dtypes, *(d for _, d, _ in program["outputs"])})]
    if any(n % b for n, b in zip(shape, block, strict=False)):
        out.append("ragged")
    if len(program["outputs"]) > 1:
        out.append("outputs:several")
    if program.get("alias"):
        out.append("input_output_aliases")
    if program.get("vmem_limit"):
        out.append("vmem_limit_bytes")
    out += _skeleton_productions(program)
    for _, _, expr in program["outputs"]:
        out += expression_productions(expr, dtypes)
    return out


def _skeleton_productions(program: Program) -> list[str]:
    skeleton = program["skeleton"]
    if skeleton in ("reduce", "accumulate"):
        op, _, work, post = program["reduce"]
        out = [f"reduce:{op}:{work}:keepdims", "mask"] if skeleton == "accumulate" else [f"reduce:{op}:{work}:keepdims"]
        out += [f"post:{post}"] if post else []
        mask = program.get("mask")
        out += [] if mask is None else ["mask:empty_row" if mask == 0 else "mask:valid_length"]
        if skeleton == "accumulate":
            out += ["pl.when", f"accumulator:{program['acc']}"] + (["scratch:vmem"] if program["acc"] == "scratch" else [])
        return out
    if skeleton == "matmul":
        return ["dot:preferred_element_type", "pl.when", "scratch:vmem", "mask"]
    if skeleton == "loop":
        return ["fori_loop", "pl.ds"] + (["scratch:smem"] if program["smem"] else [])
    if skeleton == "dma":
        return ["memory_space:ANY", "make_async_copy", "scratch:vmem", "scratch:dma_semaphore"]
    return []


def program_hazards(program: Program) -> list[str]:
    """Where an inexact value reaches a boundary in ``program`` (``strategies._expressions``):
    then a correct backend may differ from the reference by a whole integer or output step,
    so the program's exact outputs would report noise. Empty for every drawn program."""
    dtypes = [d for _, d, _ in program["inputs"]]
    out = []
    for j, (_, dtype, expr) in enumerate(program["outputs"]):
        exact = _narrows(dtype)
        if program["skeleton"] in ("reduce", "accumulate"):
            op, _, work, post = program["reduce"]
            narrows = work == "float32" and dtype != "float32"
            if narrows and post in INEXACT:
                out.append(f"output {j}: post-op {post} feeds the cast to {dtype}")
            exact = narrows or (op == "sum" and work == "float32") or post in BOUNDARY_UNARY
        out += [f"output {j}: {h}" for h in boundary_hazards(expr, dtypes, exact=exact)]
    return out
