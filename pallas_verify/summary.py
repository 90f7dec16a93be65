"""Readable terminal summaries of a report."""

from __future__ import annotations

import sys
from typing import TextIO

from pallas_verify.render import finding_text
from pallas_verify.report import Report, cell_key

__all__ = ["print_summary"]


def print_summary(report: Report, file: TextIO = sys.stdout) -> None:
    """Per kernel: one line per backend; then each finding with its reproducer."""
    for kernel in report.kernels:
        print(f"{kernel['name']}", file=file)
        for r in (r for r in report.results if r.kernel == kernel["name"]):
            detail = r.effort if r.status in ("pass", "fail") else ""
            why = f" ({r.reason})" if r.reason else ""
            print(f"  {cell_key(r):<22} {r.status.upper():<11} {detail}{why}", file=file)
    for bad in report.invalid:
        print(f"{bad['kernel']}\n  INVALID SPEC: {bad['reason']}", file=file)
    for f in report.findings:
        print(f"\n{finding_text(f)}\nfirst seen after {f.elapsed_s:.1f} s", file=file)
    n = len(report.findings)
    print(f"\n{n} finding{'s' if n != 1 else ''} in {report.seconds:.1f} s", file=file)
