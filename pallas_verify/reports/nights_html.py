"""A fuzz night in the HTML report (the report's ``run.nights``, ``campaigns.nights``): each
finding's status against the nights before (new tonight, still failing, fixed,
unchecked) with the nights it was first and last seen, and each kernel's last nights as a
row of badges; the same status beside each finding.

A section the report does not have draws nothing; one that is not of the documented form
(docs/report-json.md) is said in one line, never drawn half.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pallas_verify.reports.report import Report

__all__ = ["NIGHTS_CSS", "finding_night", "night_summary", "nights_section", "status_counts", "when"]

NIGHTS_CSS = """
.b.new{background:#bc4c00;color:#fff}.b.still{background:#cf222e;color:#fff}.b.fixed{background:#1a7f37;color:#fff}
.b.unchecked{background:#eaeef2;color:#57606a}.b.none{background:#fff;color:#8c959f;font-weight:400}
table.nights td{font-size:13px;vertical-align:top}table.nights .why{color:#6e7781;font-size:12px}
table.history td,table.history th{padding:2px 3px;font-size:12px;text-align:center}
table.history th.k{text-align:left;font-weight:600;max-width:260px;overflow:hidden;text-overflow:ellipsis}
p.night{margin:2px 0 6px}
"""
#: A status's badge: its CSS class and its words.
_BADGES = {"new": ("new", "new tonight"), "still failing": ("still", "still failing"), "fixed": ("fixed", "fixed"),
           "unchecked": ("unchecked", "unchecked")}


#: The counts a kernel's night in the history holds.
_COUNTS = ("pass", "fail", "not_run", "examples", "findings")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _night(report: Report) -> Mapping[str, Any] | None:
    night = report.run.get("nights")
    return night if isinstance(night, Mapping) else None


def _problem(night: Mapping[str, Any]) -> str | None:
    """What keeps ``night`` from being drawn, or None."""
    if not isinstance(night.get("night"), int) or not isinstance(night.get("counts"), Mapping):
        return "it has no 'night' number or no 'counts'"
    rows = night.get("findings")
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) and r.get("status") in _BADGES for r in rows):
        return f"its 'findings' are not objects each with a 'status' among {tuple(_BADGES)}"
    history = night.get("history")
    if not isinstance(history, Mapping) or not isinstance(history.get("nights"), list) or not isinstance(
            history.get("kernels"), Mapping):
        return "its 'history' has no 'nights' list or no 'kernels' object"
    for kernel, cells in history["kernels"].items():
        for cell in cells if isinstance(cells, list) else ():
            bad = next((k for k in _COUNTS if isinstance(cell, Mapping) and not isinstance(cell.get(k, 0), int)), None)
            if bad is not None:
                return f"its history of {kernel!r} has {bad}={cell[bad]!r}, not a whole number"
    return None


def when(stamp: Any) -> str:
    """``night 2 (2025-06-01 02:00 UTC)`` for a stamp; ``before the nights were counted`` for
    none (an entry older than the history)."""
    if not isinstance(stamp, Mapping) or not isinstance(stamp.get("night"), int):
        return "before the nights were counted"
    at = str(stamp.get("at", ""))
    return f"night {stamp['night']}" + (f" ({at[:16].replace('T', ' ')} UTC)" if at else "")


def _badge(status: str) -> str:
    css, words = _BADGES[status]
    return f'<span class="b {css}">{_e(words)}</span>'


def status_counts(counts: Mapping[str, Any]) -> str:
    """``1 new, 1 still failing, 1 fixed`` (unchecked only when there are some)."""
    return ", ".join(f"{counts.get(s, 0)} {s}" for s in _BADGES if counts.get(s) or s != "unchecked")


def night_summary(night: Mapping[str, Any]) -> str:
    """``night 2: 1 new, 1 still failing, 1 fixed`` (``status_counts``)."""
    counts = night.get("counts") if isinstance(night.get("counts"), Mapping) else {}
    return f"night {night.get('night')}: {status_counts(counts)}"


def finding_night(report: Report, index: int) -> str:
    """The line under finding ``index`` (0-based) of the report: its status tonight, and the
    nights it was first and last seen; "" outside a fuzz night."""
    night = _night(report)
    if night is None or _problem(night) is not None:
        return ""
    row = next((r for r in night["findings"] if r.get("finding") == index), None)
    if row is None:
        return ""
    return (f'<p class="night">{_badge(row["status"])} first seen {_e(when(row.get("first_seen")))}, '
            f'last seen {_e(when(row.get("last_seen")))}</p>')


def _finding_cell(row: Mapping[str, Any]) -> str:
    what = f"{row.get('kind')} in {row.get('kernel')} on {row.get('backend')}" + (
        f" ({row['transform']})" if row.get("transform") else "")
    index = row.get("finding")
    text = f'<a href="#finding-{index + 1}">{_e(what)}</a>' if isinstance(index, int) else _e(what)
    return text + (f'<div class="why">{_e(row["why"])}</div>' if row.get("why") else "")


def _history_cell(night: Mapping[str, Any], cells: Any) -> str:
    label = when(night)
    if not isinstance(cells, Mapping):
        return f'<td><span class="b none" title="{_e(label)}: not fuzzed">-</span></td>'
    counts = {k: cells.get(k, 0) for k in _COUNTS}  # whole numbers (_problem)
    title = (f"{label}: {counts['pass']} cells passed, {counts['fail']} failed, {counts['not_run']} did not run; "
             f"{counts['examples']} examples, {counts['findings']} findings")
    if counts["fail"]:
        css, text = "fail", f"FAIL {counts['fail']}"
    elif counts["pass"]:
        css, text = "pass", "PASS"
    else:
        css, text = "not_reached", "-"
    return f'<td><span class="b {css}" title="{_e(title)}">{_e(text)}</span></td>'


def _history(history: Mapping[str, Any]) -> str:
    nights: Sequence[Any] = history["nights"]
    head = "".join(f'<th title="{_e(when(n))}">{_e(n.get("night") if isinstance(n, Mapping) else "?")}</th>'
                   for n in nights)
    rows = []
    for kernel, cells in history["kernels"].items():
        cells = cells if isinstance(cells, list) else []
        row = "".join(_history_cell(n, cells[i] if i < len(cells) else None) for i, n in enumerate(nights))
        rows.append(f'<tr><th class="k" title="{_e(kernel)}">{_e(kernel)}</th>{row}</tr>')
    return (f'<h3>the last {len(nights)} nights, per kernel</h3><table class="history">'
            f"<tr><th>night</th>{head}</tr>{''.join(rows)}</table>")


def nights_section(report: Report) -> str:
    """The night's section: the statuses of its findings and the kernels' history."""
    night = _night(report)
    if night is None:
        return ""
    problem = _problem(night)
    if problem is not None:
        return f"<h2>night</h2><p>The report's run.nights cannot be shown: {_e(problem)}.</p>"
    rows = "".join(f"<tr><td>{_badge(r['status'])}</td><td>{_finding_cell(r)}</td>"
                   f"<td>{_e(when(r.get('first_seen')))}</td><td>{_e(when(r.get('last_seen')))}</td></tr>"
                   for r in night["findings"])
    table = (f'<table class="nights"><tr><th>status</th><th>finding</th><th>first seen</th><th>last seen</th></tr>'
             f"{rows}</table>" if rows else "<p>No findings tonight, and none in the failure database.</p>")
    return (f"<h2>{_e(night_summary(night))}</h2><p>{_e(when(night))}; failure database "
            f"<code>{_e(night.get('db', ''))}</code></p>{table}{_history(night['history'])}")
