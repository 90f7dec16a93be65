"""What a smith campaign keeps: its counts, its findings, and the reports written from them.

The JSON report is ``Report.to_dict()`` plus ``programs`` (run: per batch, the most
examples one backend ran), ``validity``, ``coverage`` (grammar production -> distinct
programs drawn that use it), ``not_supported``, ``noise`` (findings the recheck showed to
depend on how the reference compiles, not on a backend), ``lost_batches`` and
``backends_run`` (per backend: examples, seconds, programs per minute).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report, write_atomic
from pallas_verify.reports.reproducer import file_stem

__all__ = ["GENERATED", "NOT_SUPPORTED", "SmithRun", "absorb", "conformance_rows", "write_run"]

# A compiler message that declines a program cleanly (coverage, not a finding).
NOT_SUPPORTED = re.compile(r"not (yet )?supported|unsupported|not implemented|NotImplementedError|UNIMPLEMENTED|"
                           r"only .{1,80} (is|are) supported|does not support", re.IGNORECASE)
GENERATED = "generated programs"


@dataclasses.dataclass
class SmithRun:
    """Everything a campaign counted; ``to_dict`` is the JSON report."""

    report: Report
    sources: set[str] = dataclasses.field(default_factory=set)
    coverage: Counter[str] = dataclasses.field(default_factory=Counter)
    not_supported: Counter[str] = dataclasses.field(default_factory=Counter)
    rejected: int = 0
    examples: int = 0
    signatures: set[str] = dataclasses.field(default_factory=set)
    cells: dict[str, BackendResult] = dataclasses.field(default_factory=dict)
    batch_seconds: list[float] = dataclasses.field(default_factory=list)
    noise: list[dict[str, str]] = dataclasses.field(default_factory=list)
    lost: list[str] = dataclasses.field(default_factory=list)

    @property
    def programs(self) -> int:
        """Programs run: per batch, the most examples any one backend ran."""
        return self.examples

    @property
    def slices(self) -> int:
        return len(self.batch_seconds)

    @property
    def validity(self) -> float:
        """Share of programs no requested interpreter rejected (one rejected program per
        interpreter error finding: a search stops at its first failure)."""
        return 1.0 if not self.examples else max(0.0, 1.0 - self.rejected / self.examples)

    def finish(self) -> None:
        """The per-backend cells become the report's results."""
        self.report.results = [dataclasses.replace(c, kernel=GENERATED) for c in self.cells.values()]

    def to_dict(self) -> dict[str, Any]:
        rates = {c.backend: {"status": c.status, "examples": c.examples, "seconds": round(c.seconds, 3),
                             "programs_per_minute": round(60 * c.examples / c.seconds, 1) if c.seconds else 0.0}
                 for c in self.cells.values()}
        wall = self.report.seconds
        return {**self.report.to_dict(), "programs": self.programs, "validity": round(self.validity, 4),
                "programs_per_minute": round(60 * self.programs / wall, 1) if wall else 0.0,
                "coverage": dict(sorted(self.coverage.items())), "not_supported": dict(self.not_supported),
                "noise": self.noise, "lost_batches": self.lost, "backends_run": rates, "slices": self.slices}


def _refused(finding: Finding) -> bool:
    """A compiler's clean "not supported" answer: coverage, not a finding."""
    return finding.kind == "compile_error" and bool(NOT_SUPPORTED.search(finding.message))


def absorb(run: SmithRun, part: Report, out_dir: Path, interpreters: set[str]) -> list[Finding]:
    """Fold one batch's report into the run; the new findings."""
    from pallas_verify.campaigns.fuzzdb import signature
    from pallas_verify.campaigns.smith.repro import write_smith_reproducer
    from pallas_verify.campaigns.smith.triage import triage

    refused = {f.backend for f in part.findings if _refused(f)}
    found = {f.backend for f in part.findings if not _refused(f)}
    for r in part.results:
        if r.status == "fail" and r.backend in refused and r.backend not in found:  # coverage, not a finding
            r = dataclasses.replace(r, status="pass", reason="the compiler does not support some programs "
                                    "(see not_supported)")
        old = run.cells.get(r.backend)
        run.cells[r.backend] = r if old is None else old.combined(r)
    new = []
    for f in part.findings:
        if _refused(f):
            run.not_supported[f"{f.backend}: {f.message.splitlines()[0][:160]}"] += 1
            continue
        if f.backend in interpreters and ("error_type" in f.evidence or f.kind in ("crash", "timeout")):
            run.rejected += 1
        sig = signature(f)
        if sig in run.signatures:
            continue
        run.signatures.add(sig)
        stem = file_stem("smith", f.kind, f.backend, len(run.signatures))
        f = triage(write_smith_reproducer(f, out_dir / "repro", stem))
        run.report.findings.append(f)
        new.append(f)
    return new


def write_run(run: SmithRun, out_dir: Path) -> dict[str, Path]:
    from pallas_verify.campaigns.smith.triage import write_upstream_findings
    from pallas_verify.reports.render import write_reports

    paths = write_reports(run.report, out_dir, formats=("xml", "html", "md"))
    paths["json"] = write_atomic(out_dir / "report.json", json.dumps(run.to_dict(), indent=2) + "\n")
    paths["upstream"] = write_upstream_findings(run.report.findings, out_dir / "upstream-findings.md")
    return paths


def conformance_rows(run: SmithRun) -> Report:
    """The campaign as the conformance matrix's "generated programs" row: per backend,
    programs run, pass/fail and the divergences (findings) it showed."""
    rows = []
    for cell in run.report.results:
        found = [f for f in run.report.findings if f.backend == cell.backend]
        reason = f"{cell.examples} programs, {len(found)} divergences" + (f" ({cell.reason})" if cell.reason else "")
        rows.append(dataclasses.replace(cell, status="fail" if found else cell.status, reason=reason))
    return Report(kernels=list(run.report.kernels), backends=list(run.report.backends), findings=list(run.report.findings),
                  results=rows, seconds=run.report.seconds)
