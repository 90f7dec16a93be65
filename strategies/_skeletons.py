"""The skeletons of generated programs: how each draws its arrays, grid, index maps and body.

Each ``draw_*`` returns a program dict (see ``strategies.programs``); the fields common to
every skeleton are ``skeleton``, ``semantics``, ``vmem_limit``, ``shape``, ``block``,
``grid``, ``order`` (the array dims the grid axes walk, outermost first), ``inputs``
(shape, dtype, role), ``outputs`` (shape, dtype, expression) and ``table`` (None, or the
scalar-prefetch table ``(dim, entries)``: block ``entries[g]`` along ``dim`` is read at
step ``g`` by the inputs whose role is ``table``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from strategies._dtypes import as_dtype, preferred_sublane_tile
from strategies._expressions import (
    BOUNDARY_UNARY,
    INEXACT,
    UNARY,
    WORK_DTYPES,
    draw_condition,
    draw_expression,
    uses,
)
from strategies.blocks import tpu_block_shapes
from strategies.grids import cdiv_grid
from strategies.semantics import dimension_semantics
from strategies.tiled import tiled_configs

__all__ = ["PROGRAM_DTYPES", "REDUCTIONS", "draw_accumulate", "draw_dma", "draw_loop", "draw_map", "draw_matmul",
           "narrows", "work"]

PROGRAM_DTYPES = ("float32", "int32", "bfloat16", "int8", "float16", "float8_e4m3fn", "float8_e5m2")
REDUCTIONS = ("sum", "max", "min")
MASKS = ("none", "partial", "empty")
_VMEM_LIMITS = (None, 8 * 2**20)
_REPEATS = (2, 4)
Program = dict[str, Any]


def work(dtype: str) -> str:
    """The dtype arithmetic runs in for data of ``dtype``: int32 for integers, else float32."""
    return dtype if dtype in WORK_DTYPES else "int32" if dtype.startswith("int") else "float32"


def narrows(dtype: str) -> bool:
    """Whether an output of ``dtype`` rounds its float32 value (a boundary)."""
    return work(dtype) == "float32" and dtype != "float32"


def _tile_dtype(*names: str) -> str:
    """The dtype whose sublane tile every array of the program meets (the narrowest)."""
    tile = max(preferred_sublane_tile(as_dtype("programs", "dtype", n)) for n in names)
    return {8: "float32", 16: "bfloat16", 32: "int8"}[tile]


def _sublane_tile(*names: str) -> int:
    return preferred_sublane_tile(as_dtype("programs", "dtype", _tile_dtype(*names)))


#: One array's dtype: float32, int32 and bfloat16 about a quarter of the time each (most
#: arithmetic and rounding lives there), each narrower type about one time in fourteen.
DTYPE = st.sampled_from(PROGRAM_DTYPES[:3]) | st.sampled_from(PROGRAM_DTYPES)


def _dtypes(draw: st.DrawFn, low: int, high: int) -> list[str]:
    return draw(st.lists(DTYPE, min_size=low, max_size=high))


@st.composite
def _shapes(draw: st.DrawFn, rank: int) -> tuple[int, ...]:
    if rank == 1:
        return (draw(st.integers(1, 2500)),)
    lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
    return (*lead, draw(st.integers(1, 40)), draw(st.integers(1, 300)))


def _order(draw: st.DrawFn, outer: list[int], inner: list[int]) -> tuple[int, ...]:
    """Grid order: a permutation of ``outer`` then one of ``inner`` (shrinks to ascending)."""
    return tuple(draw(st.permutations(outer))) + tuple(draw(st.permutations(inner)))


def _ragged(shape: tuple[int, ...], block: tuple[int, ...], a: int) -> bool:
    return shape[a] % block[a] != 0


def _fill(draw: st.DrawFn, shape: tuple[int, ...], block: tuple[int, ...], a: int) -> int | None:
    """What an input read with another block's index reads past its end (None: it has no end)."""
    return draw(st.integers(-3, 3)) if _ragged(shape, block, a) else None


def _repeat_ok(a: int, rank: int, sub: int, tile: int) -> bool:
    """Whether a block of ``sub`` along dim ``a`` is legal for Mosaic (lanes, sublanes, leading)."""
    if a == rank - 1:
        return sub % 128 == 0
    return sub % tile == 0 if a == rank - 2 else sub >= 1


