"""``pallas-verify smith``: a time budget of generated programs through every backend.

The budget is spent in slices; a slice is ``verify(SPEC, backends, slice_examples, seed)``
on the generated-programs spec (``smith.spec``), so the engine, the runner and the oracles
are those of ``verify``: interpreters execute and are compared with the reference and
each other, compile-only backends compile, and a finding shrinks the program itself.
Then, per finding:

- a compile error whose message is a clean "not supported" is coverage (what the
  compiler does not take), not a finding (``NOT_SUPPORTED``);
- the rest are de-duplicated by signature (``fuzzdb.signature``), written as a readable
  reproducer (``smith.repro``) and triaged against the table of known upstream
  limitations (``smith.triage``).

The JSON report is ``Report.to_dict()`` plus ``programs`` (run: per slice, the most
examples one backend ran), ``validity``, ``coverage`` (grammar production -> distinct
programs drawn that use it), ``not_supported`` and ``backends_run`` (per backend:
examples, seconds, programs per minute).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from pallas_verify.choices import run_seed
from pallas_verify.errors import InvalidArgument, check_positive_int
from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report, write_atomic
from pallas_verify.reports.reproduce import file_stem

__all__ = ["GENERATED", "NOT_SUPPORTED", "SmithOptions", "SmithRun", "conformance_rows", "smith"]

# A compiler message that declines a program cleanly (coverage, not a finding).
NOT_SUPPORTED = re.compile(r"not (yet )?supported|unsupported|not implemented|NotImplementedError", re.IGNORECASE)
GENERATED = "generated programs"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SmithOptions:
    """What a smith campaign runs.

    Attributes:
      backends: backend names; default None = every available TPU-capable backend.
      budget_s: wall-time budget in seconds; default 1800.
      out_dir: reports and reproducers; default "pv-smith".
      seed: base seed (slice i uses seed + i); None (default) draws one.
      slice_examples: programs per slice; default 10.
      timeout_s: per-case time limit; default 60.
      isolate: the runner's isolation ("auto", default; "never" keeps interpreters in
        this process, as tests that patch an interpreter need).
      max_grid_points: grid points per program; default 8.
    """

    backends: tuple[str, ...] | None = None
    budget_s: float = 1800.0
    out_dir: Path = Path("pv-smith")
    seed: int | None = None
    slice_examples: int = 10
    timeout_s: float = 60.0
    isolate: str = "auto"
    max_grid_points: int = 8

    def __post_init__(self) -> None:
        for field in ("slice_examples", "max_grid_points"):
            check_positive_int(field, getattr(self, field), example=10)


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
    slices: int = 0

    @property
    def programs(self) -> int:
        """Programs run: per slice, the most examples any one backend ran."""
        return self.examples

    @property
    def validity(self) -> float:
        """Share of programs no requested interpreter rejected (one rejected program per
        interpreter error finding: a search stops at its first failure)."""
        return 1.0 if not self.examples else max(0.0, 1.0 - self.rejected / self.examples)

    def to_dict(self) -> dict[str, Any]:
        rates = {c.backend: {"status": c.status, "examples": c.examples, "seconds": round(c.seconds, 3),
                             "programs_per_minute": round(60 * c.examples / c.seconds, 1) if c.seconds else 0.0}
                 for c in self.cells.values()}
        return {**self.report.to_dict(), "programs": self.programs, "validity": round(self.validity, 4),
                "coverage": dict(sorted(self.coverage.items())), "not_supported": dict(self.not_supported),
                "backends_run": rates, "slices": self.slices}


def _backends(options: SmithOptions) -> list[str]:
    from pallas_verify.backends import registry

    chosen = registry.resolve(options.backends)
    if options.backends is None:
        chosen = [b for b in chosen if b.available() is None and "tpu" in b.platforms]
    if not chosen:
        raise InvalidArgument(f"backends={options.backends!r} leaves no backend to run; name e.g. interpret,tpu_interpret.")
    return [b.name for b in chosen]


def _interpreters(names: list[str]) -> set[str]:
    from pallas_verify.backends import registry

    return {n for n in names if registry.get(n).executes and not registry.get(n).isolate}


def _refused(finding: Finding) -> bool:
    """A compiler's clean "not supported" answer: coverage, not a finding."""
    return finding.kind == "compile_error" and bool(NOT_SUPPORTED.search(finding.message))


