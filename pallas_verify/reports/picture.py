"""A mismatch drawn: each bad output's elements colored by their error in units of the bound
(``evidence["elements"]``), the output's block grid over them and the bad blocks the blame
map names outlined with the grid points that wrote them; as inline SVG for the HTML page
and as PNG (numpy and zlib, nothing else) for CI artifacts and issue trackers.

Colors: an exact element light grey; within the bound (error <= 1 unit) pale yellow to
orange; over it red, darker up to 1000 units; a NaN or an infinity where the reference
disagrees purple.
"""

from __future__ import annotations

import dataclasses
import html
import math
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["Picture", "caption", "encode_png", "pictures", "png", "svg", "worst_table"]

_EXACT, _NONFINITE = (244, 246, 248), (110, 40, 170)
_CELL_PX = 8  # the side of a cell, in pixels, in the PNG and (at most) in the SVG


@dataclasses.dataclass(frozen=True)
class Picture:
    """One bad output, ready to draw.

    Attributes:
      path, shape, unit: from the evidence.
      errors: the cells (rows x columns), NaN where the evidence holds null (a NaN/inf disagreement).
      pool: elements per cell (rows, columns).
      block: the output's block in the 2-D view (rows, columns) when blame knows it, else None.
      writers: for each bad block blame named, its index and the grid points that wrote it.
      worst: the worst elements, as the evidence lists them.
    """

    path: str
    shape: tuple[int, ...]
    unit: str
    errors: np.ndarray
    pool: tuple[int, int]
    block: tuple[int, int] | None
    writers: tuple[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], ...]
    worst: tuple[Mapping[str, Any], ...]


def _block_2d(shape: tuple[int, ...], block: Any) -> tuple[int, int] | None:
    if not isinstance(block, (list, tuple)) or len(block) != len(shape) or not shape:
        return None
    if any(not isinstance(b, int) or b <= 0 for b in block):
        return None
    return (1, block[0]) if len(shape) == 1 else (block[-2], block[-1])


