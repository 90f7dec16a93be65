"""Random Pallas programs for backend conformance: an intermediate form drawn from a grammar.

A program is a plain dict (``repr`` round-trips, JSON-able apart from tuples) that two
emitters turn into source text: a ``pl.pallas_call`` kernel and a pure-JAX reference on
whole arrays (``pallas_verify.campaigns.smith.emit``). Every program is valid by
construction for Mosaic TPU and both TPU-capable interpreters: block shapes come from
``tpu_block_shapes``/``tiled_configs``, grids are ``pl.cdiv`` grids (wherever a program
reads padding or another block past an array's ragged end, it masks it), parallel axes
form a prefix, an output block is only revisited on consecutive steps.

Skeletons (SKELETONS, simplest first; ``strategies._skeletons``), each with element-wise
expression trees (``strategies._expressions``: int and float arithmetic, integer division
and remainder of both signs, comparisons, casts, bitcasts, ``pltpu.roll``):

- ``map``: rank 1-3, grids walking the dims in any order, 1-3 inputs each with an index
  map (identity, broadcast, transpose, reversal or offset of the block order, a block
  kept across a grid axis, ``jnp.tile`` of a smaller block, a scalar-prefetch table of
  blocks: the last three also on ragged axes, masked past the array's end), 1-2 outputs,
  masked stores (``pltpu.store(..., mask=)`` over the block), masked loads with ``other``
  (``masked_loads``: TPU interpret mode cannot run them), sometimes through a ``pl.ds``
  window that overhangs the block's ref (masked past its end), ``input_output_aliases``
  (of any input read with the identity map, its operand index after the scalar-prefetch
  table's);
- ``reduce``: sum/max/min over one of the last two dims with keepdims, one block deep,
  optionally over a valid-length prefix of each row (``mask``: the rest is filled with the
  reduction's identity by ``jnp.where``; 0 makes every row empty);
- ``accumulate``: the same reduction over 1-3 dims across the innermost grid steps (the
  rest of the grid in any order), ``pl.when`` init/finalize, the accumulator in VMEM
  scratch or in the (revisited) output block, masked ragged edges, optionally a second
  input whose block is kept across the reduction's steps;
- ``matmul``: ``jnp.dot(..., preferred_element_type=float32 / int32)`` accumulated over K;
- ``loop``: ``lax.fori_loop`` over the rows of a block: contiguous ``pl.ds`` steps or
  strided ones (``stride=``), stored in place or gathered; SMEM scratch, masks;
- ``dma``: a ``pl.ANY`` input copied with ``make_async_copy`` into VMEM in chunks that
  share a DMA semaphore or not, from a block chosen at run time.

Data: float32, int32, bfloat16, int8, float16 and both float8 formats, from
``input_values`` (mixed, all-negative, all-positive, large-offset or extreme arrays, so
identity- and fill-sensitive reductions are exercised).

Shrinks toward the ``map`` skeleton, rank 1, one input, one whole-array block, float32,
the identity index map and an expression that is input 0 itself.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from strategies._expressions import (
    BOUNDARY_UNARY,
    INEXACT,
    boundary_hazards,
    expression_productions,
)
from strategies._skeletons import (
    PROGRAM_DTYPES,
    REDUCTIONS,
    draw_accumulate,
    draw_dma,
    draw_loop,
    draw_map,
    draw_matmul,
    narrows,
    role_shape,
)
from strategies.arrays import arrays

__all__ = ["PROGRAM_DTYPES", "REDUCTIONS", "SKELETONS", "VALUE_RANGES", "batched_shape", "input_values", "pallas_programs",
           "program_hazards", "program_inputs", "program_productions", "program_vmaps", "role_shape"]

SKELETONS = ("map", "reduce", "accumulate", "matmul", "loop", "dma")
#: How often each skeleton is drawn, relative to the others: the ones with the most surface
#: (index maps, masks, tables; state across steps; strided slices; DMAs) more often.
#: ``ALIASED``: ``map`` programs that alias an input to their output (state across grid steps
#: through the alias, the operand index after a scalar-prefetch table), drawn on their own too.
ALIASED = "map:aliased"
_WEIGHTS = {"map": 3, "reduce": 1, "accumulate": 2, "matmul": 1, "loop": 2, "dma": 2, ALIASED: 2}
VALUE_RANGES = ("mixed", "negative", "positive", "offset", "extreme")
_OFFSETS = {"int32": (1000, -1000, 2**20, -(2**20), 2**30, -(2**30)), "int8": (50, -50, 100, -100),
            "float16": (100.0, -100.0, 2.0**10, -(2.0**10)), "float8_e4m3fn": (16.0, -16.0, 128.0, -128.0),
            "float8_e5m2": (16.0, -16.0, 2.0**10, -(2.0**10))}
Program = dict[str, Any]


def pallas_programs(*, skeletons: tuple[str, ...] = SKELETONS, max_grid_points: int = 8,
                    max_depth: int = 3, masked_loads: bool = False, vmap: bool = True) -> st.SearchStrategy[Program]:
    """Programs (dicts, see the module docstring) of the given ``skeletons``, valid by
    construction for Mosaic TPU and the TPU-capable interpreters, with at most
    ``max_grid_points`` grid points (TPU interpret mode costs about 10 ms each) and
    expressions at most ``max_depth`` deep. ``masked_loads``: also draw ``pltpu.load``
    with a mask (TPU interpret mode, JAX 0.12, cannot run it). ``vmap``: sometimes run
    the whole program under ``jax.vmap`` (``program["vmap"]``; not ``dma``). Shrinks toward
    the first skeleton, one block, float32, the identity expression and no vmap."""
    unknown = [s for s in skeletons if s not in SKELETONS]
    if unknown or not skeletons:
        from strategies.errors import InvalidStrategyValue

        raise InvalidStrategyValue(f"pallas_programs(skeletons={skeletons!r}): choose a non-empty tuple from {SKELETONS}.")

    weighted = tuple(s for s in SKELETONS for _ in range(_WEIGHTS[s]) if s in skeletons)
    weighted += (ALIASED,) * _WEIGHTS[ALIASED] if "map" in skeletons else ()

    @st.composite
    def draw_skeleton(draw: st.DrawFn) -> Program:
        skeleton = draw(st.sampled_from(weighted))
        if skeleton in ("map", ALIASED):
            return draw_map(draw, max_grid_points, max_depth, masked_loads, alias=True if skeleton == ALIASED else None)
        if skeleton in ("reduce", "accumulate"):
            return draw_accumulate(draw, skeleton, max_grid_points, max_depth)
        if skeleton == "matmul":
            return draw_matmul(draw, max_grid_points)
        if skeleton == "loop":
            return draw_loop(draw, max_grid_points, max_depth, masked_loads)
        return draw_dma(draw, max_grid_points, max_depth)

    @st.composite
    def draw_program(draw: st.DrawFn) -> Program:
        program = draw(draw_skeleton())
        return {**program, "vmap": draw(program_vmaps(program)) if vmap and program["skeleton"] != "dma" else None}

    return draw_program()


def program_vmaps(program: Program) -> st.SearchStrategy[tuple | None]:
    """None (about two times in three), or ``jax.vmap`` of the whole program (kernel and
    reference alike): ``(batch, in_axes, out_axis)``, each input batched along a drawn
    axis or not at all (at least one is batched), every output along ``out_axis``. An
    input's batch axis lies before its last two dims (the batching rule puts a squeezed
    block dim there, which Mosaic TPU tiles only in front of the (8, 128) tile): a rank-1
    input is not batched, and a program whose inputs are all rank 1 is not vmapped.
    Shrinks toward None, then toward axis 0 everywhere."""
    return _draw_vmap(program)


# The composites a program's draw builds a strategy from are defined once, here: defining
# one (st.composite) parses its source, which per drawn program cost more than the draw.
@st.composite
def _draw_vmap(draw: st.DrawFn, program: Program) -> tuple | None:
    ranks = [len(shape) for shape, _, _ in program["inputs"]]
    if draw(st.integers(0, 2)) < 2 or max(ranks) < 2:
        return None
    axes = [draw(st.integers(0, rank - 2) | st.none()) if rank >= 2 else None for rank in ranks]
    if all(a is None for a in axes):
        axes[ranks.index(max(ranks))] = 0
    out_axis = draw(st.integers(0, len(program["outputs"][0][0])))
    return (draw(st.integers(2, 3)), tuple(axes), out_axis)


def batched_shape(shape: tuple[int, ...], vmap: tuple | None, k: int) -> tuple[int, ...]:
    """The shape of input ``k`` (``shape`` per example) under the program's ``vmap``."""
    if vmap is None or vmap[1][k] is None:
        return tuple(shape)
    batch, axes, _ = vmap
    return (*shape[:axes[k]], batch, *shape[axes[k]:])


