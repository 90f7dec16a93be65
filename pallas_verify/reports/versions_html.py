"""The JAX-version matrix as one self-contained HTML page (``versions.html``, beside
``versions.json``, its source of truth; ``campaigns.versions``).

The page shows each release's run, then the kernel x JAX release table: a row per kernel
and cell (a backend, or ``backend+transform``), a column per release that has a report,
each cell its status's badge as the report's matrix draws it. A cell whose verdict
changed from the release before (``reports.compare``'s categories; a cell failing alike
on both is no change) is outlined: red when it got worse (a new failure, a new n/a), green
when better (fixed, n/a gone), amber otherwise; its hover text says what changed. Rows
that changed come first, and "changed only" hides the rest (a few lines of script; without
scripts every row shows). Then each pair of consecutive releases' changes in words.
Nothing is fetched; every string from a report is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.compare import Change, report_cells
from pallas_verify.reports.compare_text import detail
from pallas_verify.reports.html_matrix import MATRIX_CSS
from pallas_verify.reports.matrix import CELL_LABELS

__all__ = ["TONES", "versions_page"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2329;max-width:1320px}
h1{font-size:22px}h2{font-size:17px;margin-top:26px}h3{font-size:15px}table{border-collapse:collapse}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f6f8fa}
td.what{max-width:720px;overflow-wrap:anywhere;font-size:13px}td.err{max-width:640px;overflow-wrap:anywhere}
td.worse{outline:2px solid #cf222e;outline-offset:-2px;background:#fff0ee}
td.better{outline:2px solid #1a7f37;outline-offset:-2px;background:#eefbf1}
td.other{outline:2px solid #bf8700;outline-offset:-2px;background:#fff8e5}
.matrix th.cell{font-weight:400;font-family:ui-monospace,monospace;font-size:12px}
"""
_SCRIPT = """
(function(){var c=document.getElementById('pv-changed');if(!c)return;
  c.addEventListener('change',function(){document.querySelectorAll('tr[data-changed]').forEach(function(tr){
    tr.style.display=(c.checked&&tr.dataset.changed!=='1')?'none':'';});});})();
"""
#: How a change is outlined, by its category.
TONES = {"new failure": "worse", "new n/a": "worse", "fixed": "better", "n/a gone": "better"}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _checked(data: Any) -> list[Mapping[str, Any]]:
    """``data``'s runs; InvalidArgument saying what keeps it from being a versions.json."""
    fix = "give the versions.json that `pallas-verify conformance --jax` writes"
    if not isinstance(data, Mapping) or data.get("version") != 1:
        raise InvalidArgument(f"versions data is not a versions.json of version 1 ({type(data).__name__}); {fix}.")
    runs, comparisons = data.get("runs"), data.get("comparisons")
    if not isinstance(runs, list) or not all(isinstance(r, Mapping) and isinstance(r.get("jax"), str) for r in runs):
        raise InvalidArgument(f"versions data has no 'runs' list of objects each with a 'jax' release; {fix}.")
    if not isinstance(comparisons, list) or not all(
            isinstance(c, Mapping) and {"old_jax", "new_jax", "changes"} <= c.keys() for c in comparisons):
        raise InvalidArgument(f"versions data has no 'comparisons' list of objects each with 'old_jax', 'new_jax' "
                              f"and 'changes'; {fix}.")
    return list(runs)


def _badge(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return '<span class="b skipped" title="the report has no such cell">absent</span>'
    status = str(cell.get("status", ""))
    label, reason = CELL_LABELS.get(status, status), str(cell.get("reason", ""))
    if status == "fail" and reason:
        kinds = [k for k in reason.split(", ") if k]
        label += f" {kinds[0]}" + (f" +{len(kinds) - 1}" if len(kinds) > 1 else "")
    return f'<span class="b {_e(status)}" title="{_e(reason)}">{_e(label)}</span>'


def _steps_changes(data: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], list[Change]]]:
    """Each comparison of ``data`` with its cells whose verdict differs (``Change.differs``)."""
    return [(step, [c for c in map(Change.from_dict, step["changes"]) if c.differs]) for step in data["comparisons"]]