def _roles(draw: st.DrawFn, shape: tuple[int, ...], block: tuple[int, ...], grid: tuple[int, ...], tile: int,
           table: int | None) -> tuple:
    """One input's index-map role, legal next to a (shape, block) output."""
    rank = len(shape)
    roles: list[tuple] = [("identity",)]
    roles += [("broadcast", a) for a in range(rank)]
    if rank >= 2 and (block[-2] == shape[-2] or block[-2] % 128 == 0):
        roles.append(("transpose",))
    walked = [a for a in range(rank) if grid[a] >= 2]
    roles += [("reverse", a) for a in walked] + [("offset", a) for a in walked] + [("pin", a) for a in walked]
    roles += [("repeat", a, r) for a in range(rank) for r in _REPEATS
              if block[a] % r == 0 and _repeat_ok(a, rank, block[a] // r, tile) and not _ragged(shape, block, a)]
    if table is not None and draw(st.booleans()):  # a table drawn for the program is used more often than not
        return ("table", table, _fill(draw, shape, block, table))
    role = draw(st.sampled_from(roles))
    if role[0] == "offset":
        return ("offset", role[1], draw(st.integers(1, grid[role[1]] - 1)), _fill(draw, shape, block, role[1]))
    if role[0] in ("reverse", "table"):
        return (*role, _fill(draw, shape, block, role[1]))
    return role


def role_shape(role: tuple, shape: tuple[int, ...], block: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of an input array read with ``role`` next to an output of ``shape``."""
    out = list(shape)
    if role[0] == "broadcast":
        out[role[1]] = 1
    elif role[0] == "transpose":
        out[-1], out[-2] = out[-2], out[-1]
    elif role[0] == "pin":
        out[role[1]] = block[role[1]]
    elif role[0] == "repeat":
        a, r = role[1], role[2]
        out[a] = shape[a] // r
    return tuple(out)


def _table(draw: st.DrawFn, grid: tuple[int, ...], *, eager: bool = False) -> tuple[int, tuple[int, ...]] | None:
    """A scalar-prefetch table of blocks along a walked axis, or None (one time in two;
    ``eager``: whenever an axis is walked)."""
    walked = [a for a in range(len(grid)) if grid[a] >= 2]
    if not walked or not (eager or draw(st.booleans())):
        return None
    a = draw(st.sampled_from(walked))
    return (a, tuple(draw(st.lists(st.integers(0, grid[a] - 1), min_size=grid[a], max_size=grid[a]))))


def _masks(draw: st.DrawFn, count: int, cond: Callable[[], tuple], value: Callable[[], Any]) -> tuple:
    """Per array: None, or (a condition, a value) from the two draw functions."""
    return tuple((cond(), value()) if draw(st.booleans()) else None for _ in range(count))


def _masked_store_ok(tile: tuple[int, ...]) -> bool:
    """Whether a masked store over ``tile`` is judged right by TPU interpret mode (JAX
    0.12): it checks a masked store's bounds along the first axis for every axis, so a
    tile with a trailing dim shorter than its first raises a false "Out-of-bounds masked
    swap" (docs/upstream-findings.md)."""
    return all(n >= tile[0] for n in tile[1:])


def _load_masks(draw: st.DrawFn, count: int, positions: list[tuple]) -> tuple:
    """Masked loads with ``other``: the mask over positions only (no input is loaded yet)."""
    return _masks(draw, count, lambda: draw_condition(draw, inputs=(), leaves=positions),
                  lambda: draw(st.integers(-3, 3)))


def _overhang(draw: st.DrawFn, mask: tuple | None, block: tuple[int, ...]) -> tuple | None:
    """A masked load of a whole block, sometimes through a window shifted ``s`` rows (along
    the block's first dim) that overhangs the block's ref by ``s`` rows: ``(condition,
    other, s)``; the rows past the ref's (and the array's) end are masked off. Shrinks to
    no shift."""
    if mask is None or block[0] < 2:
        return mask
    shift = draw(st.integers(0, block[0] - 1))
    return (*mask, shift) if shift else mask


def _rolls(shape: tuple[int, ...], tile: tuple[int, ...]) -> list[tuple[int, int]]:
    """Dims (the last two) a tile-shaped value may be rolled along: whole tiles of >= 2 elements."""
    return [(a, tile[a]) for a in range(max(0, len(shape) - 2), len(shape)) if tile[a] >= 2 and shape[a] % tile[a] == 0]


def _common(draw: st.DrawFn, skeleton: str, order: tuple[int, ...], parallel_before: int) -> Program:
    semantics = draw(dimension_semantics(num_axes=len(order), reduction_axes=(parallel_before,)
                                         if parallel_before < len(order) else ()))
    return {"skeleton": skeleton, "semantics": semantics, "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS)),
            "order": order}


def draw_map(draw: st.DrawFn, budget: int, depth: int, masked_loads: bool, alias: bool | None = None) -> Program:
    """``map``; ``alias``: whether input aliasing is forced (None: drawn, about one time in four)."""
    rank = draw(st.integers(1, 3))
    in_dtypes, out_dtypes = _dtypes(draw, 1, 3), _dtypes(draw, 1, 2)
    # About one program in four aliases an input (any, read with the identity map; at least
    # one other input beside it) to output 0. TPU interpret mode (JAX 0.12) cannot alias an
    # array that is not a whole number of blocks (docs/upstream-findings.md): such a
    # program's array is cut to whole blocks.
    alias = draw(st.integers(0, 3)) == 3 if alias is None else alias
    in_dtypes += [draw(DTYPE)] if alias and len(in_dtypes) == 1 else []
    shape = draw(_shapes(rank))
    tile_dtype = _tile_dtype(*in_dtypes, *out_dtypes)
    block = draw(tpu_block_shapes(array_shape=shape, dtype=tile_dtype, max_grid_points=budget))
    if alias:
        shape = tuple(max(b, n // b * b) for n, b in zip(shape, block, strict=True))
    grid = cdiv_grid(shape, block)
    table = _table(draw, grid, eager=alias)
    tile = _sublane_tile(tile_dtype)
    roles = [_roles(draw, shape, block, grid, tile, None if table is None else table[0]) for _ in in_dtypes]
    aliased = draw(st.integers(0, len(in_dtypes) - 1)) if alias else 0  # its operand index follows the table's
    if alias:
        roles[aliased], in_dtypes[aliased] = ("identity",), out_dtypes[0]
        other = (aliased + 1) % len(roles)
        if table is not None and other != aliased and not any(r[0] == "table" for r in roles):
            roles[other] = ("table", table[0], _fill(draw, shape, block, table[0]))  # read after the aliased writes
    if table is not None and not any(r[0] == "table" for r in roles):
        table = None
    positions = [("iota", a) for a in range(rank)] + [("pid", a) for a in range(rank)]
    leaves = positions + ([("tbl", table[0])] if table else [])
    rolls = _rolls(shape, block)
    outputs = tuple((shape, d, draw_expression(draw, dtype=work(d), inputs=in_dtypes, leaves=leaves, max_depth=depth,
                                               exact=narrows(d), rolls=rolls)) for d in out_dtypes)
    masked = _masked_store_ok(block)
    stores = tuple(_masks(draw, 1, lambda: draw_condition(draw, inputs=in_dtypes, leaves=positions),
                          lambda d=d: draw_expression(draw, dtype=work(d), inputs=in_dtypes, leaves=leaves,
                                                      max_depth=1, exact=narrows(d)))[0] if masked else None
                   for d in out_dtypes)
    loads = _load_masks(draw, len(in_dtypes), positions) if masked_loads else (None,) * len(in_dtypes)
    loads = tuple(_overhang(draw, m, block) if r == ("identity",) else None for m, r in zip(loads, roles, strict=True))
    order = _order(draw, list(range(rank)), [])
    return {**_common(draw, "map", order, rank), "shape": shape, "block": block, "grid": grid, "table": table,
            "inputs": tuple((role_shape(r, shape, block), d, r) for r, d in zip(roles, in_dtypes, strict=True)),
            "outputs": outputs, "alias": alias, "alias_input": aliased, "store_masks": stores, "load_masks": loads}


def draw_accumulate(draw: st.DrawFn, skeleton: str, budget: int, depth: int) -> Program:
    """``reduce`` (one block deep, over one of the last two dims) or ``accumulate`` (over
    one to three dims, the innermost grid axes, across grid steps)."""
    rank = draw(st.integers(2, 3))
    in_dtype, out_dtype = draw(DTYPE), draw(DTYPE)
    wk = work(in_dtype)  # reduce in the input's own arithmetic (a float -> int32 cast of [-1, 1] is all zeros)
    shape = draw(_shapes(rank))
    if skeleton == "reduce":
        axes: tuple[int, ...] = (draw(st.sampled_from((rank - 1, rank - 2))),)
    else:
        axes = tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank))))
    block = list(draw(tpu_block_shapes(array_shape=shape, dtype=_tile_dtype(in_dtype, out_dtype),
                                       max_grid_points=budget)))
    if skeleton == "reduce":
        block[axes[0]] = shape[axes[0]]
    block = tuple(block)
    grid = cdiv_grid(shape, block)
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(shape))
    op = draw(st.sampled_from(REDUCTIONS))
    narrow = wk == "float32" and out_dtype != "float32"  # the cast of the result is a boundary
    post = draw(st.sampled_from((None, *(u for u in UNARY[wk] if not (narrow and u in INEXACT)))))
    exact = narrow or (op == "sum" and wk == "float32") or post in BOUNDARY_UNARY  # exact sums round: a boundary
    dtypes = [in_dtype]
    inputs = [(shape, in_dtype, ("identity",))]
    if skeleton == "accumulate" and draw(st.booleans()):  # a block kept across the reduction's steps
        kept = [a for a in axes if grid[a] >= 2]
        role = draw(st.sampled_from([("identity",), *(("pin", a) for a in kept), *(("broadcast", a) for a in axes)]))
        extra = draw(DTYPE)
        inputs.append((role_shape(role, shape, block), extra, role))
        dtypes.append(extra)
    leaves = [("iota", a) for a in range(rank)] + [("pid", a) for a in range(rank)]
    expr = draw_expression(draw, dtype=wk, inputs=dtypes, leaves=leaves, max_depth=depth, exact=exact)
    acc = draw(st.sampled_from(("scratch", "output"))) if out_dtype == wk else "scratch"
    outer = [a for a in range(rank) if a not in axes]
    order = _order(draw, outer, list(axes)) if skeleton == "accumulate" else _order(draw, list(range(rank)), [])
    return {**_common(draw, skeleton, order, len(outer) if skeleton == "accumulate" else rank), "shape": shape,
            "block": block, "grid": grid, "table": None, "inputs": tuple(inputs),
            "outputs": ((out_shape, out_dtype, expr),), "reduce": (op, axes, wk, post),
            "acc": acc if skeleton == "accumulate" else None,
            "mask": _valid_length(draw, op, shape[axes[-1]], wk, out_dtype)}