def program_inputs(program: Program) -> st.SearchStrategy[tuple[Any, ...]]:
    """Input arrays for ``program``, each from its own ``input_values`` range (batched
    along its axis under the program's ``vmap``)."""
    vmap = program.get("vmap")
    return st.tuples(*(input_values(shape=batched_shape(shape, vmap, k), dtype=dtype)
                       for k, (shape, dtype, _) in enumerate(program["inputs"])))


def _limits(dtype: str) -> tuple[float, float]:
    info = np.iinfo(dtype) if dtype.startswith("int") else ml_dtypes.finfo(dtype) if "8" in dtype or "bfloat" in dtype \
        else np.finfo(dtype)
    return float(info.min), float(info.max)


def input_values(*, shape: tuple[int, ...], dtype: str) -> st.SearchStrategy[Any]:
    """Arrays of ``shape`` and ``dtype`` from one of VALUE_RANGES, shrinking toward ``mixed``:

    - ``mixed``: ``arrays`` (small values of both signs, a few edge values);
    - ``negative`` / ``positive``: every value < 0 / > 0 (``1 + |mixed|``, edge values
      included), so a max or min of any row depends on the reduction's identity;
    - ``offset``: mixed values plus a large constant (int32 up to 2**30, float32 2**20,
      narrower types less); values are clipped to the type's finite range;
    - ``extreme``: ``arrays`` whose edge values include the largest finite values.
    """
    return _draw_values(shape, dtype)


