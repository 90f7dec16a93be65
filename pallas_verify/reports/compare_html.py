"""A comparison of two reports as one self-contained HTML page (``compare.html``): the
facts of both, then each category's changes, each cell's old and new verdict as the
matrix's badges and what changed in words (``compare_text.detail``); and the files
``pallas-verify compare --out DIR`` writes."""

from __future__ import annotations

import html
import json
from pathlib import Path

from pallas_verify.reports.compare import CATEGORIES, Comparison
from pallas_verify.reports.compare_text import detail, markdown
from pallas_verify.reports.html_matrix import MATRIX_CSS
from pallas_verify.reports.matrix import CELL_LABELS
from pallas_verify.reports.report import write_atomic

__all__ = ["compare_page", "write_comparison"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2329;max-width:1320px}
h1{font-size:22px}h2{font-size:17px;margin-top:24px}table{border-collapse:collapse}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f6f8fa}
td.what{max-width:760px;overflow-wrap:anywhere}h2.bad{color:#cf222e}h2.good{color:#1a7f37}.differs{font-weight:600}
"""
_TONE = {"new failure": "bad", "still failing": "bad", "fixed": "good", "n/a gone": "good"}


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _badge(status: str | None) -> str:
    if status is None:
        return '<span class="b skipped">absent</span>'
    return f'<span class="b {_e(status)}">{_e(CELL_LABELS.get(status, status))}</span>'


def _value(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return "-" if value is None else str(value)


def compare_page(comparison: Comparison, *, title: str = "pallas-verify comparison") -> str:
    """The page: facts (those that differ in bold), a table per category, the counts."""
    facts = "".join(f'<tr class="{"differs" if f.differs else ""}"><th>{_e(f.name)}</th><td>{_e(_value(f.old))}</td>'
                    f"<td>{_e(_value(f.new))}</td></tr>" for f in comparison.facts)
    parts = [f"<h1>{_e(title)}</h1><p>old: <code>{_e(comparison.old_path)}</code><br>new: "
             f"<code>{_e(comparison.new_path)}</code></p>",
             f"<table><tr><th>fact</th><th>old</th><th>new</th></tr>{facts}</table>"]
    for category in CATEGORIES:
        changes = comparison.of(category)
        if not changes:
            continue
        rows = "".join(f"<tr><th>{_e(c.kernel)}</th><td>{_e(c.cell)}</td><td>{_badge(c.old)} &rarr; {_badge(c.new)}"
                       f'</td><td class="what">{_e(detail(c))}</td></tr>' for c in changes)
        parts.append(f'<h2 class="{_TONE.get(category, "")}">{_e(category)} ({len(changes)})</h2><table>'
                     f"<tr><th>kernel</th><th>cell</th><th>verdict</th><th>what changed</th></tr>{rows}</table>")
    counts = ", ".join(f"{len(comparison.of(c))} {c}" for c in CATEGORIES if comparison.of(c)) or "no changes"
    parts.append(f"<p>{_e(counts)}; {comparison.unchanged} cells unchanged; exit status {comparison.status}.</p>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}{MATRIX_CSS}</style></head><body>{''.join(parts)}</body></html>\n")


def write_comparison(comparison: Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write ``compare.md``, ``compare.html`` and (last: the source of truth) ``compare.json``
    under ``out_dir``; their paths by format."""
    out = Path(out_dir)
    paths = {"md": write_atomic(out / "compare.md", markdown(comparison)),
             "html": write_atomic(out / "compare.html", compare_page(comparison))}
    return {"json": write_atomic(out / "compare.json", json.dumps(comparison.to_dict(), indent=2) + "\n"), **paths}
