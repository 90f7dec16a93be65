"""Triage of smith findings: known upstream limitation, or new (for docs/upstream-findings.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from pallas_verify import _jax_compat
from pallas_verify.case import ErrorInfo
from pallas_verify.findings import Finding
from pallas_verify.reports.report import write_atomic

__all__ = ["triage", "write_upstream_findings"]

_WHAT = {
    "mismatch": "the backend's outputs differ from the whole-array reference",
    "backend_divergence": "two executing backends agree with the reference but not with each other",
    "compile_error": "the compiler rejects a program the interpreters run",
    "crash": "the backend aborts the process",
    "exception": "the backend raises on a program valid by construction",
    "timeout": "the backend does not finish the program",
}


def triage(finding: Finding) -> Finding:
    """``finding`` with ``evidence["triage"]``: ``known: <reason>`` when ``_jax_compat``'s
    table of upstream limitations explains it, else ``new: <what kind of divergence>``."""
    error = ErrorInfo(type=str(finding.evidence.get("error_type", finding.kind)), message=finding.message,
                      traceback=str(finding.evidence.get("traceback", "")))
    known = _jax_compat.upstream_limitation(error, backend=finding.backend, transform=finding.transform)
    verdict = f"known: {known}" if known else f"new: {_WHAT.get(finding.kind, finding.kind)}"
    return dataclasses.replace(finding, evidence={**finding.evidence, "triage": verdict})


def write_upstream_findings(findings: Sequence[Finding], path: Path) -> Path:
    """The new findings of a campaign as Markdown: backend, kind, message, reproducer."""
    new = [f for f in findings if str(f.evidence.get("triage", "new")).startswith("new")]
    lines = ["# New findings of this smith campaign", ""]
    if not new:
        lines.append("None: every surviving divergence is a known upstream limitation, or there were none.")
    for i, f in enumerate(new, 1):
        lines += [f"## {i}. {f.kind} on {f.backend}", "", f"- triage: {f.evidence.get('triage')}",
                  f"- reproducer: `{f.reproducer}`", "", "```", f.message.strip()[:2000], "```", ""]
    return write_atomic(path, "\n".join(lines) + "\n")
