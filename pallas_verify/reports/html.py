"""A report as one self-contained HTML page (inline CSS and SVG, no scripts, no external
assets) that escapes every string that came from a kernel, a config or a message."""

from __future__ import annotations

import html
import json
from typing import Any

from pallas_verify.findings import Finding
from pallas_verify.reports.heatmap import blame_maps, heatmap_svg
from pallas_verify.reports.matrix import CELL_LABELS
from pallas_verify.reports.report import Report, jsonable
from pallas_verify.reports.tables import FEATURE_LEGEND, feature_rows, matrix_rows, summary_pairs
from pallas_verify.reports.text import reproduce_command

__all__ = ["html_page"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2329;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left}
th{background:#f6f8fa}.pass{background:#dafbe1}.fail{background:#ffd8d3;font-weight:600}
.skipped,.unsupported{background:#f1f3f5;color:#6e7781}.interrupted{background:#fff3cd;color:#6e5600}.not_reached{background:#fff8c5}.error{background:#e8d5ff;font-weight:600}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}
.finding{border:1px solid #d0d7de;border-radius:6px;padding:4px 14px;margin:14px 0}
code{background:#eff1f3;padding:1px 4px}dl.sum{display:grid;grid-template-columns:max-content auto;gap:2px 14px}
dl.sum dt{font-weight:600}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_matrix(report: Report) -> str:
    backends, rows = matrix_rows(report)
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
            tds.append(f'<td class="{cell.status}" title="{_e(detail)}">{CELL_LABELS[cell.status]}'
                       + (f"<br><small>{_e(cell.reason)}</small>" if cell.reason else "") + "</td>")
        body.append(f"<tr><th>{_e(kernel)}</th>{''.join(tds)}</tr>")
    return f"<table><tr><th>kernel</th>{head}</tr>{''.join(body)}</table>"


def _html_features(report: Report) -> str:
    backends, rows = feature_rows(report)
    if not rows or not backends:
        return ""
    head = "".join(f"<th>{_e(b)}</th>" for b in backends)
    body = "".join(f"<tr><th>{_e(tag)}</th>" + "".join(f"<td>{_e(t)}</td>" for t in texts) + "</tr>"
                   for tag, texts in rows)
    return (f"<h2>feature x backend</h2><table><tr><th>feature</th>{head}</tr>{body}</table>"
            f"<p><small>{_e(FEATURE_LEGEND)}</small></p>")


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
    summary = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary_pairs(report))
    findings = "".join(_html_finding(i, f) for i, f in enumerate(report.findings, 1))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<dl class="sum">{summary}</dl><h2>kernel x backend</h2>{_html_matrix(report)}{_html_features(report)}'
            f"<h2>findings</h2>{findings or '<p>No findings.</p>'}</body></html>\n")
