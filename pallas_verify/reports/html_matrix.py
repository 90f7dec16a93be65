"""The kernel x backend matrix (and the feature x backend table) as compact HTML badges.

Each cell is one badge (PASS, FAIL and its finding kinds, n/a, skip, stop, not reached,
error). A cell's reason is not printed in it: each distinct reason is written once in a
legend under the table, and the badge carries its footnote mark and the whole reason as
hover text. Kernels are grouped by the platforms they target, one table per group; in a
group, a backend none of whose cells ran (every one ``skip``: it serves none of the
group's platforms, or is not available here) is folded away, its column kept in the page
but hidden until "show folded backends" is ticked. Rows are sorted failures first; a
filter box and a "failing only" box hide rows (a few lines of inline script; without
scripts every row shows).
"""

from __future__ import annotations

import html
import re
from typing import Any

from pallas_verify.reports.groups import MatrixGroup, Row, columns_of, matrix_groups, worst
from pallas_verify.reports.matrix import CELL_LABELS, covered, shared_reason
from pallas_verify.reports.report import BackendResult, Report
from pallas_verify.reports.tables import FEATURE_LEGEND, feature_rows

__all__ = ["MATRIX_CSS", "MATRIX_SCRIPT", "Legend", "badge", "html_features", "html_matrix"]


MATRIX_CSS = """
.matrix td,.matrix th{padding:2px 5px;font-size:12px;white-space:nowrap}
.matrix th.k{max-width:260px;overflow:hidden;text-overflow:ellipsis}.matrix th.t{font-weight:400;padding-left:16px}
.b{display:inline-block;border-radius:3px;padding:0 5px;font:600 11px/17px ui-monospace,monospace}
.b.pass{background:#2da44e;color:#fff}.b.fail{background:#cf222e;color:#fff}.b.error{background:#8250df;color:#fff}
.b.unsupported{background:#eaeef2;color:#57606a}.b.skipped{background:#f6f8fa;color:#8c959f;font-weight:400}
.b.interrupted{background:#bf8700;color:#fff}.b.not_reached{background:#fff8c5;color:#7d4e00}
.b a{color:inherit}.b sup{font-weight:400;margin-left:1px}
.folded{display:none}body.unfold .folded{display:table-cell}.matrix .fam{font-size:10px;font-weight:400;color:#57606a}
.legend{font-size:12px;color:#424a53;margin:4px 0 16px}.legend li{margin:1px 0}.legend .where{color:#6e7781}
.controls{margin:8px 0;font-size:13px}.controls input[type=search]{width:220px}
"""

#: The filter: a substring of the kernel's name, and "failing only" (the kernels with a
#: failing or error row, each with all its rows). Rows carry data-kernel and data-worst;
#: nothing is fetched, nothing is written but the rows' visibility.
MATRIX_SCRIPT = """
(function(){
  var q=document.getElementById('pv-filter'),f=document.getElementById('pv-failing'),u=document.getElementById('pv-unfold');
  if(!q)return;
  function apply(){
    var text=(q.value||'').toLowerCase(),only=f.checked,rows=document.querySelectorAll('tr[data-kernel]'),bad={};
    rows.forEach(function(tr){if(tr.dataset.worst==='fail'||tr.dataset.worst==='error')bad[tr.dataset.kernel]=1;});
    rows.forEach(function(tr){  // a kernel's rows (its transforms') show or hide together
      var hit=tr.dataset.kernel.toLowerCase().indexOf(text)>=0&&(!only||bad[tr.dataset.kernel]);
      tr.style.display=hit?'':'none';
    });
  }
  q.addEventListener('input',apply);f.addEventListener('change',apply);
  u.addEventListener('change',function(){document.body.classList.toggle('unfold',u.checked);});
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


class Legend:
    """Each distinct reason once, numbered in the order first met (a footnote mark)."""

    def __init__(self, rows: list[Row], columns: list[str]) -> None:
        self._marks: dict[tuple[str, str], int] = {}
        self._cells: dict[int, list[tuple[Row, str]]] = {}
        self._rows, self._columns = rows, columns

    def mark(self, cell: BackendResult) -> int:
        """The footnote mark of ``cell``'s reason (a leading backend name read as "the backend")."""
        mark = self._marks.setdefault((cell.status, shared_reason(cell)), len(self._marks) + 1)
        self._cells.setdefault(mark, []).append(((cell.kernel, cell.transform), cell.backend))
        return mark

    def __len__(self) -> int:
        return len(self._marks)

    def html(self) -> str:
        if not self._marks:
            return ""
        items = []
        for (status, reason), mark in self._marks.items():
            where = covered(self._cells[mark], self._rows, self._columns)
            shown = where if len(where) <= 240 else where[:240].rsplit(" ", 1)[0] + " ..."
            items.append(f'<li id="reason-{mark}" value="{mark}"><span class="b {_e(status)}">'
                         f"{_e(CELL_LABELS[status])}</span> {_e(reason)} <span class=\"where\">({_e(shown)})</span></li>")
        return f'<ol class="legend">{"".join(items)}</ol>'


def _family(column: str) -> tuple[str, str]:
    family, sep, target = column.partition(":")
    return (family, target) if sep else ("", column)


def _backend_label(column: str) -> str:
    """A backend ``family:target`` as its family (small) over its target."""
    family, target = _family(column)
    return f'<span class="fam">{_e(family)}</span><br>{_e(target)}' if family else _e(column)