def _valid_length(draw: st.DrawFn, op: str, size: int, wk: str, out_dtype: str) -> int | None:
    """How many leading elements of each reduced row count (the rest is masked to the
    reduction's identity with ``jnp.where``, so the fill decides the result), or None.
    ``empty`` rows reduce to the identity itself: +-inf for a float max/min, so not where
    that would then be cast to an integer (XLA leaves the conversion of inf undefined)."""
    kinds = MASKS if op == "sum" or wk == "int32" or work(out_dtype) != "int32" else MASKS[:2]
    kind = draw(st.sampled_from(kinds))
    return None if kind == "none" else 0 if kind == "empty" else draw(st.integers(1, size))


def draw_matmul(draw: st.DrawFn, budget: int) -> Program:
    cfg = draw(tiled_configs(axes={"m": "sublane", "n": "lane", "k": "lane"}, reduction_axes=("k",),
                             dtypes=("float32", "bfloat16", "int8"), max_grid_points=budget))
    m, n, k, dtype = cfg["m"], cfg["n"], cfg["k"], cfg["dtype"]
    out_dtype = draw(st.sampled_from(("int32",) if dtype == "int8" else ("float32", dtype)))
    return {"skeleton": "matmul", "semantics": cfg["dimension_semantics"], "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS)),
            "order": (0, 1, 2), "shape": (m, n), "block": (cfg["block_m"], cfg["block_n"], cfg["block_k"]),
            "grid": cfg["grid"], "table": None, "inputs": (((m, k), dtype, ("lhs",)), ((k, n), dtype, ("rhs",))),
            "outputs": (((m, n), out_dtype, ("in", 0)),)}


