"""A report as Markdown: summary, the kernel x backend matrix, each finding."""

from __future__ import annotations

from pallas_verify.reports.matrix import CELL_LABELS
from pallas_verify.reports.report import Report
from pallas_verify.reports.tables import FEATURE_LEGEND, feature_rows, matrix_rows, summary_pairs
from pallas_verify.reports.text import finding_text, upstream_lines

__all__ = ["markdown"]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: Report) -> str:
    """Summary, the kernel x backend matrix, the upstream limitations met, and each finding
    with its reproducer."""
    out = ["# pallas-verify report", ""]
    out += [f"- **{k}**: {_md_cell(v)}" for k, v in summary_pairs(report)] + [""]
    backends, rows = matrix_rows(report)
    if rows and backends:
        out.append("| kernel | " + " | ".join(_md_cell(b) for b in backends) + " |")
        out.append("|---" * (len(backends) + 1) + "|")
        for kernel, cells in rows:
            marks = [CELL_LABELS[c.status] if c else "" for c in cells]
            out.append(f"| {_md_cell(kernel)} | " + " | ".join(marks) + " |")
        out.append("")
    backends, features = feature_rows(report)
    if features and backends:
        out += ["| feature | " + " | ".join(_md_cell(b) for b in backends) + " |", "|---" * (len(backends) + 1) + "|"]
        out += [f"| {_md_cell(tag)} | " + " | ".join(texts) + " |" for tag, texts in features]
        out += ["", f"_{FEATURE_LEGEND}_", ""]
    upstream = [f"- `{_md_cell(k['name'])}`: {_md_cell(line.strip())}" for k in report.kernels for line in upstream_lines(k)]
    if upstream:  # JAX's failures, not findings: each with a plain-jax reproducer to report
        out += ["## Upstream limitations", "", *upstream, ""]
    for i, finding in enumerate(report.findings, 1):
        out += [f"## {i}. `{finding.kind}` in `{_md_cell(finding.kernel)}` on `{finding.backend}`", "",
                "```", finding_text(finding).replace("```", "'''"), "```", ""]
    return "\n".join(out)
