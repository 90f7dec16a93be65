"""Blame maps: the per-block error matrices of a finding's evidence, drawn as text or SVG."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["blame_maps", "heatmap_svg", "text_heatmap", "text_legend"]

_MAX_CELLS = 64  # a blame map larger than this per side is pooled (max) before drawing
_SHADES = " .:-=+*#%@"


def _matrix(value: Any) -> np.ndarray | None:
    """``value`` as a 2-D float array when it is a (1-D or 2-D) list of numbers, else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    rows = [value] if not isinstance(value[0], (list, tuple)) else value
    if any(not isinstance(r, (list, tuple)) or len(r) != len(rows[0]) or not r for r in rows):
        return None
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for r in rows for x in r):
        return None
    return np.asarray(rows, dtype=float)


def blame_maps(evidence: Mapping[str, Any]) -> list[tuple[str, np.ndarray]]:
    """Every per-block error matrix under ``evidence["blame"]``: (label, 2-D array).

    ``evidence["blame"]`` is a mapping with ``"block_errors"`` or a list of such mappings
    (one per output, labelled by their ``"output"``/``"path"`` entry when present).
    """
    blame = evidence.get("blame")
    entries = blame if isinstance(blame, (list, tuple)) else [blame]
    maps = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            continue
        matrix = _matrix(entry.get("block_errors"))
        if matrix is not None:
            label = entry.get("path", entry.get("output", i if len(entries) > 1 else "out"))
            maps.append((f"output {label}", matrix))
    return maps


def _pooled(matrix: np.ndarray, limit: int) -> tuple[np.ndarray, tuple[int, int]]:
    """Max-pool ``matrix`` so neither side exceeds ``limit``; returns it and the pool size."""
    fy, fx = (max(1, math.ceil(n / limit)) for n in matrix.shape)
    if (fy, fx) == (1, 1):
        return matrix, (1, 1)
    h, w = math.ceil(matrix.shape[0] / fy), math.ceil(matrix.shape[1] / fx)
    padded = np.full((h * fy, w * fx), -np.inf)
    padded[: matrix.shape[0], : matrix.shape[1]] = np.where(np.isnan(matrix), np.inf, matrix)
    return padded.reshape(h, fy, w, fx).max(axis=(1, 3)), (fy, fx)


def _scale(matrix: np.ndarray) -> float:
    finite = matrix[np.isfinite(matrix)]
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def text_heatmap(matrix: np.ndarray, *, limit: int = 32) -> list[str]:
    """A blame map as characters: ``.`` for a clean block, ``:`` (the least) to ``@`` (the largest)
    for larger error, X for inf/NaN."""
    pooled, _ = _pooled(matrix, limit)
    top = _scale(pooled)
    lines = []
    for row in pooled:
        chars = []
        for v in row:
            if not np.isfinite(v):
                chars.append("X")
            elif v <= 0:
                chars.append(".")
            else:
                chars.append(_SHADES[max(2, min(len(_SHADES) - 1, math.ceil(v / top * (len(_SHADES) - 1))))])
        lines.append("".join(chars))
    return lines


def text_legend(matrix: np.ndarray) -> str:
    """What the characters of ``text_heatmap(matrix)`` mean, with the error ``@`` stands for."""
    top = _scale(_pooled(np.asarray(matrix, dtype=float), 32)[0])
    return (f"'.' clean, '{_SHADES[2:-1]}' growing error, '{_SHADES[-1]}' the largest "
            f"({top:.3g}), X NaN/inf")


def _color(value: float, top: float) -> str:
    if not np.isfinite(value):
        return "#5b1a8b"  # NaN or inf: its own colour, off the scale
    t = 0.0 if value <= 0 else min(1.0, value / top)
    g = round(255 - 200 * t)
    return f"rgb(255,{g},{round(g * 0.9)})" if t > 0 else "#f4f6f8"


def heatmap_svg(matrix: np.ndarray, *, title: str = "error by block", width: int = 480) -> str:
    """An inline SVG heatmap of a per-block error matrix (rows x columns of blocks)."""
    pooled, pool = _pooled(np.asarray(matrix, dtype=float), _MAX_CELLS)
    rows, cols = pooled.shape
    size = max(6, min(40, width // max(cols, 1)))
    top = _scale(pooled)
    rects = []
    for i in range(rows):
        for j in range(cols):
            v = float(pooled[i, j])
            where = f"block ({i * pool[0]}, {j * pool[1]})" + (" (pooled)" if pool != (1, 1) else "")
            rects.append(f'<rect x="{j * size}" y="{i * size + 18}" width="{size}" height="{size}" '
                         f'fill="{_color(v, top)}" stroke="#ffffff" stroke-width="0.5">'
                         f"<title>{html.escape(where)}: {v:.4g}</title></rect>")
    legend = f"{title}: {rows}x{cols} blocks, max finite error {top:.4g}; purple = NaN/inf"
    h, w = rows * size + 18, max(cols * size, 560)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="{html.escape(legend)}">'
            f'<text x="0" y="12" font-size="11" fill="#333">{html.escape(legend)}</text>'
            + "".join(rects) + "</svg>")
