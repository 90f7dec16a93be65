"""A static finding drawn: the kernel's grid with the grid points the finding names marked,
and the operand's blocks with the block it names marked (beyond the array's blocks for an
out-of-bounds index); inline SVG for the HTML page and PNG beside the reproducer (encoded
by ``reports.picture``).

A grid or a block array of more than two dimensions is drawn as ``reports.picture`` draws
an output: its leading dimensions as rows, the last as columns. A side of more than
``MAX_SIDE`` cells is pooled: a cell then stands for several grid points or blocks and is
marked when any of them is. What the evidence needs (``oracles.static``): ``grid``, and
``grid_points`` or ``block`` with ``block_counts``; a finding without them is not drawn.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pallas_verify.reports.picture import encode_png

__all__ = ["MAX_SIDE", "GridPicture", "Panel", "grid_caption", "grid_picture", "grid_png", "grid_svg"]

#: The most cells a panel draws per side (more are pooled).
MAX_SIDE = 48
_OUTSIDE, _INSIDE, _MARKED = 0, 1, 2
_COLORS = {_OUTSIDE: (255, 255, 255), _INSIDE: (216, 222, 228), _MARKED: (207, 34, 46)}
_FAR = 2  # an out-of-bounds block is drawn at most this many times the array's extent away
_MAX_CELLS = 1 << 22  # a grid or block array of more indices is not drawn
_PNG_OUTSIDE = (246, 248, 250)


@dataclasses.dataclass(frozen=True)
class Panel:
    """One side of the picture.

    Attributes:
      title: what it shows, in a line.
      codes: per cell (rows x columns, after pooling) outside the array, inside, or marked.
      pool: grid points or blocks per cell (rows, columns).
      marks: per marked cell (row, column) what it stands for, for hover text.
    """

    title: str
    codes: np.ndarray
    pool: tuple[int, int]
    marks: Mapping[tuple[int, int], str]


@dataclasses.dataclass(frozen=True)
class GridPicture:
    """A static finding's grid and blocks, ready to draw (``grid_picture``)."""

    grid: tuple[int, ...]
    operand: str
    points: tuple[tuple[int, ...], ...]
    block: tuple[int, ...] | None
    block_counts: tuple[int, ...] | None
    panels: tuple[Panel, ...]

    @property
    def outside(self) -> bool:
        """Whether its block lies outside the operand's blocks."""
        return self.block is not None and self.block_counts is not None and any(
            not 0 <= b < c for b, c in zip(self.block, self.block_counts, strict=True))


