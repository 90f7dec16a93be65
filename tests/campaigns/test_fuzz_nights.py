"""Two real fuzz nights over one failure database: night 1 finds two planted bugs; by night 2
one kernel is fixed, one still fails and a third has broken. The second night's report
says which is which, when each was first and last seen, and each kernel's two nights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.campaigns.test_fuzz import BUGGY, _run

pytestmark = pytest.mark.xdist_group("fuzz_nights")  # one worker runs the nights once for all

# kernel -> its index_map's shift on night 1 and on night 2 (1: reads the next block, a bug)
SHIFTS = {"still_broken": (1, 1), "fixed_by_night_2": (1, 0), "broken_on_night_2": (0, 1)}


def _write_specs(folder: Path, night: int) -> list[str]:
    files = []
    for kernel, shifts in SHIFTS.items():
        path = folder / f"{kernel}.py"
        path.write_text(BUGGY.format(shift=shifts[night - 1]).replace('name="plus_one"', f'name="{kernel}"'))
        files.append(path.name)
    return files


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory) -> tuple[Path, list[str]]:
    """The output folder after the two nights, and what each night printed (run once: the
    module's tests share an xdist group, so one worker runs them all)."""
    folder, said = tmp_path_factory.mktemp("fuzz_nights"), []
    for night in (1, 2):
        files = _write_specs(folder, night)
        done = _run(["fuzz", *files, "--backends", "interpret", "--budget", "240s", "--workers", "1",
                     "--slice-examples", "2", "--max-slices", "3", "--out", "out", "--seed", str(night)], folder, 420)
        assert done.returncode == 1, done.stderr
        said.append(done.stderr)
    return folder / "out", said


@pytest.mark.slow
def test_the_second_night_says_what_is_new_still_failing_and_fixed(two_nights):
    out, said = two_nights
    assert "night 1 of " in said[0] and ": 2 new, 0 still failing, 0 fixed" in said[0]
    assert ": 1 new, 1 still failing, 1 fixed" in said[1]
    report = json.loads((out / "report.json").read_text())
    night = report["run"]["nights"]
    assert (night["night"], night["db"]) == (2, str((out / "db").resolve()))
    rows = {r["kernel"]: r for r in night["findings"]}
    assert {k: r["status"] for k, r in rows.items()} == {"broken_on_night_2": "new", "still_broken": "still failing",
                                                         "fixed_by_night_2": "fixed"}
    assert {k: (r["first_seen"]["night"], r["last_seen"]["night"]) for k, r in rows.items()} == {
        "broken_on_night_2": (2, 2), "still_broken": (1, 2), "fixed_by_night_2": (1, 1)}
    for kernel in ("broken_on_night_2", "still_broken"):  # each links its finding in tonight's report
        assert report["findings"][rows[kernel]["finding"]]["kernel"] == kernel
    assert rows["fixed_by_night_2"]["finding"] is None
    history = night["history"]
    assert [n["night"] for n in history["nights"]] == [1, 2]
    failed = {k: [n["fail"] for n in history["kernels"][k]] for k in SHIFTS}
    assert failed == {"still_broken": [1, 1], "fixed_by_night_2": [1, 0], "broken_on_night_2": [0, 1]}
    kept = {json.loads(p.read_text())["kernel"] for p in (out / "db").glob("*.json")}
    assert kept == {"still_broken", "broken_on_night_2"}  # the fixed one's entry is dropped
    assert [n["night"] for n in json.loads((out / "db/history/nights.json").read_text())["nights"]] == [1, 2]
    page = (out / "report.html").read_text()
    assert page.count('<span class="b new">new tonight</span>') == 2  # in the night's table and under the finding
    assert page.count('<span class="b still">still failing</span>') == 2
    assert page.count('<span class="b fixed">fixed</span>') == 1


@pytest.mark.slow
def test_the_second_nights_page_loads_in_chromium_and_draws_each_finding(two_nights, tmp_path):
    from tests.reports import _browser

    out, _ = two_nights
    dom, probe = _browser.load(out / "report.html", tmp_path)
    assert probe["errors"] == []
    assert probe["scroll"] <= probe["client"] == _browser.WIDTH
    sections = dom.split('<section class="finding"')[1:]
    assert len(sections) == 2
    for section in sections:
        assert '<p class="night">' in section
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="elements"' in section  # the mismatch drawn