def _runs_table(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in runs:
        cells = r.get("cells") if isinstance(r.get("cells"), Mapping) else {}
        counts = " ".join(f'<span class="b {_e(s)}">{n} {_e(CELL_LABELS.get(s, s))}</span>' for s, n in cells.items())
        where = (f"<code>{_e(r['report'])}</code>" if r.get("report")
                 else f"no report: {_e(str(r.get('error') or 'none written'))}")
        exit_status = "-" if r.get("exit_status") is None else r["exit_status"]
        rows.append(f"<tr><th>{_e(r['jax'])}</th><td>{_e(r.get('jax_version') or '-')}</td><td>{_e(exit_status)}</td>"
                    f'<td>{counts or "-"}</td><td class="err">{where}</td></tr>')
    return ("<table><tr><th>jax</th><th>ran on</th><th>exit</th><th>cells</th><th>report</th></tr>"
            f"{''.join(rows)}</table>")


def _matrix(releases: list[str], reports: Mapping[str, Mapping[str, Any]], changes: Mapping[str, Any]) -> str:
    cells = {jax: report_cells(reports[jax]) for jax in releases}
    keys = list(dict.fromkeys(key for jax in releases for key in cells[jax]))
    changed = {key for jax in releases for key in changes.get(jax, {})}
    keys.sort(key=lambda k: k not in changed)  # stable: the changed rows first, each in its report's order
    body = []
    for kernel, column in keys:
        tds = []
        for i, jax in enumerate(releases):
            change = changes.get(jax, {}).get((kernel, column)) if i else None
            tone = TONES.get(change.category, "other") if change is not None else ""
            what = f' title="{_e(f"{releases[i - 1]} -> {jax}: {change.category}: {detail(change)}")}"' if change else ""
            tds.append(f'<td class="{tone}"{what}>{_badge(cells[jax].get((kernel, column)))}</td>')
        flag = "1" if (kernel, column) in changed else "0"
        body.append(f'<tr data-kernel="{_e(kernel)}" data-changed="{flag}"><th class="k" title="{_e(kernel)}">{_e(kernel)}</th>'
                    f'<th class="cell">{_e(column)}</th>{"".join(tds)}</tr>')
    head = "".join(f"<th>jax {_e(jax)}</th>" for jax in releases)
    return ('<div class="controls"><label><input type="checkbox" id="pv-changed"> changed only</label> '
            f"({len(changed)} of {len(keys)} rows changed between releases)</div>"
            f'<table class="matrix"><tr><th>kernel</th><th>cell</th>{head}</tr>{"".join(body)}</table>'
            '<p class="legend">outlined: the verdict changed from the release before (red: worse, a new failure '
            "or n/a; green: better, fixed or n/a gone; amber: another change); hover for what changed</p>")


def _steps(steps: Sequence[tuple[Mapping[str, Any], list[Change]]]) -> str:
    parts = []
    for step, changes in steps:
        title = f"jax {_e(step['old_jax'])} &rarr; {_e(step['new_jax'])}"
        if not changes:
            parts.append(f"<h3>{title}</h3><p>The same verdicts ({_e(step.get('unchanged', 0))} cells alike).</p>")
            continue
        rows = "".join(f'<tr><th>{_e(c.kernel)}</th><td>{_e(c.cell)}</td><td class="{TONES.get(c.category, "other")}">'
                       f"{_e(c.category)}</td><td>{_badge(_cell(c.old, c.why_old, c.was))} &rarr; "
                       f'{_badge(_cell(c.new, c.why_new, c.now))}</td><td class="what">{_e(detail(c))}</td></tr>'
                       for c in changes)
        parts.append(f"<h3>{title} ({len(changes)} changed)</h3><table><tr><th>kernel</th><th>cell</th>"
                     f"<th>change</th><th>verdict</th><th>what changed</th></tr>{rows}</table>")
    return "".join(parts) or "<p>Fewer than two releases have a report: nothing to compare.</p>"


def _cell(status: str | None, why: str, seen: Sequence[Any]) -> dict[str, Any] | None:
    if status is None:
        return None
    return {"status": status, "reason": ", ".join(s.kind for s in seen) if status == "fail" else why}


def versions_page(data: Mapping[str, Any], reports: Mapping[str, Mapping[str, Any]], *,
                  title: str = "pallas-verify: conformance under each JAX release") -> str:
    """The page of ``data`` (a versions.json) with each release's report (release -> report
    dict, as ``reports.compare.load_report`` reads them; a release missing there is drawn
    without its cells). InvalidArgument when ``data`` is not a versions.json."""
    runs = _checked(data)
    releases = [str(r["jax"]) for r in runs if str(r["jax"]) in reports]
    steps = _steps_changes(data)
    by_release = {str(step["new_jax"]): {(c.kernel, c.cell): c for c in changes} for step, changes in steps}
    matrix = (_matrix(releases, reports, by_release) if releases
              else "<p>No release has a report: nothing to draw.</p>")
    status = data.get("exit_status")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}{MATRIX_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f"<p>{len(runs)} releases, oldest first; exit status {_e('-' if status is None else status)}"
            f"{'; interrupted' if data.get('interrupted') else ''}.</p>{_runs_table(runs)}"
            f"<h2>kernel x JAX release</h2>{matrix}<h2>what changed between releases</h2>{_steps(steps)}"
            f"<script>{_SCRIPT}</script></body></html>\n")
