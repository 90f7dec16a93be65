"""The comparison of two reports: what changed between two runs, cell by cell.

Two ``report.json`` files (of verify, conformance, fuzz or demo) are compared per cell: a
kernel and a column of its ``kernels[].results`` (``backend`` or ``backend+transform``).
A cell whose verdict changed falls in one category (``CATEGORIES``), by its status in the
old report and in the new one (None: the report has no such cell):

- ``new failure``: pass, unsupported, skipped or none -> fail (a regression);
- ``fixed``: fail -> pass;
- ``still failing``: fail -> fail (``Change.kinds_changed``: whether its finding kinds did);
- ``new n/a``: pass or fail -> unsupported (an upstream limitation met, or an API gone);
- ``n/a gone``: unsupported -> pass;
- ``added``: none -> anything but fail; ``removed``: anything -> none;
- ``not comparable``: any other change (skipped, interrupted, not_reached or error on
  either side): never a regression nor a fix.

A cell's findings are the report's findings of its kernel, backend (or ``static``) and
transform, matched across the two reports by (kernel, backend, transform, kind); each is
shown by its kind and the first line of its message. The reports are read as JSON, not
through ``Report.from_dict``: a report of another pallas-verify release, with fields or
kinds this one does not know, still compares. The comparison's exit status is 1 when it
holds a new failure, else 0 (``exits``); a file that is not a report is a usage error.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pallas_verify.errors import InvalidArgument
from pallas_verify.exits import EXIT_CLEAN, EXIT_FINDINGS
from pallas_verify.findings import row_for

__all__ = ["CATEGORIES", "FACTS", "Category", "Change", "Comparison", "Fact", "Seen", "classify", "compare_files",
           "compare_reports", "first_line", "load_report", "report_cells", "report_jax_version"]

Category = Literal["new failure", "fixed", "still failing", "new n/a", "n/a gone", "added", "removed",
                   "not comparable"]
CATEGORIES: tuple[str, ...] = get_args(Category)
_BEFORE_A_REGRESSION = (None, "pass", "unsupported", "skipped")  # a cell's old status a new failure may have


@dataclasses.dataclass(frozen=True, kw_only=True)
class Seen:
    """A finding as a comparison shows it.

    Attributes:
      kind: its kind (``mismatch``, ``exception``, ...).
      backend: the backend that showed it (``static`` for the grid check).
      message: the first line of its message ("" for a failed cell whose report holds no
        finding of that kind, e.g. one written while its unit still ran).
    """

    kind: str
    backend: str
    message: str = ""

    def text(self) -> str:
        """``"exception: AttributeError: ..."``: the kind, then the message's first line."""
        return f"{self.kind}: {self.message}" if self.message else self.kind


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    """One cell whose verdict changed (or that fails in both reports).

    Attributes:
      kernel, cell: the cell's coordinates (``cell``: its ``kernels[].results`` key).
      category: one of CATEGORIES.
      old, new: the cell's status in the old and the new report; None where it has none.
      was, now: its findings in each, one per kind (empty unless that status is ``fail``).
      why_old, why_new: its ``reason`` in each (why unsupported, skipped, not reached).
    """

    kernel: str
    cell: str
    category: Category
    old: str | None
    new: str | None
    was: tuple[Seen, ...] = ()
    now: tuple[Seen, ...] = ()
    why_old: str = ""
    why_new: str = ""

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"Change category={self.category!r} is not one of {CATEGORIES}")

    @property
    def kinds_changed(self) -> bool:
        """Whether the kinds of its findings differ between the two reports."""
        return {s.kind for s in self.was} != {s.kind for s in self.now}

    @property
    def differs(self) -> bool:
        """Whether its verdict differs between the two reports (a cell failing alike in
        both, with the same finding kinds, does not)."""
        return self.category != "still failing" or self.kinds_changed

    @property
    def appeared(self) -> tuple[Seen, ...]:
        """Its findings in the new report of a kind the old one did not show there."""
        return tuple(s for s in self.now if s.kind not in {w.kind for w in self.was})

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {**data, "was": list(data["was"]), "now": list(data["now"])}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        seen = {k: tuple(Seen(**s) for s in data.get(k, ())) for k in ("was", "now")}
        return cls(**{**data, **seen})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fact:
    """A top-level fact of both runs (``jax_version``, ``profile``, ``seed``, ...); None
    where a report does not say."""

    name: str
    old: Any
    new: Any

    @property
    def differs(self) -> bool:
        """Whether the two runs differ in it."""
        return self.old != self.new