def _absorb(run: SmithRun, part: Report, out_dir: Path, interpreters: set[str]) -> list[Finding]:
    """Fold one slice's report into the run; the new findings."""
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
        if old is not None:
            status = "fail" if "fail" in (old.status, r.status) else ("pass" if "pass" in (old.status, r.status) else r.status)
            r = dataclasses.replace(r, status=status, examples=old.examples + r.examples, seconds=old.seconds + r.seconds,
                                    reason=old.reason if old.status == "fail" else r.reason)
        run.cells[r.backend] = r
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


def _slice(options: SmithOptions, spec: Any, backends: list[str], seed: int, remaining: float) -> Report:
    from hypothesis.database import DirectoryBasedExampleDatabase

    from pallas_verify.engine import verify

    return verify(spec, backends, options.slice_examples, seed, out_dir=options.out_dir / "tmp",
                  timeout_s=options.timeout_s, isolate=options.isolate, shrink_budget_s=max(5.0, min(60.0, remaining / 3)),
                  database=DirectoryBasedExampleDatabase(str(options.out_dir / "hypothesis")))


def _spec(options: SmithOptions) -> Any:
    from pallas_verify.campaigns.smith import spec as smith_spec

    if options.max_grid_points == 8:
        return smith_spec.SPEC
    if options.isolate != "never":
        raise InvalidArgument(f"max_grid_points={options.max_grid_points!r} needs isolate='never' (worker processes "
                              "load the module-level SPEC, drawn with 8 grid points); use 8 or isolate='never'.")
    return smith_spec.generated_spec(max_grid_points=options.max_grid_points)


def smith(options: SmithOptions, *, stream: TextIO = sys.stderr) -> SmithRun:
    """Run generated programs for ``options.budget_s`` seconds; write and return the run."""
    from pallas_verify.campaigns.smith import spec as smith_spec
    from strategies.programs import program_productions

    started = time.monotonic()
    seed = run_seed(options.seed)
    backends, spec = _backends(options), _spec(options)
    run = SmithRun(report=Report(seed=seed, profile="dev", backends=backends))
    run.report.kernels.append({"name": GENERATED, "features": ["generated"], "platforms": ["tpu"]})
    interpreters = _interpreters(backends)
    stream.write(f"pallas-verify smith: seed={seed}, backends {','.join(backends)}, budget {options.budget_s:.0f} s\n")
    try:
        while time.monotonic() - started < options.budget_s:
            smith_spec.DRAWN.clear()
            part = _slice(options, spec, backends, (seed + run.slices) % 2**32, options.budget_s - (time.monotonic() - started))
            run.slices += 1
            run.examples += max((r.examples for r in part.results), default=0)
            for source, program in smith_spec.DRAWN.items():
                if source not in run.sources:
                    run.sources.add(source)
                    run.coverage.update(set(program_productions(program)))
            for f in _absorb(run, part, options.out_dir, interpreters):
                stream.write(f"[{f.kind}] on {f.backend}: {f.message.splitlines()[0][:160]} ({f.reproducer})\n")
            stream.write(f"{time.monotonic() - started:6.0f} s: {run.programs} programs, validity {run.validity:.1%}, "
                         f"{len(run.report.findings)} findings\n")
    except KeyboardInterrupt:
        run.report.interrupted = True
    run.report.results = [dataclasses.replace(c, kernel=GENERATED) for c in run.cells.values()]
    run.report.seconds = time.monotonic() - started
    _write(run, options.out_dir)
    shutil.rmtree(options.out_dir / "tmp", ignore_errors=True)
    return run


def _write(run: SmithRun, out_dir: Path) -> dict[str, Path]:
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
