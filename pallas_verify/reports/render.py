"""Renderings of a Report: plain text of a finding, JUnit XML, Markdown and HTML.

JSON (``Report.to_dict``) is the source of truth; everything here is a view of it. The
HTML page is self-contained (inline CSS and SVG, no scripts, no external assets) and
escapes every string that came from a kernel, a config or a message.
"""

from __future__ import annotations

import html
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report, jsonable, write_atomic

__all__ = [
    "blame_maps",
    "cell_findings",
    "finding_text",
    "findings_text",
    "heatmap_svg",
    "html_page",
    "junit_xml",
    "markdown",
    "reproduce_command",
    "text_heatmap",
    "write_reports",
]

_MAX_CELLS = 64  # a blame map larger than this per side is pooled (max) before drawing
_SHADES = " .:-=+*#%@"
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def cell_findings(report: Report, result: BackendResult) -> list[Finding]:
    """The findings of one kernel x backend cell (static grid findings count for every cell)."""
    return [f for f in report.findings
            if f.kernel == result.kernel and f.backend in (result.backend, "static")
            and f.transform == result.transform]


def reproduce_command(finding: Finding) -> str | None:
    """The one-line command that re-runs a finding's minimal case."""
    return f"python {finding.reproducer}" if finding.reproducer else None


# -- blame maps ---------------------------------------------------------------------------


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
    """A blame map as characters: ``.`` for a clean block, denser for larger error, X for inf/NaN."""
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
                chars.append(_SHADES[max(1, min(len(_SHADES) - 1, math.ceil(v / top * (len(_SHADES) - 1))))])
        lines.append("".join(chars))
    return lines


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


# -- text --------------------------------------------------------------------------------


def _short(value: Any, limit: int = 600) -> str:
    text = value if isinstance(value, str) else json.dumps(jsonable(value))
    return text if len(text) <= limit else text[:limit] + " ..."


def finding_text(finding: Finding) -> str:
    """A finding as a terminal block: kind, message, minimal config, evidence, reproducer."""
    where = f"{finding.backend}" + (f" ({finding.transform})" if finding.transform else "")
    lines = [f"[{finding.kind}] {finding.kernel} on {where}", *finding.message.splitlines()]
    lines.append(f"minimal config: {dict(finding.config)}")
    if finding.mode:
        lines.append(f"mode: {dict(finding.mode)}")
    lines.extend(_evidence_lines(finding.evidence, finding.message))
    command = reproduce_command(finding)
    lines.append(f"reproduce: {command}" if command else "reproduce: no reproducer (the spec is not "
                 "defined at module level, so it cannot be loaded again)")
    return "\n".join(lines)


def _evidence_lines(evidence: Mapping[str, Any], message: str) -> list[str]:
    lines = []
    table = [row for row in evidence.get("outputs") or () if str(row) not in message]
    if table:  # the message usually holds the error table already
        lines.append("error table:")
        lines.extend(f"  {row}" for row in table)
    for label, matrix in blame_maps(evidence):
        lines.append(f"blame map of {label} (rows x columns of blocks; '.' clean, X NaN/inf):")
        lines.extend(f"  {row}" for row in text_heatmap(matrix))
    blame = evidence.get("blame")
    if isinstance(blame, Mapping) and isinstance(blame.get("message"), str):
        lines.append(f"blame: {blame['message']}")
    for key, value in evidence.items():
        if key not in ("outputs", "blame", "traceback", "log"):
            lines.append(f"{key}: {_short(value)}")
    if evidence.get("traceback"):
        lines.append("traceback (last lines):")
        lines.extend(f"  {row}" for row in str(evidence["traceback"]).strip().splitlines()[-8:])
    return lines


# -- JUnit XML ---------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    return _XML_BAD.sub("?", text)