def pictures(evidence: Mapping[str, Any]) -> list[Picture]:
    """The pictures ``evidence["elements"]`` holds; blame's block grid and writers go with the
    output blame describes (its ``output`` index among the outputs)."""
    entries = evidence.get("elements")
    blame = evidence.get("blame") if isinstance(evidence.get("blame"), Mapping) else {}
    out = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            errors = np.asarray([[np.nan if v is None else float(v) for v in row] for row in entry["errors"]])
            shape, pool = tuple(entry["shape"]), (int(entry["pool"][0]), int(entry["pool"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            continue
        if errors.ndim != 2 or not errors.size:
            continue
        mine = f"[{blame.get('output')}]" in str(entry.get("path", "")) or len(entries) == 1
        writers = tuple((tuple(b), tuple(tuple(p) for p in points)) for b, points in blame.get("writers", [])) if mine else ()
        out.append(Picture(path=str(entry.get("path", "out")), shape=shape, unit=str(entry.get("unit", "")),
                           errors=errors, pool=pool, block=_block_2d(shape, blame.get("block_shape")) if mine else None,
                           writers=writers, worst=tuple(entry.get("worst", []))))
    return out


def color(units: float) -> tuple[int, int, int]:
    """The color of a cell whose error is ``units`` bounds (NaN: a NaN/inf disagreement)."""
    if math.isnan(units):
        return _NONFINITE
    if units <= 0:
        return _EXACT
    if units <= 1:  # within the bound: pale yellow to orange
        return 255, round(236 - 76 * units), round(179 - 129 * units)
    t = min(1.0, math.log10(units) / 3)  # over it: red, darker up to 1000 bounds
    return round(230 - 110 * t), round(40 - 40 * t), round(40 - 30 * t)


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _block_lines(p: Picture) -> tuple[list[float], list[float]]:
    """Where block boundaries fall, in cells: (row positions, column positions)."""
    if p.block is None:
        return [], []
    rows, cols = p.errors.shape
    by = [i * p.block[0] / p.pool[0] for i in range(1, math.ceil(rows * p.pool[0] / p.block[0]))]
    bx = [j * p.block[1] / p.pool[1] for j in range(1, math.ceil(cols * p.pool[1] / p.block[1]))]
    return by, bx


def _blocks(p: Picture) -> list[tuple[float, float, float, float, str]]:
    """The bad blocks blame named: (top, left, height, width) in cells and their writers' text."""
    if p.block is None or len(p.shape) > 2:
        return []
    out = []
    for block, points in p.writers:
        r, c = (0, block[0]) if len(block) == 1 else (block[-2], block[-1])
        who = ", ".join(str(tuple(q)) for q in points[:4]) or "no grid point"
        out.append((r * p.block[0] / p.pool[0], c * p.block[1] / p.pool[1], p.block[0] / p.pool[0],
                    p.block[1] / p.pool[1], f"block {tuple(block)} written by grid point(s) {who}"))
    return out


def svg(p: Picture, *, width: int = 640) -> str:
    """The picture as inline SVG: a rect per cell (its error in its title), block lines, bad
    blocks outlined and labelled with their writers."""
    rows, cols = p.errors.shape
    size = max(3, min(24, width // cols, 480 // max(rows, 1)))
    top = 18
    e = html.escape
    parts = []
    for i in range(rows):
        for j in range(cols):
            v = float(p.errors[i, j])
            label = "NaN/inf where the reference disagrees" if math.isnan(v) else f"{v:.3g} x the bound"
            where = f"elements [{i * p.pool[0]}, {j * p.pool[1]}]" + (" (pooled)" if p.pool != (1, 1) else "")
            parts.append(f'<rect x="{j * size}" y="{top + i * size}" width="{size}" height="{size}" '
                         f'fill="{_hex(color(v))}"><title>{e(where)}: {label}</title></rect>')
    by, bx = _block_lines(p)
    h, w = rows * size, cols * size
    parts += [f'<line x1="0" x2="{w}" y1="{top + y * size}" y2="{top + y * size}" class="grid"/>' for y in by]
    parts += [f'<line y1="{top}" y2="{top + h}" x1="{x * size}" x2="{x * size}" class="grid"/>' for x in bx]
    for y, x, bh, bw, text in _blocks(p):
        parts.append(f'<rect x="{x * size}" y="{top + y * size}" width="{bw * size}" height="{bh * size}" '
                     f'class="bad-block"><title>{e(text)}</title></rect>')
    bad = int(np.sum(np.isnan(p.errors) | (p.errors > 1)))
    head = (f"{p.path}: shape {p.shape}, {rows}x{cols} cells of {p.pool[0]}x{p.pool[1]} elements; "
            f"{bad} cells over the bound")
    full_w = max(w, 560)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="elements" width="{full_w}" height="{top + h + 2}" '
            f'viewBox="0 0 {full_w} {top + h + 2}" role="img" aria-label="{e(head)}">'
            '<style>.grid{stroke:#24292f;stroke-width:1;stroke-dasharray:3 2}'
            '.bad-block{fill:none;stroke:#000;stroke-width:2}</style>'
            f'<text x="0" y="12" font-size="12" fill="#1d2329">{e(head)}</text>'
            + "".join(parts) + "</svg>")


def caption(p: Picture) -> str:
    """What the colors mean, for the text under the picture."""
    return (f"error in units of {p.unit}: grey exact, yellow to orange within the bound, red over it "
            "(darker up to 1000 times), purple a NaN or an infinity where the reference disagrees; "
            "dashed lines: the output's blocks; outlined: the bad blocks blame names (hover: the grid points "
            "that wrote them)")


def worst_table(p: Picture) -> str:
    """The worst elements: index, kernel, reference and float64 values, error in bounds."""
    if not p.worst:
        return ""
    e = html.escape
    def text(value: Any) -> str:
        return "-" if value is None else e(str(value))

    rows = "".join(f"<tr><td>{e(str(tuple(w.get('index', ()))))}</td><td>{text(w.get('kernel'))}</td>"
                   f"<td>{text(w.get('reference'))}</td><td>{text(w.get('float64'))}</td>"
                   f"<td>{text(w.get('error'))}</td></tr>" for w in p.worst)
    return ('<table class="worst"><tr><th>element</th><th>kernel</th><th>reference</th><th>float64</th>'
            f"<th>error (bounds)</th></tr>{rows}</table>")


def png(p: Picture) -> bytes:
    """The picture as a PNG: a square of pixels per cell, block lines and bad blocks in black."""
    rows, cols = p.errors.shape
    s = _CELL_PX if max(rows, cols) <= 64 else 4
    image = np.zeros((rows * s, cols * s, 3), np.uint8)
    for i in range(rows):
        for j in range(cols):
            image[i * s:(i + 1) * s, j * s:(j + 1) * s] = color(float(p.errors[i, j]))
    by, bx = _block_lines(p)
    for y in by:
        image[min(round(y * s), rows * s - 1), ::2] = 0
    for x in bx:
        image[::2, min(round(x * s), cols * s - 1)] = 0
    for y, x, bh, bw, _ in _blocks(p):
        y0, x0 = round(y * s), round(x * s)
        y1, x1 = min(round((y + bh) * s), rows * s) - 1, min(round((x + bw) * s), cols * s) - 1
        image[y0:y1 + 1, [x0, x1]] = 0
        image[[y0, y1], x0:x1 + 1] = 0
    return encode_png(image)


def encode_png(image: np.ndarray) -> bytes:
    """An RGB ``image`` (rows x columns x 3, uint8) as PNG bytes: numpy and zlib, nothing else."""
    height, width, _ = image.shape
    raw = b"".join(b"\x00" + image[y].tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
