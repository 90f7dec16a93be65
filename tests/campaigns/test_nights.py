"""Nights over one failure database: each finding new tonight, still failing, fixed or
unchecked, the nights it was first and last seen, each kernel's history, and a history
that cannot be read moved aside."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pallas_verify.campaigns import nights
from pallas_verify.campaigns.fuzzdb import FailureDatabase, signature
from pallas_verify.campaigns.nights import Night
from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report

DAY = 86400.0
T1 = 1_750_000_000.0  # 2025-06-15T15:06:40Z


def _finding(kernel: str, kind: str = "mismatch") -> Finding:
    return Finding(kind=kind, kernel=kernel, backend="interpret", message=f"{kind} in {kernel}")


def _report(findings: list[Finding], cells: dict[str, str]) -> Report:
    results = [BackendResult(kernel=k, backend="interpret", status=s, examples=3) for k, s in cells.items()]
    return Report(kernels=[{"name": k, "features": [], "platforms": ["tpu"]} for k in cells], backends=["interpret"],
                  results=results, findings=findings, seed=1)


def _night(db: FailureDatabase, now: float, found: list[Finding], cells: dict[str, str],
           replays: dict[str, str] | None = None, *, end: bool = True) -> tuple[Night, dict]:
    """One night: ``replays`` (kernel -> verdict) of the entries known, then ``found``."""
    night = Night(db, now=now)
    for kernel, verdict in (replays or {}).items():
        known = next(k for k in night.known.values() if k.finding.kernel == kernel)
        if verdict == "still reproduces":
            db.ran(db.root / known.entry, night.stamp)
        night.replayed(db.root / known.entry, verdict, "its replay could not run: no chip here")
        if verdict == "fixed":
            db.drop(db.root / known.entry)
    for f in found:
        db.add(f, signature(f), seen=night.seen(signature(f)))
    report = _report(found, cells)
    section = night.section(report, final=True)
    if end:
        assert night.end(report) == []
    return night, section


def _statuses(section: dict) -> dict[str, tuple[str, int | None, int | None]]:
    return {r["kernel"]: (r["status"], (r["first_seen"] or {}).get("night"), (r["last_seen"] or {}).get("night"))
            for r in section["findings"]}


def test_a_finding_is_new_then_still_failing_or_fixed_with_the_nights_it_was_first_and_last_seen(tmp_path):
    db = FailureDatabase(tmp_path / "db")
    first, one = _night(db, T1, [_finding("a"), _finding("b")], {"a": "fail", "b": "fail", "c": "pass"})
    assert (first.number, _statuses(one)) == (1, {"a": ("new", 1, 1), "b": ("new", 1, 1)})
    assert one["counts"] == {"new": 2, "still failing": 0, "fixed": 0, "unchecked": 0}
    assert one["at"] == "2025-06-15T15:06:40Z"
    second, two = _night(db, T1 + DAY, [_finding("a"), _finding("c")], {"a": "fail", "b": "pass", "c": "fail"},
                         {"a": "still reproduces", "b": "fixed"})
    assert second.number == 2
    assert _statuses(two) == {"c": ("new", 2, 2), "a": ("still failing", 1, 2), "b": ("fixed", 1, 1)}
    assert [r["status"] for r in two["findings"]] == ["new", "still failing", "fixed"]  # new first
    assert [r["finding"] for r in two["findings"]] == [1, 0, None]  # the index in the report's findings
    assert second.line(two) == f"night 2 of {db.root.resolve()}: 1 new, 1 still failing, 1 fixed"
    entry = next(e for e in db.entries() if e.name.startswith("a-"))
    assert [s["night"] for s in db.stamps(entry)] == [1, 2]  # the entry remembers both nights
    history = two["history"]
    assert [n["night"] for n in history["nights"]] == [1, 2]
    assert [(n or {}).get("fail") for n in history["kernels"]["b"]] == [1, 0]
    assert history["kernels"]["c"][0] == {"pass": 1, "fail": 0, "not_run": 0, "examples": 3, "findings": 0}


def test_an_entry_nothing_said_anything_of_tonight_is_unchecked_and_says_why(tmp_path):
    db = FailureDatabase(tmp_path / "db")
    _night(db, T1, [_finding("a"), _finding("b")], {"a": "fail", "b": "fail"})
    _, two = _night(db, T1 + DAY, [], {"a": "pass", "b": "pass"}, {"a": "cannot run"})
    assert {r["kernel"]: (r["status"], r["why"]) for r in two["findings"]} == {
        "a": ("unchecked", "its replay could not run: no chip here"),
        "b": ("unchecked", "the run ended before its replay")}
    assert Night(db).line(two).endswith("0 new, 0 still failing, 0 fixed, 2 unchecked")


def test_the_history_keeps_its_last_nights_and_the_report_shows_fewer(tmp_path, monkeypatch):
    monkeypatch.setattr(nights, "HISTORY_NIGHTS", 4)
    monkeypatch.setattr(nights, "SHOWN_NIGHTS", 3)
    db = FailureDatabase(tmp_path / "db")
    for n in range(6):
        night, section = _night(db, T1 + n * DAY, [], {"a": "pass"})
        assert night.number == n + 1
    assert [n["night"] for n in section["history"]["nights"]] == [4, 5, 6]
    assert [n["night"] for n in json.loads(db.history_path.read_text())["nights"]] == [3, 4, 5, 6]


@pytest.mark.parametrize("text", ["{", '{"version": 1, "nights": [{"night": "one"}]}', "[]"])
def test_a_history_that_cannot_be_read_is_moved_aside_and_the_nights_start_again(tmp_path, text):
    db = FailureDatabase(tmp_path / "db")
    db.history_path.parent.mkdir(parents=True)
    db.history_path.write_text(text)
    night = Night(db)
    assert night.number == 1 and not db.history_path.exists()
    [note] = night.notes
    assert note.startswith(f"failure database: its history {db.history_path} cannot be read (")
    assert note.endswith("; the nights are counted from 1 again")
    [aside] = db.quarantine_dir.glob("nights-*.json")
    assert aside.read_text() == text


def test_a_history_that_cannot_be_written_is_a_note_not_a_failure(tmp_path):
    db = FailureDatabase(tmp_path / "db")
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "history").write_text("a file where the folder goes")
    night = Night(db)
    [note] = night.end(_report([], {"a": "pass"}))
    assert note.startswith(f"failure database {db.root}: cannot write its history (")
    assert note.endswith("night 1 is not recorded there")


def test_an_entry_whose_case_is_fixed_but_which_the_search_found_again_is_kept(tmp_path):
    from pallas_verify.campaigns import fuzz
    from pallas_verify.campaigns.replay import ReplayEnd
    from pallas_verify.campaigns.units import Arrival
    from pallas_verify.execution import Work
    from pallas_verify.reports.progress import Progress

    db = FailureDatabase(tmp_path / "db")
    _night(db, T1, [_finding("a"), _finding("b")], {"a": "fail", "b": "fail"})
    run = fuzz._Run(options=fuzz.FuzzOptions(out_dir=tmp_path), base=Report(), cells=[],
                    progress=Progress(io.StringIO(), 60), db=db, seed=1)
    run.keep(_finding("a"))  # tonight's search found a again before its replay ended
    entries = {k.finding.kernel: db.root / k.entry for k in run.night.known.values()}
    arrival = Arrival(work=Work(entry="m:f", kind="replay", tag="replay"), result=None)
    for kernel in ("a", "b"):
        run.replayed(arrival, ReplayEnd(entry=entries[kernel], verdict="fixed", fixed=_finding(kernel)))
    assert entries["a"].is_file() and not entries["b"].exists()
    section = run.night.section(Report(findings=list(run.kept.values())), final=True)
    assert _statuses(section) == {"a": ("still failing", 1, 2), "b": ("fixed", 1, 1)}


def test_an_entry_of_an_earlier_release_without_nights_reads_as_before_the_nights_were_counted(tmp_path):
    from pallas_verify.reports.nights_html import when

    db = FailureDatabase(tmp_path / "db")
    db.add(_finding("a"), signature(_finding("a")))  # no nights recorded
    [entry] = db.entries()
    assert db.stamps(entry) == (None, None)
    _, section = _night(db, T1, [_finding("a")], {"a": "fail"})
    assert _statuses(section) == {"a": ("still failing", None, 1)}
    assert when(section["findings"][0]["first_seen"]) == "before the nights were counted"
    assert when(section["findings"][0]["last_seen"]) == "night 1 (2025-06-15 15:06 UTC)"
    assert Path(db.root / entry.name).is_file()