def junit_xml(report: Report, *, suite: str = "pallas-verify") -> str:
    """One testcase per kernel x backend cell (classname = kernel, name = backend)."""
    counts = {s: sum(r.status == s for r in report.results) for s in ("fail", "skipped", "unsupported")}
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(report.results)),
                         failures=str(counts["fail"]), errors="0",
                         skipped=str(counts["skipped"] + counts["unsupported"]), time=f"{report.seconds:.3f}")
    for result in report.results:
        name = result.backend + (f"+{result.transform}" if result.transform else "")
        case = ET.SubElement(node, "testcase", classname=_xml_text(result.kernel), name=_xml_text(name),
                             time=f"{result.seconds:.3f}")
        if result.status == "fail":
            found = cell_findings(report, result)
            failure = ET.SubElement(case, "failure", message=_xml_text(result.reason),
                                    type=found[0].kind if found else "finding")
            failure.text = _xml_text("\n\n".join(finding_text(f) for f in found))
        elif result.status in ("skipped", "unsupported"):
            ET.SubElement(case, "skipped", message=_xml_text(f"{result.status}: {result.reason}"))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# -- Markdown ----------------------------------------------------------------------------

_BADGE = {"pass": "PASS", "fail": "FAIL", "skipped": "skip", "unsupported": "n/a"}


def _kernel_names(report: Report) -> list[str]:
    names = [k["name"] for k in report.kernels]
    return names + sorted({r.kernel for r in report.results} - set(names))


def _matrix_rows(report: Report) -> tuple[list[str], list[tuple[str, list[BackendResult | None]]]]:
    """Column labels (each backend, then ``backend+transform`` for each transform run
    there) and one row of cells per kernel."""
    backends = list(dict.fromkeys([*report.backends, *(r.backend for r in report.results)]))
    transforms = sorted({r.transform for r in report.results if r.transform})
    present = {(r.backend, r.transform) for r in report.results}
    columns = [(b, t) for b in backends for t in (None, *transforms) if t is None or (b, t) in present]
    cells = {(r.kernel, r.backend, r.transform): r for r in report.results}
    labels = [b if t is None else f"{b}+{t}" for b, t in columns]
    return labels, [(k, [cells.get((k, b, t)) for b, t in columns]) for k in _kernel_names(report)]


def _summary_pairs(report: Report) -> list[tuple[str, str]]:
    by_status = {s: sum(r.status == s for r in report.results) for s in _BADGE}
    return [
        ("kernels", str(len(_kernel_names(report)))),
        ("cells", ", ".join(f"{n} {s}" for s, n in by_status.items() if n) or "none"),
        ("findings", str(len(report.findings))),
        ("seed", str(report.seed)),
        ("profile", report.profile),
        ("seconds", f"{report.seconds:.1f}"),
        ("interrupted", "yes" if report.interrupted else "no"),
    ]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: Report) -> str:
    """Summary, the kernel x backend matrix, and each finding with its reproducer."""
    out = ["# pallas-verify report", ""]
    out += [f"- **{k}**: {_md_cell(v)}" for k, v in _summary_pairs(report)] + [""]
    backends, rows = _matrix_rows(report)
    if rows and backends:
        out.append("| kernel | " + " | ".join(_md_cell(b) for b in backends) + " |")
        out.append("|---" * (len(backends) + 1) + "|")
        for kernel, cells in rows:
            marks = [_BADGE[c.status] if c else "" for c in cells]
            out.append(f"| {_md_cell(kernel)} | " + " | ".join(marks) + " |")
        out.append("")
    for i, finding in enumerate(report.findings, 1):
        out += [f"## {i}. `{finding.kind}` in `{_md_cell(finding.kernel)}` on `{finding.backend}`", "",
                "```", finding_text(finding).replace("```", "'''"), "```", ""]
    return "\n".join(out)


