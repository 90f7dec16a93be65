"""A report in plain text: each finding as a terminal block, and terminal summaries."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from pallas_verify.findings import Finding
from pallas_verify.reports.heatmap import blame_maps, text_heatmap
from pallas_verify.reports.matrix import matrix_lines, reason_lines, tally
from pallas_verify.reports.report import BackendResult, Report, cell_key, jsonable

__all__ = ["cell_findings", "finding_text", "findings_text", "print_matrix", "print_summary", "reproduce_command"]


def cell_findings(report: Report, result: BackendResult) -> list[Finding]:
    """The findings of one kernel x backend cell (static grid findings count for every cell)."""
    return [f for f in report.findings
            if f.kernel == result.kernel and f.backend in (result.backend, "static")
            and f.transform == result.transform]


def reproduce_command(finding: Finding) -> str | None:
    """The one-line command that re-runs a finding's minimal case."""
    return f"python {finding.reproducer}" if finding.reproducer else None


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


def findings_text(findings: Sequence[Finding]) -> str:
    """Several findings as terminal blocks separated by blank lines."""
    return "\n\n".join(finding_text(f) for f in findings)


def print_summary(report: Report, file: TextIO | None = None) -> None:
    """Per kernel: one line per backend; then each finding with its reproducer.
    ``file``: default the current ``sys.stdout`` (looked up at the call, not at import)."""
    file = file or sys.stdout
    for kernel in report.kernels:
        print(f"{kernel['name']}", file=file)
        for note in kernel.get("static_skipped", ()):
            print(f"  note: {note}", file=file)
        for r in (r for r in report.results if r.kernel == kernel["name"]):
            detail = r.effort if r.status in ("pass", "fail") else ""
            why = f" ({r.reason})" if r.reason else ""
            print(f"  {cell_key(r):<22} {r.status.upper():<11} {detail}{why}", file=file)
    _print_tail(report, file)


def print_matrix(report: Report, file: TextIO | None = None) -> None:
    """The kernel x backend matrix (one line per kernel), each reason once, then the findings.
    ``file``: default the current ``sys.stdout``."""
    file = file or sys.stdout
    print("\n".join(matrix_lines(report)), file=file)
    reasons = reason_lines(report)
    reasons += [f"note  {k['name']}: {note}" for k in report.kernels for note in k.get("static_skipped", ())]
    if reasons:
        print("\n" + "\n".join(reasons), file=file)
    _print_tail(report, file, cells=f" ({tally(report.results)})")


def _print_tail(report: Report, file: TextIO, cells: str = "") -> None:
    """Invalid specs, each finding with its reproducer, and the count."""
    for bad in report.invalid:
        print(f"{bad.get('kernel') or bad.get('target')}\n  INVALID SPEC: {bad['reason']}", file=file)
    for unit in report.run.get("lost", []):
        print(f"LOST UNIT {unit.get('unit', '?')} ({unit.get('cause')}, {unit.get('attempts', 1)} attempts): "
              f"{str(unit.get('message', '')).splitlines()[0] if unit.get('message') else ''}", file=file)
    for f in report.findings:
        print(f"\n{finding_text(f)}\nfirst seen after {f.elapsed_s:.1f} s", file=file)
    n = len(report.findings)
    print(f"\n{n} finding{'s' if n != 1 else ''} in {report.seconds:.1f} s{cells}", file=file)