def _rows(draw: st.DrawFn, ragged: bool, budget: int, dtypes: list[str]) -> dict[str, Any]:
    return draw(tiled_configs(axes={"rows": "sublane", "cols": "lane"}, dtypes=(_tile_dtype(*dtypes),),
                              max_block_tiles=4, ragged=ragged, max_grid_points=budget))


def draw_loop(draw: st.DrawFn, budget: int, depth: int, masked_loads: bool) -> Program:
    """``lax.fori_loop`` over the rows of a block: contiguous ``pl.ds`` steps of one tile,
    or every ``steps``-th row (``pl.ds(t, rows, stride=steps)``), stored in place or
    gathered into contiguous rows; optional SMEM scalar, masked stores and loads."""
    in_dtypes, out_dtype = _dtypes(draw, 1, 2), draw(DTYPE)
    cfg = _rows(draw, True, budget, [*in_dtypes, out_dtype])
    shape, block = (cfg["rows"], cfg["cols"]), (cfg["block_rows"], cfg["block_cols"])
    tile = _sublane_tile(*in_dtypes, out_dtype)
    steps = block[0] // tile
    strides = ["none"] + (["same"] if steps >= 2 else []) + (["gather"] if steps >= 2 and shape[0] % block[0] == 0 else [])
    stride = draw(st.sampled_from(strides))
    smem = draw(st.booleans())
    positions = [("iota", 0), ("iota", 1), ("pid", 0), ("pid", 1)]
    leaves = positions + ([("smem",)] if smem else [])
    chunk = (tile, block[1])
    rolls = [r for r in _rolls(shape, chunk) if r[0] == 1 or (stride == "none" and shape[0] % block[0] == 0)]
    expr = draw_expression(draw, dtype=work(out_dtype), inputs=in_dtypes, leaves=leaves, max_depth=depth,
                           exact=narrows(out_dtype), rolls=rolls)
    plain = stride == "none"
    stores = _masks(draw, 1, lambda: draw_condition(draw, inputs=in_dtypes, leaves=positions),
                    lambda: draw_expression(draw, dtype=work(out_dtype), inputs=in_dtypes, leaves=leaves, max_depth=1,
                                            exact=narrows(out_dtype))) if plain and _masked_store_ok(chunk) else (None,)
    loads = _load_masks(draw, len(in_dtypes), positions) if masked_loads and plain else (None,) * len(in_dtypes)
    return {"skeleton": "loop", "semantics": cfg["dimension_semantics"], "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS)),
            "order": (0, 1), "shape": shape, "block": block, "grid": cfg["grid"], "table": None,
            "inputs": tuple((shape, d, ("identity",)) for d in in_dtypes), "outputs": ((shape, out_dtype, expr),),
            "smem": smem, "step_rows": tile, "stride": stride, "store_masks": stores, "load_masks": loads}


