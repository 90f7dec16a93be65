"""The kernel x backend matrix as text: one line per kernel, its reasons summarised once.

::

    kernel       interpret  tpu_interpret  mosaic_tpu:
                                           v4   v5e
    ragged_add   PASS       PASS           PASS PASS
      +vmap      PASS       n/a            PASS PASS

    n/a   TPU interpret mode (JAX 0.12) cannot run jax.vmap of a pallas_call that ...
            ragged_add+vmap on tpu_interpret
    pass  compiled only (no device attached)
            ragged_add, ragged_add+vmap on mosaic_tpu:*

A kernel's transforms (``+vmap``) are lines under it. Backends ``family:target`` share a
header (``mosaic_tpu:`` over ``v4 v5e``). Each distinct reason is printed once with the
cells it covers; a reason that starts with its backend's name reads "the backend ..." so
the same reason on many backends is one entry.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

from pallas_verify.reports.groups import matrix_groups
from pallas_verify.reports.report import BackendResult, Report

__all__ = ["CELL_LABELS", "covered", "matrix_lines", "reason_lines", "shared_reason", "tally"]

#: What a cell of each status shows; a cell with no result shows "-".
CELL_LABELS = {"pass": "PASS", "fail": "FAIL", "unsupported": "n/a", "skipped": "skip", "interrupted": "stop",
               "not_reached": "not reached", "error": "error"}
_REASON_ORDER = ("error", "unsupported", "skipped", "interrupted", "not_reached", "pass")  # a failure's reason is its findings
_WIDTH = 100  # reasons wrap here
_Row = tuple[str, str | None]  # (kernel, transform)


def _family(backend: str) -> tuple[str | None, str]:
    """``("mosaic_tpu", "v5e")`` for ``mosaic_tpu:v5e``; ``(None, name)`` for ``interpret``."""
    family, sep, target = backend.partition(":")
    return (family, target) if sep else (None, backend)


def _columns(report: Report) -> list[str]:
    seen = dict.fromkeys(report.backends)
    seen.update(dict.fromkeys(r.backend for r in report.results))
    return list(seen)


def _rows(report: Report) -> list[_Row]:
    rows: dict[_Row, None] = {}
    names = [k["name"] for k in report.kernels]
    names += [r.kernel for r in report.results if r.kernel not in names]
    for name in dict.fromkeys(names):
        rows[(name, None)] = None
        rows.update(((name, r.transform), None) for r in report.results if r.kernel == name and r.transform)
    return list(rows)


def _groups(columns: Sequence[str]) -> list[tuple[str | None, list[str]]]:
    """Consecutive columns of one family share a header; others stand alone."""
    groups: list[tuple[str | None, list[str]]] = []
    for name in columns:
        family = _family(name)[0]
        if family is not None and groups and groups[-1][0] == family:
            groups[-1][1].append(name)
        else:
            groups.append((family, [name]))
    return groups


def _widths(groups: Sequence[tuple[str | None, list[str]]], labels: Iterable[str]) -> dict[str, int]:
    widths: dict[str, int] = {}
    label = max(map(len, labels))
    for family, names in groups:
        for name in names:
            widths[name] = max(len(_family(name)[1]), label)
        if family is not None:  # the family's header must fit over its targets
            short = len(family) + 1 - (sum(widths[n] for n in names) + len(names) - 1)
            widths[names[-1]] += max(short, 0)
    return widths


def _row_label(row: _Row) -> str:
    return row[0] if row[1] is None else f"  +{row[1]}"


def _cell_name(row: _Row) -> str:
    return row[0] if row[1] is None else f"{row[0]}+{row[1]}"


def matrix_lines(report: Report) -> list[str]:
    """The header (backend names) and one line per kernel and per kernel transform. A matrix
    wider than ``_WIDTH`` is split by the kernels' platforms (``groups.matrix_groups``):
    a table per group, failures first, without the backends that ran nothing for it, and
    a group's table still too wide in parts of its columns (its kernel column in each)."""
    columns, rows = _columns(report), _rows(report)
    lines = _table(report, columns, rows)
    groups = matrix_groups(report)
    if max(map(len, lines)) <= _WIDTH or (len(groups) == 1 and not groups[0].folded):
        return lines
    out: list[str] = []
    for group in groups:
        shown = [c for c in group.columns if c not in group.folded]
        title = f"{' + '.join(group.platforms) or 'other'} kernels"
        folded = _backends_text([c for c in group.columns if c in group.folded], columns)
        out += ["" if out else None, title + (f" (folded, nothing ran on them: {folded})" if folded else "")]
        for i, part in enumerate(_fitting(report, shown or columns, list(group.rows))):
            out += [""] * (i > 0) + _table(report, part, list(group.rows))
    return [line for line in out if line is not None]