# -- HTML --------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2329;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left}
th{background:#f6f8fa}.pass{background:#dafbe1}.fail{background:#ffd8d3;font-weight:600}
.skipped,.unsupported{background:#f1f3f5;color:#6e7781}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}
.finding{border:1px solid #d0d7de;border-radius:6px;padding:4px 14px;margin:14px 0}
code{background:#eff1f3;padding:1px 4px}dl.sum{display:grid;grid-template-columns:max-content auto;gap:2px 14px}
dl.sum dt{font-weight:600}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_matrix(report: Report) -> str:
    backends, rows = _matrix_rows(report)
    if not rows or not backends:
        return "<p>No kernel x backend cells.</p>"
    head = "".join(f"<th>{_e(b)}</th>" for b in backends)
    body = []
    for kernel, cells in rows:
        tds = []
        for cell in cells:
            if cell is None:
                tds.append("<td></td>")
                continue
            detail = cell.effort + (f"; {cell.reason}" if cell.reason else "")
            tds.append(f'<td class="{cell.status}" title="{_e(detail)}">{_BADGE[cell.status]}'
                       + (f"<br><small>{_e(cell.reason)}</small>" if cell.reason else "") + "</td>")
        body.append(f"<tr><th>{_e(kernel)}</th>{''.join(tds)}</tr>")
    return f"<table><tr><th>kernel</th>{head}</tr>{''.join(body)}</table>"


def _html_finding(i: int, finding: Finding) -> str:
    parts = [f'<section class="finding" id="finding-{i}"><h2>{i}. {_e(finding.kind)} in {_e(finding.kernel)} '
             f"on {_e(finding.backend)}{' (' + _e(finding.transform) + ')' if finding.transform else ''}</h2>",
             f"<p>first seen after {finding.elapsed_s:.1f} s</p>",
             f"<h3>message</h3><pre>{_e(finding.message)}</pre>",
             f"<h3>minimal config</h3><pre>{_e(json.dumps(jsonable(finding.config), indent=1))}</pre>"]
    if finding.mode:
        parts.append(f"<h3>mode</h3><pre>{_e(json.dumps(jsonable(finding.mode)))}</pre>")
    command = reproduce_command(finding)
    parts.append(f"<h3>reproduce</h3><pre>{_e(command)}</pre>" if command else "<p>No reproducer.</p>")
    for label, matrix in blame_maps(finding.evidence):
        parts.append(f"<h3>blame map, {_e(label)}</h3>{heatmap_svg(matrix)}")
    rest = {k: v for k, v in finding.evidence.items() if k != "blame" or not blame_maps(finding.evidence)}
    if rest:
        parts.append(f"<details><summary>evidence</summary><pre>{_e(json.dumps(jsonable(rest), indent=1))}"
                     "</pre></details>")
    return "".join(parts) + "</section>"


def html_page(report: Report, *, title: str = "pallas-verify report") -> str:
    """A self-contained HTML page: summary, the matrix, and every finding."""
    summary = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in _summary_pairs(report))
    findings = "".join(_html_finding(i, f) for i, f in enumerate(report.findings, 1))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<dl class="sum">{summary}</dl><h2>kernel x backend</h2>{_html_matrix(report)}'
            f"<h2>findings</h2>{findings or '<p>No findings.</p>'}</body></html>\n")


def write_reports(report: Report, out_dir: str | Path, *, formats: Iterable[str] = ("json", "xml", "html", "md"),
                  stem: str = "report") -> dict[str, Path]:
    """Write the report in each format under ``out_dir`` atomically; returns the paths."""
    renderers = {"json": None, "xml": junit_xml, "html": html_page, "md": markdown}
    paths: dict[str, Path] = {}
    for fmt in formats:
        if fmt not in renderers:
            from pallas_verify.errors import InvalidArgument

            raise InvalidArgument(f"format={fmt!r} is not one of {tuple(renderers)}.")
        path = Path(out_dir) / (f"{stem}.{fmt}" if fmt != "xml" else f"{stem}.junit.xml")
        render = renderers[fmt]
        paths[fmt] = report.write_json(path) if render is None else write_atomic(path, render(report))
    return paths


def findings_text(findings: Sequence[Finding]) -> str:
    """Several findings as terminal blocks separated by blank lines."""
    return "\n\n".join(finding_text(f) for f in findings)
