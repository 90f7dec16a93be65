"""A report in plain text: each finding as a terminal block, and terminal summaries."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from pallas_verify.findings import Finding, row_of
from pallas_verify.reports.heatmap import blame_maps, text_heatmap, text_legend
from pallas_verify.reports.matrix import matrix_lines, reason_lines, tally
from pallas_verify.reports.report import BackendResult, Report, cell_key, jsonable, unsanitized
from pallas_verify.reports.tables import FEATURE_LEGEND, NO_FEATURE, feature_rows

__all__ = ["cell_findings", "cell_line", "feature_lines", "finding_text", "findings_text", "print_matrix", "print_summary",
           "reproduce_command", "upstream_lines"]


def cell_findings(report: Report, result: BackendResult) -> list[Finding]:
    """The findings of one kernel x backend cell (or of a row that is no backend's:
    ``findings.KERNEL_ROWS``)."""
    return [f for f in report.findings
            if f.kernel == result.kernel and row_of(f) == result.backend and f.transform == result.transform]


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
        lines.append(f"blame map of {label} (rows x columns of blocks; {text_legend(matrix)}):")
        lines.extend(f"  {row}" for row in text_heatmap(matrix))
    blame = evidence.get("blame")
    if isinstance(blame, Mapping) and isinstance(blame.get("message"), str):
        lines.append(f"blame: {blame['message']}")
    lines += _drawn_lines(evidence)
    for key, value in evidence.items():
        if key not in ("outputs", "blame", "traceback", "log", "elements", "source", "pictures"):
            lines.append(f"{key}: {_short(value)}")
    if evidence.get("traceback"):
        lines.append("traceback (last lines):")
        lines.extend(f"  {row}" for row in str(evidence["traceback"]).strip().splitlines()[-8:])
    return lines


def _drawn_lines(evidence: Mapping[str, Any]) -> list[str]:
    """What the HTML page draws, as lines: each bad output's worst elements, the kernel lines
    the finding involves, the PNG pictures."""
    lines = []
    for entry in evidence.get("elements") or ():
        if isinstance(entry, Mapping) and entry.get("worst"):
            lines.append(f"worst elements of {entry.get('path')} (error in units of {entry.get('unit')}):")
            lines += [f"  {tuple(w.get('index', ()))}: kernel {w.get('kernel')}, reference {w.get('reference')}"
                      + (f", float64 {w['float64']}" if w.get("float64") is not None else "")
                      + (f", {w['error']} x the bound" if w.get("error") is not None else ", NaN/inf")
                      for w in entry["worst"] if isinstance(w, Mapping)]
    source = evidence.get("source")
    for block in source.get("blocks", ()) if isinstance(source, Mapping) else ():
        for line, why in block.get("marked", ()):
            text = block["lines"][line - block["start"]].strip() if 0 <= line - block["start"] < len(block["lines"]) else ""
            lines.append(f"source: {source.get('path')}:{line} ({block.get('function')}): {text}  <- {why}")
    lines += [f"picture: {path}" for path in evidence.get("pictures") or ()]
    return lines


def upstream_lines(kernel: Mapping[str, Any]) -> list[str]:
    """A kernel's upstream limitations (JAX's failures, not findings), two lines each."""
    lines = []
    for u in kernel.get("upstream", ()):
        under = f" (under {u['transform']})" if u.get("transform") else ""
        witness = (f"{u['clean_on']} runs the same example clean" if u.get("clean_on") else
                   "no other interpreter runs it either: " + ("; ".join(
                       f"{k}: {v}" for k, v in u.get("also_failing", {}).items()) or "none here serves it"))
        lines.append(f"upstream limitation on {u['backend']}{under}: {u['error']} raised at {u['frame']}; "
                     f"{witness} (config {u['config']})")
        repro = f"python {u['reproducer']}" if u.get("reproducer") else u.get("reproducer_missing", "none")
        lines.append(f"  plain-jax reproducer to report to JAX: {repro}")
    return lines


def findings_text(findings: Sequence[Finding]) -> str:
    """Several findings as terminal blocks separated by blank lines."""
    return "\n\n".join(finding_text(f) for f in findings)


def cell_line(result: BackendResult) -> str:
    """``"interpret              PASS        20 examples, 3.1 s"``: one cell's verdict."""
    why = f" ({result.reason})" if result.reason else ""
    detail = f"{result.searched}{why}".strip()
    return f"{cell_key(result):<22} {result.status.upper():<11} {detail}".rstrip()