@dataclasses.dataclass(frozen=True, kw_only=True)
class Comparison:
    """What changed from the report at ``old_path`` to the one at ``new_path``.

    Attributes:
      old_path, new_path: the reports compared ("" for reports given as dicts).
      facts: the top-level facts of both (``FACTS``), in that order.
      changes: the cells that changed or fail in both, by kernel and cell, old report's
        order first.
      unchanged: how many cells have the same verdict in both and do not fail.
    """

    old_path: str
    new_path: str
    facts: tuple[Fact, ...] = ()
    changes: tuple[Change, ...] = ()
    unchanged: int = 0

    def of(self, category: Category) -> tuple[Change, ...]:
        """The changes of one category."""
        return tuple(c for c in self.changes if c.category == category)

    @property
    def regressions(self) -> tuple[Change, ...]:
        """The new failures."""
        return self.of("new failure")

    @property
    def status(self) -> int:
        """The exit status: 1 when there is a new failure, else 0."""
        return EXIT_FINDINGS if self.regressions else EXIT_CLEAN

    def fact(self, name: str) -> Fact | None:
        """The fact named ``name`` (one of ``FACTS``), or None."""
        return next((f for f in self.facts if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """``compare.json`` (docs/report-json.md, "compare.json")."""
        return {"version": 1, "old": self.old_path, "new": self.new_path,
                "facts": [dataclasses.asdict(f) for f in self.facts],
                "counts": {c: len(self.of(c)) for c in CATEGORIES}, "unchanged": self.unchanged,
                "changes": [c.to_dict() for c in self.changes], "exit_status": self.status}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        return cls(old_path=data["old"], new_path=data["new"], facts=tuple(Fact(**f) for f in data["facts"]),
                   changes=tuple(Change.from_dict(c) for c in data["changes"]), unchanged=data["unchanged"])


def classify(old: str | None, new: str | None) -> Category | None:
    """The category of a cell whose status went from ``old`` to ``new`` (None: absent);
    None when its verdict did not change and it does not fail."""
    if old == new:
        return "still failing" if old == "fail" else None
    if new == "fail":
        return "new failure" if old in _BEFORE_A_REGRESSION else "not comparable"
    if old is None:
        return "added"
    if new is None:
        return "removed"
    if (old, new) == ("fail", "pass"):
        return "fixed"
    if new == "unsupported" and old in ("pass", "fail"):
        return "new n/a"
    return "n/a gone" if (old, new) == ("unsupported", "pass") else "not comparable"


FACTS = ("jax_version", "profile", "seed", "backends", "interrupted", "invalid_specs")


def compare_reports(old: Mapping[str, Any], new: Mapping[str, Any], *, old_path: str = "",
                    new_path: str = "") -> Comparison:
    """The comparison of two report dicts (as ``load_report`` reads them)."""
    before, after = report_cells(old), report_cells(new)
    changes, unchanged = [], 0
    for key in [*before, *(k for k in after if k not in before)]:
        was, now = before.get(key, {}), after.get(key, {})
        category = classify(was.get("status"), now.get("status"))
        if category is None:
            unchanged += 1
            continue
        changes.append(Change(kernel=key[0], cell=key[1], category=category, old=was.get("status"),
                              new=now.get("status"), was=_seen(old, key, was), now=_seen(new, key, now),
                              why_old=str(was.get("reason", "")), why_new=str(now.get("reason", ""))))
    facts = tuple(Fact(name=n, old=_fact(old, n), new=_fact(new, n)) for n in FACTS)
    return Comparison(old_path=old_path, new_path=new_path, facts=facts, changes=tuple(changes), unchanged=unchanged)


def compare_files(old: str | Path, new: str | Path) -> Comparison:
    """The comparison of two report files (or folders holding a ``report.json``)."""
    old_path, new_path = _report_path(old), _report_path(new)
    return compare_reports(load_report(old_path), load_report(new_path), old_path=str(old_path),
                           new_path=str(new_path))


def _report_path(path: str | Path) -> Path:
    path = Path(path)
    return path / "report.json" if path.is_dir() and (path / "report.json").is_file() else path


def load_report(path: str | Path) -> dict[str, Any]:
    """A report file's JSON, checked to be a report; InvalidArgument naming ``path`` and
    what is wrong otherwise."""
    path = _report_path(path)
    fix = "give a report.json written by pallas-verify verify, conformance, fuzz or demo"
    if not path.exists():
        raise InvalidArgument(f"{str(path)!r} does not exist; {fix}.")
    if path.is_dir():
        raise InvalidArgument(f"{str(path)!r} is a folder without a report.json; {fix}.")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidArgument(f"{str(path)!r} is not a report: it cannot be read as JSON ({exc}); {fix}.") from None
    problem = _not_a_report(data)
    if problem:
        raise InvalidArgument(f"{str(path)!r} is not a report: {problem}; {fix}.")
    return data


def _not_a_report(data: Any) -> str | None:
    """What keeps ``data`` from being a report (version 1), or None."""
    if not isinstance(data, dict):
        return f"it holds a JSON {type(data).__name__}, not an object"
    if data.get("version") != 1:
        return f"its 'version' is {data.get('version')!r}, not 1 (a report.json of this pallas-verify)"
    kernels, findings = data.get("kernels"), data.get("findings")
    if not isinstance(kernels, list) or not all(isinstance(k, dict) and isinstance(k.get("name"), str)
                                                and isinstance(k.get("results", {}), dict) for k in kernels):
        return "it has no 'kernels' list of objects, each with a 'name' and a 'results' object"
    if not isinstance(findings, list) or not all(isinstance(f, dict) and {"kind", "kernel", "backend"} <= f.keys()
                                                 for f in findings):
        return "it has no 'findings' list of objects, each with a 'kind', 'kernel' and 'backend'"
    return None


def report_cells(report: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Every cell of a report (as ``load_report`` reads it) by (kernel, column)."""
    return {(k["name"], column): cell for k in report["kernels"] for column, cell in k.get("results", {}).items()}


def _seen(report: Mapping[str, Any], key: tuple[str, str], cell: Mapping[str, Any]) -> tuple[Seen, ...]:
    """A failed cell's findings, one per kind: the report's findings of its kernel, row
    (``findings.row_of``) and transform, then the kinds its ``reason`` lists that none showed."""
    if cell.get("status") != "fail":
        return ()
    backend = str(cell.get("backend", key[1].partition("+")[0]))
    transform = cell.get("transform", key[1].partition("+")[2] or None)
    kinds: dict[str, Seen] = {}
    for f in report["findings"]:
        if f["kernel"] == key[0] and row_for(f["kind"], f["backend"]) == backend and f.get("transform") == transform:
            kinds.setdefault(f["kind"], Seen(kind=f["kind"], backend=f["backend"],
                                             message=first_line(f.get("message", ""))))
    for kind in str(cell.get("reason", "")).split(", "):
        if kind and kind not in kinds:
            kinds[kind] = Seen(kind=kind, backend=backend)
    return tuple(kinds.values())


def first_line(text: object) -> str:
    """The first non-blank line of ``text``, stripped."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def _fact(report: Mapping[str, Any], name: str) -> Any:
    if name == "jax_version":
        return report_jax_version(report)
    if name == "invalid_specs":
        return len(report.get("invalid_specs", ()))
    return report.get(name)


def report_jax_version(report: Mapping[str, Any]) -> str | None:
    """The JAX release a report's run ran on: its top-level ``jax_version`` (or ``jax``),
    else the one its upstream limitations were reproduced on; None when it does not say."""
    for key in ("jax_version", "jax"):
        if isinstance(report.get(key), str):
            return report[key]
    upstream: Iterable[Mapping[str, Any]] = (u for k in report.get("kernels", ()) for u in k.get("upstream", ()))
    return next((u["jax_version"] for u in upstream if isinstance(u.get("jax_version"), str)), None)