def _ints(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return tuple(value)


def _view(extent: Sequence[tuple[int, int]], size: Sequence[int], marked: Mapping[tuple[int, ...], str],
          title: str) -> Panel | None:
    """A panel of the index box ``extent`` (per dimension [lo, hi)); an index inside
    [0, size) is inside; ``marked`` indices (clipped into the box) with their hover text.
    None for a box of more than ``_MAX_CELLS`` indices."""
    spans = [b - a for a, b in extent]
    if math.prod(spans) > _MAX_CELLS:
        return None
    inside = np.ones((), bool)
    for (a, b), n in zip(extent, size, strict=True):
        inside = np.logical_and.outer(inside, (np.arange(a, b) >= 0) & (np.arange(a, b) < n))
    cols = spans[-1]
    rows = math.prod(spans[:-1])
    codes = np.where(inside, _INSIDE, _OUTSIDE).reshape(rows, cols)
    fy, fx = (max(1, math.ceil(n / MAX_SIDE)) for n in (rows, cols))
    pooled = np.full((math.ceil(rows / fy) * fy, math.ceil(cols / fx) * fx), _OUTSIDE)
    pooled[:rows, :cols] = codes
    pooled = pooled.reshape(pooled.shape[0] // fy, fy, pooled.shape[1] // fx, fx).max(axis=(1, 3))
    marks: dict[tuple[int, int], str] = {}
    for index, text in marked.items():
        at = [min(max(i, a), b - 1) - a for i, (a, b) in zip(index, extent, strict=True)]
        row = int(np.ravel_multi_index(at[:-1], spans[:-1])) if len(at) > 1 else 0
        cell = (row // fy, at[-1] // fx)
        pooled[cell] = _MARKED
        marks[cell] = f"{marks[cell]}; {text}" if cell in marks else text
    return Panel(title=title, codes=pooled, pool=(fy, fx), marks=marks)


def _axes(grid: tuple[int, ...], semantics: tuple[str, ...]) -> str:
    names = "ijklmnpqrs"
    return ", ".join(f"{names[d] if d < len(names) else f'g{d}'} {semantics[d] if d < len(semantics) else ''}".strip()
                     for d in range(len(grid)))


def grid_picture(evidence: Mapping[str, Any]) -> GridPicture | None:
    """The picture of a static finding's ``evidence``; None when it says too little."""
    grid = _ints(evidence.get("grid"))
    if not grid or any(g <= 0 for g in grid):
        return None
    semantics = tuple(str(s) for s in evidence.get("semantics") or ())
    raw = evidence.get("grid_points")
    points = [p for p in (map(_ints, raw) if isinstance(raw, Sequence) and not isinstance(raw, str) else ())
              if p is not None and len(p) == len(grid) and all(0 <= v < g for v, g in zip(p, grid, strict=True))]
    block, counts = _ints(evidence.get("block")), _ints(evidence.get("block_counts"))
    operand = str(evidence.get("operand") or "the operand")
    panels: list[Panel | None] = []
    if points:
        panels.append(_view([(0, g) for g in grid], grid, {p: f"grid point {p}" for p in points},
                            f"grid {grid} ({_axes(grid, semantics)}): the grid points it names"))
    if block is not None and counts and len(block) == len(counts) and all(c > 0 for c in counts):
        extent = [(max(min(0, b), -_FAR * c), min(max(c, b + 1), (_FAR + 1) * c)) for b, c in zip(block, counts,
                                                                                                strict=True)]
        where = "" if all(0 <= b < c for b, c in zip(block, counts, strict=True)) else ", outside them"
        panels.append(_view(extent, counts, {block: f"block {block} of {operand}{where}"},
                            f"{operand}: {counts} blocks; block {block}{where}"))
    drawn = tuple(panel for panel in panels if panel is not None)
    if not drawn:
        return None
    return GridPicture(grid=grid, operand=operand, points=tuple(points), block=block, block_counts=counts,
                       panels=drawn)


def grid_caption(p: GridPicture) -> str:
    """What the picture shows, for the text under it."""
    parts = []
    if p.points:
        parts.append(f"the grid{' (leading dimensions as rows)' if len(p.grid) > 2 else ''}, red: the grid points "
                     "the finding names (at most a few)")
    if p.block is not None:
        parts.append(f"the blocks of {p.operand} (grey), red: block {p.block}"
                     + (" (white: beyond the array's blocks)" if p.outside else ""))
    pooled = any(panel.pool != (1, 1) for panel in p.panels)
    return "; ".join(parts) + ("; a cell stands for several (pooled) and is red when any of them is" if pooled else "")


def grid_svg(p: GridPicture, *, width: int = 360) -> str:
    """The panels side by side as inline SVG; a marked cell's title says what it is."""
    e, parts, x0, height = html.escape, [], 0, 0
    for panel in p.panels:
        rows, cols = panel.codes.shape
        size = max(3, min(24, width // cols, 240 // rows))
        parts.append(f'<text x="{x0}" y="12" font-size="12" fill="#1d2329">{e(panel.title)}</text>')
        for i in range(rows):
            for j in range(cols):
                code = int(panel.codes[i, j])
                fill = "#{:02x}{:02x}{:02x}".format(*_COLORS[code])
                title = f"<title>{e(panel.marks[(i, j)])}</title>" if (i, j) in panel.marks else ""
                parts.append(f'<rect x="{x0 + j * size}" y="{18 + i * size}" width="{size}" height="{size}" '
                             f'fill="{fill}" class="c{code}">{title}</rect>')
        x0 += max(cols * size, 7 * len(panel.title)) + 24
        height = max(height, 18 + rows * size + 2)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="grid-picture" width="{x0}" height="{height}" '
            f'viewBox="0 0 {x0} {height}" role="img" aria-label="{e(grid_caption(p))}">'
            "<style>.c0{stroke:#d0d7de;stroke-dasharray:2 2}.c1{stroke:#fff}.c2{stroke:#000}</style>"
            + "".join(parts) + "</svg>")


def grid_png(p: GridPicture) -> bytes:
    """The panels side by side as a PNG: a square of pixels per cell, 16 white pixels between."""
    s = 8 if max(max(panel.codes.shape) for panel in p.panels) <= 32 else 4
    height = max(panel.codes.shape[0] for panel in p.panels) * s
    images = []
    for panel in p.panels:
        rows, cols = panel.codes.shape
        image = np.full((height, cols * s, 3), 255, np.uint8)
        for i in range(rows):
            for j in range(cols):
                code = int(panel.codes[i, j])
                image[i * s:(i + 1) * s - 1, j * s:(j + 1) * s - 1] = _COLORS[code] if code else _PNG_OUTSIDE
        images += [image, np.full((height, 16, 3), 255, np.uint8)]
    return encode_png(np.concatenate(images[:-1], axis=1))