def draw_dma(draw: st.DrawFn, budget: int, depth: int) -> Program:
    """A ``pl.ANY`` input copied block by block into VMEM scratch: in 1, 2 or 4 chunks
    whose DMAs share one semaphore or have one each, waited in order or in reverse, from
    a block chosen at run time (the step's own, reversed, offset, or a scalar-prefetch
    table's entry)."""
    # The HLO interpreter's compile of float8 copies in several chunks can take minutes
    # (JAX 0.12, docs/upstream-findings.md): the copied input is not float8.
    in_dtypes = [draw(DTYPE.filter(lambda d: "float8" not in d)), *_dtypes(draw, 0, 1)]
    out_dtype = draw(DTYPE)
    cfg = _rows(draw, False, budget, [*in_dtypes, out_dtype])
    shape, grid = (cfg["rows"], cfg["cols"]), (cfg["grid"][0],)
    block = (cfg["block_rows"], cfg["cols"])
    tile = _sublane_tile(*in_dtypes, out_dtype)
    feasible = st.sampled_from([c for c in (1, 2, 4) if block[0] % (c * tile) == 0])
    chunks = max(draw(feasible), draw(feasible))  # several DMAs more often than one (shrinks to one)
    sources: list[tuple] = [("identity",)] + ([("reverse",), ("offset", 1), ("table",)] if grid[0] >= 2 else [])
    source = draw(st.sampled_from(sources))
    table = (0, tuple(draw(st.lists(st.integers(0, grid[0] - 1), min_size=grid[0], max_size=grid[0])))) \
        if source == ("table",) else None
    leaves = [("iota", 0), ("iota", 1), ("pid", 0)] + ([("tbl", 0)] if table else [])
    expr = draw_expression(draw, dtype=work(out_dtype), inputs=in_dtypes, leaves=leaves, max_depth=depth,
                           exact=narrows(out_dtype))
    if 0 not in uses(expr, "in"):  # what the DMAs copied reaches the output
        copied = ("in", 0) if in_dtypes[0] == work(out_dtype) else ("cast", work(out_dtype), ("in", 0))
        expr = ("bin", "add", copied, expr)
    roles = [("any", source)] + [("identity",)] * (len(in_dtypes) - 1)
    return {"skeleton": "dma", "semantics": cfg["dimension_semantics"][:1], "vmem_limit": draw(st.sampled_from(_VMEM_LIMITS)),
            "order": (0,), "shape": shape, "block": block, "grid": grid, "table": table,
            "inputs": tuple((shape, d, r) for d, r in zip(in_dtypes, roles, strict=True)),
            "outputs": ((shape, out_dtype, expr),), "chunks": chunks,
            "semaphores": draw(st.sampled_from(("shared", "own", "shared"))),
            "wait": draw(st.sampled_from(("same", "reverse")))}
