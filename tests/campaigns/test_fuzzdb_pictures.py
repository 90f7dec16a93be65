"""The failure database keeps a finding's pictures with its reproducer, and drops or
quarantines them with the entry."""

from __future__ import annotations

import json
from pathlib import Path

from pallas_verify.campaigns.fuzzdb import FailureDatabase, signature
from pallas_verify.findings import Finding


def _finding(tmp_path) -> Finding:
    units = tmp_path / "unit"
    units.mkdir()
    (units / "k-mismatch-interpret.py").write_text("# reproducer\n")
    (units / "k-mismatch-interpret.npz").write_bytes(b"npz")
    (units / "k-mismatch-interpret.png").write_bytes(b"\x89PNG first")
    (units / "k-mismatch-interpret-out_1_.png").write_bytes(b"\x89PNG second")
    pictures = [str(units / "k-mismatch-interpret.png"), str(units / "k-mismatch-interpret-out_1_.png")]
    return Finding(kind="mismatch", kernel="k", backend="interpret", message="outputs differ",
                   evidence={"pictures": pictures}, reproducer=str(units / "k-mismatch-interpret.py"))


def test_an_entry_keeps_its_pictures_beside_its_reproducer_and_points_at_them(tmp_path):
    db = FailureDatabase(tmp_path / "db")
    finding = _finding(tmp_path)
    kept = db.add(finding, signature(finding))
    stem = kept.reproducer.rsplit("/", 1)[1][: -len(".py")]
    assert kept.evidence["pictures"] == [str((tmp_path / "db" / f"{stem}.png").resolve()),
                                         str((tmp_path / "db" / f"{stem}-out_1_.png").resolve())]
    assert [Path(p).read_bytes() for p in kept.evidence["pictures"]] == [b"\x89PNG first", b"\x89PNG second"]
    [entry] = db.entries()
    assert json.loads(entry.read_text())["evidence"]["pictures"] == kept.evidence["pictures"]
    db.drop(entry)
    assert list((tmp_path / "db").iterdir()) == []


def test_a_quarantined_entry_takes_its_pictures_along(tmp_path):
    db = FailureDatabase(tmp_path / "db")
    finding = _finding(tmp_path)
    db.add(finding, signature(finding))
    [entry] = db.entries()
    db.quarantine(entry, "unreadable")
    assert sorted(p.suffix for p in db.quarantine_dir.iterdir()) == [".json", ".note", ".npz", ".png", ".png", ".py"]
    assert [p.name for p in (tmp_path / "db").iterdir()] == ["quarantine"]
