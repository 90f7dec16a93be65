"""A comparison of two reports as text: the terminal summary and ``compare.md``
(``compare_html`` writes the files, ``compare.json`` the source of truth)."""

from __future__ import annotations

import textwrap

from pallas_verify.reports.compare import CATEGORIES, Change, Comparison
from pallas_verify.reports.matrix import CELL_LABELS

__all__ = ["WIDTH", "detail", "label", "markdown", "summary_lines", "wrap"]

WIDTH = 100  # terminal lines wrap here
_SHOWN = 8  # changes listed per category in the terminal summary
_LINES = 3  # terminal lines one change may take


def wrap(line: str, *, indent: str = "", width: int = WIDTH) -> list[str]:
    """``line`` as terminal lines of at most ``width`` characters, the first indented by
    ``indent`` and the rest by four more; at most three, ``...`` marking a cut."""
    return textwrap.wrap(line, width, initial_indent=indent, subsequent_indent=indent + "    ", max_lines=_LINES,
                         placeholder=" ...", break_on_hyphens=False) or [indent.rstrip()]


def label(status: str | None) -> str:
    """A cell status as the matrix shows it, in lower case (``n/a``, ``not reached``);
    ``absent`` where the report has no such cell."""
    return CELL_LABELS.get(status, status).lower() if status else "absent"


def detail(change: Change) -> str:
    """What changed in a cell, in one line: the statuses, then its findings or its reason."""
    was, now = "; ".join(s.text() for s in change.was), "; ".join(s.text() for s in change.now)
    move = f"{label(change.old)} -> {label(change.new)}"
    match change.category:
        case "new failure":
            return f"{move}: " + "; ".join(s.text() for s in change.appeared or change.now)
        case "fixed":
            return f"{move} (was {was})"
        case "still failing" if change.kinds_changed:
            kinds = ", ".join(s.kind for s in change.was) + " -> " + ", ".join(s.kind for s in change.now)
            new = "; ".join(s.text() for s in change.appeared)
            return f"kinds changed: {kinds}" + (f" (new: {new})" if new else "")
        case "still failing":
            return f"same kinds: {now}"
        case "new n/a":
            return f"{move}: {change.why_new}"
        case "n/a gone":
            return f"{move} (was: {change.why_old})"
    why = change.why_new or change.why_old
    return move + (f": {why}" if why else "")


def summary_lines(comparison: Comparison, *, shown: int = _SHOWN, width: int = WIDTH) -> list[str]:
    """The terminal summary: the reports' paths, the facts that differ (the JAX release
    always), up to ``shown`` changes per category, and the counts; lines wrap at ``width``."""
    lines = [f"old: {comparison.old_path or '-'}", f"new: {comparison.new_path or '-'}"]
    for fact in comparison.facts:
        if fact.differs or (fact.name == "jax_version" and fact.old is not None):
            text = f"{_value(fact.old)} -> {_value(fact.new)}" if fact.differs else _value(fact.old)
            lines += wrap(f"{fact.name}: {text}", width=width)
    for category in CATEGORIES:
        changes = comparison.of(category)
        if changes:
            lines.append(f"{category} ({len(changes)}):")
            for c in changes[:shown]:
                lines += wrap(f"{c.kernel} {c.cell}: {detail(c)}", indent="  ", width=width)
            if len(changes) > shown:
                lines.append(f"  ... and {len(changes) - shown} more (--out DIR writes every one to compare.json)")
    counts = [f"{len(comparison.of(c))} {c}" for c in CATEGORIES if comparison.of(c)]
    return lines + wrap(f"{', '.join(counts) or 'no changes'}; {comparison.unchanged} cells unchanged", width=width)


def _value(value: object) -> str:
    """A fact's value as text: a list as its items, None as ``-``."""
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return "-" if value is None else str(value)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(comparison: Comparison) -> str:
    """``compare.md``: the facts, then a table per category with every change."""
    lines = ["# Comparison", "", f"Old: `{comparison.old_path}`, new: `{comparison.new_path}`.", "",
             "| fact | old | new |", "|---|---|---|"]
    lines += [f"| {f.name} | {_cell(_value(f.old))} | {_cell(_value(f.new))} |" for f in comparison.facts]
    for category in CATEGORIES:
        changes = comparison.of(category)
        if changes:
            lines += ["", f"## {category} ({len(changes)})", "", "| kernel | cell | what changed |", "|---|---|---|"]
            lines += [f"| {_cell(c.kernel)} | {_cell(c.cell)} | {_cell(detail(c))} |" for c in changes]
    lines += ["", f"{comparison.unchanged} cells unchanged; exit status {comparison.status}."]
    return "\n".join(lines) + "\n"