def _fitting(report: Report, columns: Sequence[str], rows: Sequence[_Row]) -> list[list[str]]:
    """``columns`` in consecutive parts whose tables fit ``_WIDTH`` (a family stays whole)."""
    parts: list[list[str]] = []
    current: list[str] = []
    for _, names in _groups(columns):
        if current and max(map(len, _table(report, [*current, *names], rows))) > _WIDTH:
            parts.append(current)
            current = []
        current += names
    return [*parts, current] if current else parts


def _table(report: Report, columns: Sequence[str], rows: Sequence[_Row]) -> list[str]:
    groups = _groups(columns)
    shown = {CELL_LABELS[r.status] for r in report.results}
    widths = _widths(groups, [*shown, *(v for k, v in CELL_LABELS.items() if k != "not_reached")])
    first = max([len("kernel"), *(len(_row_label(r)) for r in rows)]) + 2
    cells = {(r.kernel, r.transform, r.backend): r for r in report.results}

    def line(label: str, text_of: dict[str, str]) -> str:
        parts = [" ".join(text_of[n].ljust(widths[n]) for n in names) for _, names in groups]
        return (label.ljust(first) + "  ".join(parts)).rstrip()

    lines = [_header_line("kernel".ljust(first), groups, widths)]
    if any(fam is not None for fam, _ in groups):
        lines.append(line("", {n: (_family(n)[1] if _family(n)[0] else "") for n in columns}))
    for row in rows:
        text = {n: CELL_LABELS[c.status] if (c := cells.get((*row, n))) else "-" for n in columns}
        lines.append(line(_row_label(row), text))
    return lines


def _header_line(start: str, groups: Sequence[tuple[str | None, list[str]]], widths: dict[str, int]) -> str:
    """Backend names; a family's name spans its targets' columns."""
    parts = []
    for family, names in groups:
        span = sum(widths[n] for n in names) + len(names) - 1
        parts.append((f"{family}:" if family else names[0]).ljust(span))
    return (start + "  ".join(parts)).rstrip()


def shared_reason(result: BackendResult) -> str:
    """The reason, with a leading backend name read as "the backend" (shared across backends)."""
    if result.reason.startswith(f"{result.backend} "):
        return "the backend" + result.reason[len(result.backend):]
    return result.reason


def _backends_text(names: Iterable[str], columns: Sequence[str]) -> str:
    """Backend names, a family every column of which is named written ``family:*``."""
    names = list(names)
    out: list[str] = []
    for family, members in _groups(columns):
        chosen = [n for n in members if n in names]
        if family is not None and len(members) > 1 and chosen == members:
            out.append(f"{family}:*")
        else:
            out.extend(chosen)
    return ", ".join(out)


def covered(cells: Sequence[tuple[_Row, str]], rows: Sequence[_Row], columns: Sequence[str]) -> str:
    """``"a, a+vmap on x, y; b on z"``: the cells, rows with the same backends together."""
    by_row: dict[_Row, list[str]] = {}
    for row, backend in cells:
        by_row.setdefault(row, []).append(backend)
    together: dict[tuple[str, ...], list[_Row]] = {}
    for row in (r for r in rows if r in by_row):
        key = tuple(n for n in columns if n in by_row[row])
        together.setdefault(key, []).append(row)
    return "; ".join(f"{', '.join(map(_cell_name, rs))} on {_backends_text(bs, columns)}"
                     for bs, rs in together.items())


def reason_lines(report: Report) -> list[str]:
    """Each distinct reason of a cell once, under its status, with the cells it covers."""
    columns, rows = _columns(report), _rows(report)
    reasons: dict[tuple[str, str], list[tuple[_Row, str]]] = {}
    for r in report.results:
        if r.reason and r.status in _REASON_ORDER:
            reasons.setdefault((r.status, shared_reason(r)), []).append(((r.kernel, r.transform), r.backend))
    lines: list[str] = []
    for (status, reason), cells in sorted(reasons.items(), key=lambda kv: _REASON_ORDER.index(kv[0][0])):
        label = (CELL_LABELS[status].lower() + " ").ljust(6)
        lines += textwrap.wrap(reason, _WIDTH, initial_indent=label, subsequent_indent=" " * 6)
        lines += textwrap.wrap(covered(cells, rows, columns), _WIDTH, initial_indent=" " * 8,
                               subsequent_indent=" " * 10, break_on_hyphens=False)
    return lines


def tally(results: Iterable[BackendResult]) -> str:
    """``"20 PASS, 1 n/a, 15 skip"``: how many cells have each status."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{counts[s]} {CELL_LABELS[s]}" for s in CELL_LABELS if s in counts) or "no cells"
