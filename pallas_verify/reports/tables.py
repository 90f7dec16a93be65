"""A report as tables for Markdown and HTML: the summary, and the kernel x backend grid
(each transform a column of its own)."""

from __future__ import annotations

from pallas_verify.reports.matrix import CELL_LABELS
from pallas_verify.reports.nights_html import night_summary
from pallas_verify.reports.report import BackendResult, Report

__all__ = ["FEATURE_LEGEND", "feature_rows", "matrix_rows", "summary_pairs"]


def _kernel_names(report: Report) -> list[str]:
    names = [k["name"] for k in report.kernels]
    return names + sorted({r.kernel for r in report.results} - set(names))


def matrix_rows(report: Report) -> tuple[list[str], list[tuple[str, list[BackendResult | None]]]]:
    """Column labels (each backend, then ``backend+transform`` for each transform run
    there) and one row of cells per kernel."""
    backends = list(dict.fromkeys([*report.backends, *(r.backend for r in report.results)]))
    transforms = sorted({r.transform for r in report.results if r.transform})
    present = {(r.backend, r.transform) for r in report.results}
    columns = [(b, t) for b in backends for t in (None, *transforms) if t is None or (b, t) in present]
    cells = {(r.kernel, r.backend, r.transform): r for r in report.results}
    labels = [b if t is None else f"{b}+{t}" for b, t in columns]
    return labels, [(k, [cells.get((k, b, t)) for b, t in columns]) for k in _kernel_names(report)]


#: What a cell of the feature x backend table says.
FEATURE_LEGEND = ("per feature (the specs' features): kernels passing / kernels run on each backend; "
                  "n/a, skip or stop when none ran")
_WORST = ("fail", "error", "interrupted", "pass", "unsupported", "skipped")  # a kernel's status on a backend: its worst cell's
NO_FEATURE = "(no features)"


def feature_rows(report: Report) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The feature x backend table: backend labels, and per feature tag (a spec's
    ``features``; kernels without any under NO_FEATURE) one text per backend."""
    backends = list(dict.fromkeys([*report.backends, *(r.backend for r in report.results)]))
    status: dict[tuple[str, str], str] = {}
    for r in report.results:
        old = status.get((r.kernel, r.backend))
        if r.status in _WORST and (old is None or _WORST.index(r.status) < _WORST.index(old)):
            status[(r.kernel, r.backend)] = r.status
    features: dict[str, list[str]] = {}
    for kernel in report.kernels:
        for tag in kernel.get("features") or [NO_FEATURE]:
            features.setdefault(tag, []).append(kernel["name"])
    rows = []
    for tag in sorted(features, key=lambda t: (t == NO_FEATURE, t)):
        texts = []
        for b in backends:
            seen = [status[(k, b)] for k in features[tag] if (k, b) in status]
            ran = [s for s in seen if s in ("pass", "fail")]
            if ran:
                texts.append(f"{ran.count('pass')}/{len(ran)}")
            else:
                texts.append(CELL_LABELS[min(seen, key=_WORST.index)] if seen else "")
        rows.append((tag, texts))
    return backends, rows


def summary_pairs(report: Report) -> list[tuple[str, str]]:
    by_status = {s: sum(r.status == s for r in report.results) for s in CELL_LABELS}
    return [
        ("kernels", str(len(_kernel_names(report)))),
        ("cells", ", ".join(f"{n} {s}" for s, n in by_status.items() if n) or "none"),
        ("findings", str(len(report.findings))),
        ("seed", str(report.seed) if report.seed is not None else "not recorded"),
        ("profile", report.profile),
        ("seconds", f"{report.seconds:.1f}"),
        ("interrupted", "yes" if report.interrupted else "no"),
        *_run_pairs(report.run),
    ]


def _run_pairs(run: dict) -> list[tuple[str, str]]:
    """A campaign's night (fuzz), lost and retried units and its notes (the report's run section)."""
    night = run.get("nights")
    pairs = [("night", night_summary(night).removeprefix("night "))] if isinstance(night, dict) else []
    for key, label in (("lost", "lost units"), ("retried", "retried units")):
        units = run.get(key) or []
        if units:
            causes = sorted({u.get("cause", "?") for u in units})
            pairs.append((label, f"{len(units)} ({', '.join(causes)})"))
    pairs += [("note", str(note)) for note in run.get("notes", [])]
    return pairs