def _header(group: MatrixGroup) -> str:
    cells = [f'<th class="{_fold(group, c)}" title="{_e(c)}">{_backend_label(c)}</th>' for c in group.columns]
    return f"<tr><th>kernel</th>{''.join(cells)}</tr>"


def _fold(group: MatrixGroup, column: str) -> str:
    return "folded" if column in group.folded else ""


def badge(cell: BackendResult | None, legend: Legend, anchors: dict[tuple[str, str, str | None], int]) -> str:
    """One cell's badge: its label, its finding kinds (FAIL), its reason's footnote mark
    and the reason and effort as hover text."""
    if cell is None:
        return ""
    label = _e(CELL_LABELS[cell.status])
    title = cell.effort if cell.searched else ""
    if cell.status == "fail":
        kinds = cell.reasons
        label += " " + _e(kinds[0]) + (f" +{len(kinds) - 1}" if len(kinds) > 1 else "") if kinds else ""
        title = "; ".join(filter(None, [", ".join(kinds), title]))
        found = anchors.get((cell.kernel, cell.backend, cell.transform))
        if found is not None:
            label = f'<a href="#finding-{found}">{label}</a>'
    elif cell.reason:
        mark = legend.mark(cell)
        label += f'<sup><a href="#reason-{mark}">{mark}</a></sup>'
        title = "; ".join(filter(None, [cell.reason, title]))
    return f'<span class="b {cell.status}" title="{_e(title)}">{label}</span>'


def _anchors(report: Report) -> dict[tuple[str, str, str | None], int]:
    """The first finding of each cell, by its number in the page (1-based)."""
    anchors: dict[tuple[str, str, str | None], int] = {}
    from pallas_verify.findings import row_of

    for i, f in enumerate(report.findings, 1):
        anchors.setdefault((f.kernel, row_of(f), f.transform), i)
    return anchors


def _group_table(report: Report, group: MatrixGroup, legend: Legend) -> str:
    cells = {(r.kernel, r.transform, r.backend): r for r in report.results}
    anchors = _anchors(report)
    body = []
    for kernel, transform in group.rows:
        row = [cells.get((kernel, transform, c)) for c in group.columns]
        worst_status = worst(c.status for c in row if c is not None)
        label = (f'<th class="t">+{_e(transform)}</th>' if transform
                 else f'<th class="k" title="{_e(kernel)}">{_e(kernel)}</th>')
        tds = "".join(f'<td class="{_fold(group, col)}">{badge(c, legend, anchors)}</td>'
                      for col, c in zip(group.columns, row, strict=True))
        body.append(f'<tr data-kernel="{_e(kernel)}" data-worst="{worst_status}">{label}{tds}</tr>')
    folded = [c for c in group.columns if c in group.folded]
    caption = (f"<p class=\"legend\">{len(folded)} backends folded (nothing ran on them for these kernels): "
               f"{_e(', '.join(folded))}</p>" if folded else "")
    title = f"<h3>{_e(' + '.join(group.platforms))} kernels</h3>" if group.platforms else ""
    return f'{title}<table class="matrix">{_header(group)}{"".join(body)}</table>{caption}'


def _controls() -> str:
    return ('<div class="controls"><input type="search" id="pv-filter" placeholder="filter kernels" '
            'aria-label="filter kernels"> <label><input type="checkbox" id="pv-failing"> failing only</label> '
            '<label><input type="checkbox" id="pv-unfold"> show folded backends</label></div>')


def html_matrix(report: Report) -> str:
    """The kernel x backend matrix: controls, one table per platform group, the legend."""
    groups = matrix_groups(report)
    if not groups or not columns_of(report):
        return "<p>No kernel x backend cells.</p>"
    legend = Legend([r for g in groups for r in g.rows], columns_of(report))
    tables = "".join(_group_table(report, g, legend) for g in groups)
    return _controls() + tables + legend.html()


def html_features(report: Report) -> str:
    """The feature x backend table, in the same badges; columns where no feature ran folded."""
    backends, rows = feature_rows(report)
    if not rows or not backends:
        return ""
    empty = {b for i, b in enumerate(backends) if all(texts[i] in ("", CELL_LABELS["skipped"]) for _, texts in rows)}
    head = "".join(f'<th class="{"folded" if b in empty else ""}" title="{_e(b)}">{_backend_label(b)}</th>'
                   for b in backends)
    body = []
    for tag, texts in rows:
        tds = "".join(f'<td class="{"folded" if b in empty else ""}">{_feature_badge(t)}</td>'
                      for b, t in zip(backends, texts, strict=True))
        body.append(f"<tr><th>{_e(tag)}</th>{tds}</tr>")
    return (f'<h2>feature x backend</h2><table class="matrix"><tr><th>feature</th>{head}</tr>{"".join(body)}</table>'
            f'<p class="legend">{_e(FEATURE_LEGEND)}{"; folded: " + _e(", ".join(sorted(empty))) if empty else ""}</p>')


def _feature_badge(text: str) -> str:
    if not text:
        return ""
    counts = re.fullmatch(r"(\d+)/(\d+)", text)  # kernels passing / run ("n/a" is a label)
    if counts:
        status = "pass" if counts.group(1) == counts.group(2) else "fail"
    else:
        status = next((s for s, label in CELL_LABELS.items() if label == text), "skipped")
    return f'<span class="b {status}">{_e(text)}</span>'
