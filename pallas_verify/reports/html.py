"""A report as one self-contained HTML page (inline CSS, SVG and one small inline script
for the matrix's filter; no external assets, nothing fetched) that escapes every string
that came from a kernel, a config or a message."""

from __future__ import annotations

import html
import json
from typing import Any

from pallas_verify.findings import Finding
from pallas_verify.reports.grid_picture import grid_caption, grid_picture, grid_svg
from pallas_verify.reports.heatmap import blame_maps, heatmap_svg
from pallas_verify.reports.html_matrix import MATRIX_CSS, MATRIX_SCRIPT, html_features, html_matrix
from pallas_verify.reports.nights_html import NIGHTS_CSS, finding_night, nights_section
from pallas_verify.reports.picture import caption, pictures, svg, worst_table
from pallas_verify.reports.report import Report, jsonable
from pallas_verify.reports.tables import summary_pairs
from pallas_verify.reports.text import reproduce_command

__all__ = ["html_page"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2329;max-width:1320px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left}
th{background:#f6f8fa}.pass{background:#dafbe1}.fail{background:#ffd8d3;font-weight:600}
.skipped,.unsupported{background:#f1f3f5;color:#6e7781}.interrupted{background:#fff3cd;color:#6e5600}.not_reached{background:#fff8c5}.error{background:#e8d5ff;font-weight:600}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}
.finding{border:1px solid #d0d7de;border-radius:6px;padding:4px 14px;margin:14px 0}
code{background:#eff1f3;padding:1px 4px}dl.sum{display:grid;grid-template-columns:max-content auto;gap:2px 14px}
dl.sum dt{font-weight:600}pre.copy{user-select:all}svg.elements,svg.grid-picture{display:block;margin:6px 0;max-width:100%}
pre.src{white-space:pre;overflow:auto;font-size:12px}pre.src .ln{color:#8c959f}
pre.src mark{background:#fff1a8;display:inline-block;width:100%}pre.src em{color:#7d4e00;font-size:11px}
table.worst td,table.worst th{font:12px ui-monospace,monospace;padding:2px 6px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_finding(i: int, finding: Finding, night: str = "") -> str:
    parts = [f'<section class="finding" id="finding-{i}"><h2>{i}. {_e(finding.kind)} in {_e(finding.kernel)} '
             f"on {_e(finding.backend)}{' (' + _e(finding.transform) + ')' if finding.transform else ''}</h2>",
             night, f"<p>first seen after {finding.elapsed_s:.1f} s</p>",
             f"<h3>message</h3><pre>{_e(finding.message)}</pre>",
             f"<h3>minimal config</h3><pre>{_e(json.dumps(jsonable(finding.config), indent=1))}</pre>"]
    if finding.mode:
        parts.append(f"<h3>mode</h3><pre>{_e(json.dumps(jsonable(finding.mode)))}</pre>")
    command = reproduce_command(finding)
    parts.append(f'<h3>reproduce</h3><pre class="copy">{_e(command)}</pre>' if command else "<p>No reproducer.</p>")
    drawn = pictures(finding.evidence)
    for picture in drawn:
        parts.append(f"<h3>elements of {_e(picture.path)}</h3>{svg(picture)}"
                     f'<p class="legend">{_e(caption(picture))}</p>{worst_table(picture)}')
    if not drawn:
        for label, matrix in blame_maps(finding.evidence):
            parts.append(f"<h3>blame map, {_e(label)}</h3>{heatmap_svg(matrix)}")
    grid = grid_picture(finding.evidence)
    if grid is not None:
        parts.append(f"<h3>grid and blocks of {_e(finding.evidence.get('call') or finding.kernel)}</h3>"
                     f'{grid_svg(grid)}<p class="legend">{_e(grid_caption(grid))}</p>')
    parts.append(_html_source(finding.evidence.get("source")))
    shown = ({"elements"} if drawn else {"blame"} if blame_maps(finding.evidence) else set()) | {"source"}
    rest = {k: v for k, v in finding.evidence.items() if k not in shown}
    if rest:
        parts.append(f"<details><summary>evidence</summary><pre>{_e(json.dumps(jsonable(rest), indent=1))}"
                     "</pre></details>")
    return "".join(parts) + "</section>"


def _html_source(source: Any) -> str:
    """The kernel's source the finding involves (``reports.excerpt``), its marked lines highlighted."""
    if not isinstance(source, dict) or not isinstance(source.get("blocks"), list):
        return ""
    out = []
    for block in source["blocks"]:
        try:
            start, marked = int(block["start"]), {int(n): str(why) for n, why in block.get("marked", [])}
            lines = [str(line) for line in block["lines"]]
        except (KeyError, TypeError, ValueError):
            continue
        rows = []
        for n, line in enumerate(lines, start):
            text = f'<span class="ln">{n:>4}</span> {_e(line)}'
            rows.append(f'<mark title="{_e(marked[n])}">{text}  <em>{_e(marked[n])}</em></mark>' if n in marked else text)
        out.append(f"<h3>source: {_e(block.get('function', ''))} "
                   f"<small>({_e(source.get('path', ''))}:{start})</small></h3>"
                   f'<pre class="src">{chr(10).join(rows)}</pre>')
    return "".join(out)


def html_page(report: Report, *, title: str = "pallas-verify report") -> str:
    """A self-contained HTML page: summary, a fuzz night's statuses and history, the matrix,
    and every finding."""
    summary = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary_pairs(report))
    findings = "".join(_html_finding(i, f, finding_night(report, i - 1)) for i, f in enumerate(report.findings, 1))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}{MATRIX_CSS}{NIGHTS_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<dl class="sum">{summary}</dl>{nights_section(report)}<h2>kernel x backend</h2>{html_matrix(report)}{html_features(report)}'
            f"<h2>findings</h2>{findings or '<p>No findings.</p>'}<script>{MATRIX_SCRIPT}</script></body></html>\n")