@st.composite
def _draw_values(draw: st.DrawFn, shape: tuple[int, ...], dtype: str) -> Any:
    kind = draw(st.sampled_from(VALUE_RANGES))
    base = draw(arrays(shape=shape, dtype=dtype, allow_extremes=kind == "extreme", max_edge_values=4))
    if kind in ("mixed", "extreme"):
        return base
    integer = dtype.startswith("int")
    wide = base.astype(np.int64 if integer else np.float64)
    if kind == "offset":
        wide = wide + draw(st.sampled_from(_OFFSETS.get(dtype, (100.0, -100.0, 2.0**20, -(2.0**20)))))
    else:
        wide = np.abs(wide) + 1
        wide = -wide if kind == "negative" else wide
    low, high = _limits(dtype)  # the edge values stay inside the type, keeping their sign
    finite = np.isfinite(wide) if not integer else np.ones(wide.shape, bool)
    wide = np.where(finite, np.clip(wide, low, high), wide)
    return wide.astype(base.dtype)


def program_productions(program: Program) -> list[str]:
    """The grammar productions ``program`` uses: skeleton, rank, index maps, operators,
    casts, reductions, scratch, masks, DMAs, ragged edges, semantics... (the coverage histogram)."""
    shape, block = program["shape"], program["block"]
    dtypes = [d for _, d, _ in program["inputs"]]
    order = tuple(program["order"])
    out = [f"skeleton:{program['skeleton']}", f"rank:{len(shape)}", f"grid_rank:{len(program['grid'])}",
           f"grid_order:{'row_major' if order == tuple(sorted(order)) else 'permuted'}",
           *(f"semantics:{s}" for s in sorted(set(program["semantics"])))]
    out += [f"index_map:{role[0]}" + (":ragged" if role[-1] is not None and role[0] in ("reverse", "offset", "table")
                                      else "") for _, _, role in program["inputs"]]
    out += [f"dtype:{d}" for d in sorted({*dtypes, *(d for _, d, _ in program["outputs"])})]
    if any(n % b for n, b in zip(shape, block, strict=False)):
        out.append("ragged")
    for flag, name in (("alias", "input_output_aliases"), ("vmem_limit", "vmem_limit_bytes"),
                       ("table", "scalar_prefetch")):
        out += [name] if program.get(flag) else []
    if program.get("alias"):
        out += [f"input_output_aliases:input_{program.get('alias_input', 0)}"]
        out += ["input_output_aliases:after_scalar_prefetch"] if program.get("table") else []
    out += _vmap_productions(program)
    out += ["outputs:several"] if len(program["outputs"]) > 1 else []
    out += ["masked_store"] * any(program.get("store_masks") or ()) + ["masked_load"] * any(program.get("load_masks") or ())
    out += ["masked_load:overhanging_window"] * any(m is not None and len(m) > 2 and m[2]
                                                    for m in program.get("load_masks") or ())
    out += _skeleton_productions(program)
    for _, _, expr in program["outputs"]:
        out += expression_productions(expr, dtypes)
    return out