def print_summary(report: Report, file: TextIO | None = None) -> None:
    """Per kernel: one line per backend; then each finding with its reproducer.
    ``file``: default the current ``sys.stdout`` (looked up at the call, not at import)."""
    file = file or sys.stdout
    for kernel in report.kernels:
        print(f"{kernel['name']}", file=file)
        for note in kernel.get("static_skipped", ()):
            print(f"  note: {note}", file=file)
        for line in upstream_lines(kernel):
            print(f"  {line}", file=file)
        for r in (r for r in report.results if r.kernel == kernel["name"]):
            print(f"  {cell_line(r)}", file=file)
        for line in unsanitized(kernel, report.results, report.backends):
            print(f"  judged without a sanitizer on {line}", file=file)
    _print_tail(report, file)


_WIDTH = 100


def feature_lines(report: Report) -> list[str]:
    """The feature x backend table as text (rows: the specs' ``features``), then its legend."""
    backends, rows = feature_rows(report)
    if not rows or not backends or all(tag == NO_FEATURE for tag, _ in rows):
        return []
    first = max(len("feature"), *(len(tag) for tag, _ in rows)) + 2
    widths = [max(len(b), *(len(texts[i]) for _, texts in rows)) for i, b in enumerate(backends)]
    parts: list[list[int]] = [[]]
    for i, w in enumerate(widths):  # columns in parts that fit 100 characters, each with the feature column
        if parts[-1] and first + sum(widths[j] + 2 for j in parts[-1]) + w > _WIDTH:
            parts.append([])
        parts[-1].append(i)
    lines: list[str] = []
    for part in parts:
        lines += [""] * bool(lines) + ["feature".ljust(first) + "  ".join(backends[i].ljust(widths[i]) for i in part)]
        lines += [tag.ljust(first) + "  ".join(texts[i].ljust(widths[i]) for i in part) for tag, texts in rows]
    return [line.rstrip() for line in lines] + textwrap.wrap(f"({FEATURE_LEGEND})", _WIDTH)


def print_matrix(report: Report, file: TextIO | None = None) -> None:
    """The kernel x backend matrix (one line per kernel), each reason once, then the findings.
    ``file``: default the current ``sys.stdout``."""
    file = file or sys.stdout
    print("\n".join(matrix_lines(report)), file=file)
    features = feature_lines(report)
    if features:
        print("\n" + "\n".join(features), file=file)
    reasons = reason_lines(report)
    reasons += [line for k in report.kernels for note in k.get("static_skipped", ())
                for line in textwrap.wrap(f"note  {k['name']}: {note}", _WIDTH, subsequent_indent=" " * 6)]
    reasons += [f"{k['name']}: {line}" for k in report.kernels for line in upstream_lines(k)]
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
    stopped = " (interrupted: the cells not finished are marked so)" if report.interrupted else ""
    bare = sum(bool(unsanitized(k, report.results, report.backends)) for k in report.kernels)
    if bare:
        print(f"\n{bare} kernel{'s' if bare != 1 else ''} judged without a sanitizer on some platform: their PASS "
              "checked outputs only (see each kernel's lines)", file=file)
    print(f"\n{n} finding{'s' if n != 1 else ''} in {report.seconds:.1f} s{cells}{stopped}", file=file)
