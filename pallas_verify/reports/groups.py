"""The kernel x backend matrix split by the platforms its kernels target, for the HTML
page and the terminal alike: one group of rows per set of platforms, its rows failures
first, and the backends none of whose cells in the group ran (every one ``skip``: the
backend serves none of the group's platforms, or is not available here) folded."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pallas_verify.reports.report import BackendResult, Report

__all__ = ["SEVERITY", "MatrixGroup", "Row", "columns_of", "matrix_groups", "worst"]

#: A row's order: its worst cell's status first.
SEVERITY = ("fail", "error", "interrupted", "not_reached", "unsupported", "pass", "skipped")
_FOLDABLE = ("skipped",)
Row = tuple[str, str | None]  # (kernel, transform)


def columns_of(report: Report) -> list[str]:
    """The matrix's backend columns: those asked for, then any other a cell names."""
    return list(dict.fromkeys([*report.backends, *(r.backend for r in report.results)]))


@dataclasses.dataclass(frozen=True)
class MatrixGroup:
    """The kernels that target the same platforms, and the columns they show.

    Attributes:
      platforms: the group's platforms (empty when the report does not say).
      rows: (kernel, transform) rows, failures first.
      columns: every backend column, in the report's order.
      folded: the columns none of whose cells in this group ran (all ``skip`` or empty).
    """

    platforms: tuple[str, ...]
    rows: tuple[Row, ...]
    columns: tuple[str, ...]
    folded: frozenset[str]


def worst(statuses: Iterable[str]) -> str:
    """The most severe of ``statuses`` (SEVERITY's order); ``skipped`` when there is none."""
    return min(statuses, key=lambda s: SEVERITY.index(s) if s in SEVERITY else len(SEVERITY), default="skipped")


def matrix_groups(report: Report) -> list[MatrixGroup]:
    """The matrix split by the kernels' platforms, each group's rows failures first and
    its columns that ran nothing folded."""
    columns = columns_of(report)
    platforms = {k["name"]: tuple(sorted(k.get("platforms") or ())) for k in report.kernels}
    names = list(dict.fromkeys([*(k["name"] for k in report.kernels), *(r.kernel for r in report.results)]))
    by_kernel: dict[str, list[BackendResult]] = {n: [] for n in names}
    for r in report.results:
        by_kernel[r.kernel].append(r)
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        groups.setdefault(platforms.get(name, ()), []).append(name)
    out = []
    for plats, kernels in groups.items():
        kernels.sort(key=lambda k: SEVERITY.index(worst(r.status for r in by_kernel[k])))
        rows: list[Row] = []
        for k in kernels:
            rows.append((k, None))
            rows.extend((k, t) for t in dict.fromkeys(r.transform for r in by_kernel[k] if r.transform))
        cells = [r for k in kernels for r in by_kernel[k]]
        ran = {r.backend for r in cells if r.status not in _FOLDABLE}
        out.append(MatrixGroup(platforms=plats, rows=tuple(rows), columns=tuple(columns),
                               folded=frozenset(c for c in columns if c not in ran)))
    return out