def _vmap_productions(program: Program) -> list[str]:
    vmap = program.get("vmap")
    if vmap is None:
        return []
    _, axes, out_axis = vmap
    out = ["vmap", f"vmap:out_axis:{out_axis}", *sorted({f"vmap:in_axis:{a}" for a in axes})]
    out += ["vmap:unbatched_input"] if None in axes else []
    if program.get("alias"):
        aliased = axes[program.get("alias_input", 0)]
        out.append("vmap:aliased:" + ("unbatched" if aliased is None else "axis_0" if aliased == 0 else "other_axis"))
    return out


def _skeleton_productions(program: Program) -> list[str]:
    skeleton = program["skeleton"]
    if skeleton in ("reduce", "accumulate"):
        op, axes, wk, post = program["reduce"]
        out = [f"reduce:{op}:{wk}:keepdims", f"reduce_dims:{len(axes)}"] + ([f"post:{post}"] if post else [])
        mask = program.get("mask")
        out += [] if mask is None else ["mask:empty_row" if mask == 0 else "mask:valid_length"]
        if skeleton == "accumulate":
            out += ["pl.when", f"accumulator:{program['acc']}", "revisited_output"]
            out += ["scratch:vmem"] if program["acc"] == "scratch" else []
        return out
    if skeleton == "matmul":
        return ["dot:preferred_element_type", "pl.when", "scratch:vmem", "mask"]
    if skeleton == "loop":
        return ["fori_loop", "pl.ds"] + ([f"pl.ds:stride:{program['stride']}"] if program["stride"] != "none" else []) \
            + (["scratch:smem"] if program["smem"] else [])
    if skeleton == "dma":
        source = program["inputs"][0][2][1][0]
        return ["memory_space:ANY", "make_async_copy", "scratch:vmem", "scratch:dma_semaphore", f"dma:from:{source}",
                f"dma:chunks:{program['chunks']}:{program['semaphores']}:{program['wait']}_wait"]
    return []


def program_hazards(program: Program) -> list[str]:
    """Where an inexact value reaches a boundary in ``program`` (``strategies._expressions``):
    then a correct backend may differ from the reference by a whole integer or output step,
    so the program's exact outputs would report noise. Empty for every drawn program."""
    dtypes = [d for _, d, _ in program["inputs"]]
    out = []
    masks = program.get("store_masks") or (None,) * len(program["outputs"])
    for j, ((_, dtype, expr), mask) in enumerate(zip(program["outputs"], masks, strict=True)):
        exact = narrows(dtype)
        if program["skeleton"] in ("reduce", "accumulate"):
            op, _, wk, post = program["reduce"]
            narrow = wk == "float32" and dtype != "float32"
            if narrow and post in INEXACT:
                out.append(f"output {j}: post-op {post} feeds the cast to {dtype}")
            exact = narrow or (op == "sum" and wk == "float32") or post in BOUNDARY_UNARY
        out += [f"output {j}: {h}" for h in boundary_hazards(expr, dtypes, exact=exact)]
        if mask is not None:
            cond, base = mask
            out += [f"output {j} mask: {h}" for e in cond[1:] for h in boundary_hazards(e, dtypes, exact=True)]
            out += [f"output {j} base: {h}" for h in boundary_hazards(base, dtypes, exact=exact)]
    return out
