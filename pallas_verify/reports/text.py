"""Readable terminal summaries of a report."""

from __future__ import annotations

import sys
from typing import TextIO

from pallas_verify.reports.matrix import matrix_lines, reason_lines, tally
from pallas_verify.reports.render import finding_text
from pallas_verify.reports.report import Report, cell_key

__all__ = ["print_matrix", "print_summary"]


def print_summary(report: Report, file: TextIO = sys.stdout) -> None:
    """Per kernel: one line per backend; then each finding with its reproducer."""
    for kernel in report.kernels:
        print(f"{kernel['name']}", file=file)
        for note in kernel.get("static_skipped", ()):
            print(f"  note: {note}", file=file)
        for r in (r for r in report.results if r.kernel == kernel["name"]):
            detail = r.effort if r.status in ("pass", "fail") else ""
            why = f" ({r.reason})" if r.reason else ""
            print(f"  {cell_key(r):<22} {r.status.upper():<11} {detail}{why}", file=file)
    _print_tail(report, file)


def print_matrix(report: Report, file: TextIO = sys.stdout) -> None:
    """The kernel x backend matrix (one line per kernel), each reason once, then the findings."""
    print("\n".join(matrix_lines(report)), file=file)
    reasons = reason_lines(report)
    reasons += [f"note  {k['name']}: {note}" for k in report.kernels for note in k.get("static_skipped", ())]
    if reasons:
        print("\n" + "\n".join(reasons), file=file)
    _print_tail(report, file, cells=f" ({tally(report.results)})")


def _print_tail(report: Report, file: TextIO, cells: str = "") -> None:
    """Invalid specs, each finding with its reproducer, and the count."""
    for bad in report.invalid:
        print(f"{bad['kernel']}\n  INVALID SPEC: {bad['reason']}", file=file)
    for f in report.findings:
        print(f"\n{finding_text(f)}\nfirst seen after {f.elapsed_s:.1f} s", file=file)
    n = len(report.findings)
    print(f"\n{n} finding{'s' if n != 1 else ''} in {report.seconds:.1f} s{cells}", file=file)
