"""versions.html: the kernel x JAX release table beside versions.json, each cell's change
from the release before outlined and said, changed rows first; loaded in headless
Chromium; versions data that is not a versions.json is refused saying why."""

from __future__ import annotations

import html
import json
import re

import pytest

from pallas_verify.campaigns.versions import write_matrix
from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.compare import load_report
from pallas_verify.reports.versions_html import versions_page
from tests.reports import _browser, _pages


@pytest.fixture
def written(tmp_path):
    matrix = _pages.versions(tmp_path)
    return matrix, write_matrix(matrix, tmp_path)


def _row(page: str, kernel: str, cell: str) -> list[str]:
    """The release cells (``<td ...>...</td>``) of one row of the table."""
    row = re.search(rf'<tr data-kernel="{kernel}" data-changed="\d"><th class="k"[^>]*>{kernel}</th>'
                    rf'<th class="cell">{re.escape(cell)}</th>(.*?)</tr>', page)
    assert row, f"no row {kernel} {cell}"
    return re.findall(r"<td.*?</td>", row.group(1))


def test_the_page_is_written_beside_versions_json_with_a_column_per_release_that_has_a_report(written, tmp_path):
    matrix, paths = written
    assert paths["html"] == tmp_path / "versions.html" and paths["json"] == tmp_path / "versions.json"
    page = paths["html"].read_text()
    assert re.findall(r"<th>jax ([\d.]+)</th>", page) == ["0.10.2", "0.11.2", "0.12.0.1"]  # 0.10.1 has none
    assert "no report: cannot start: making the environment of jax 0.10.1 failed" in page
    assert json.loads(paths["json"].read_text()) == json.loads(json.dumps(matrix.to_dict()))


def test_a_cell_whose_verdict_changed_is_outlined_by_how_and_says_what_changed(written):
    page = written[1]["html"].read_text()
    fixed = _row(page, "recip", "interpret")
    assert fixed[0].startswith('<td class="">') and "FAIL exception" in fixed[0]
    assert fixed[1].startswith('<td class="better" title="0.10.2 -&gt; 0.11.2: fixed: fail -&gt; pass (was '
                               "exception: AttributeError: module &#x27;jax.experimental.pallas.tpu&#x27;")
    assert fixed[2].startswith('<td class="">')  # works on both 0.11.2 and 0.12.0.1: no change
    broke = _row(page, "flash_attention", "interpret")
    assert broke[2].startswith('<td class="worse" title="0.11.2 -&gt; 0.12.0.1: new failure: pass -&gt; fail: '
                               "mismatch: outputs differ beyond the tolerance")
    assert _row(page, "scale_shift", "tpu_interpret+vmap")[2].startswith('<td class="worse" title="0.11.2 -&gt; '
                                                                        "0.12.0.1: new n/a: pass -&gt; n/a: TPU")
    assert all(td.startswith('<td class="">') for td in _row(page, "poly", "interpret"))


def test_rows_that_changed_come_first_and_the_steps_say_each_change(written):
    page = written[1]["html"].read_text()
    flags = re.findall(r'data-changed="(\d)"', page)
    assert flags == ["1"] * 4 + ["0"] * 11
    assert "(4 of 15 rows changed between releases)" in page
    steps = page.split("<h2>what changed between releases</h2>")[1]
    assert "<h3>jax 0.10.2 &rarr; 0.11.2 (2 changed)</h3>" in steps
    assert "<h3>jax 0.11.2 &rarr; 0.12.0.1 (2 changed)</h3>" in steps
    assert '<span class="b pass" title="">PASS</span> &rarr; <span class="b fail" title="mismatch">FAIL mismatch' in steps


def test_strings_from_the_reports_are_escaped(written):
    paths = written[1]
    data = json.loads(paths["json"].read_text())
    reports = {r["jax"]: load_report(r["report"]) for r in data["runs"] if r["report"]}
    reports["0.11.2"]["kernels"][0]["name"] = "<script>alert(1)</script>"
    page = versions_page(data, reports)
    assert "<script>alert(1)</script>" not in page
    assert html.escape("<script>alert(1)</script>") in page


@pytest.mark.parametrize(("data", "message"), [
    ([], "versions data is not a versions.json of version 1 (list)"),
    ({"version": 2, "runs": [], "comparisons": []}, "versions data is not a versions.json of version 1 (dict)"),
    ({"version": 1, "runs": [{"report": "r.json"}], "comparisons": []},
     "versions data has no 'runs' list of objects each with a 'jax' release"),
    ({"version": 1, "runs": [], "comparisons": [{"old_jax": "0.11.2"}]},
     "versions data has no 'comparisons' list of objects each with 'old_jax', 'new_jax' and 'changes'"),
])
def test_data_that_is_not_a_versions_json_is_refused_saying_why(data, message):
    with pytest.raises(InvalidArgument, match=re.escape(message) + ".*give the versions.json that"):
        versions_page(data, {})


@pytest.mark.slow
def test_the_versions_page_loads_in_chromium_without_errors_or_sideways_scrolling(written, tmp_path):
    dom, probe = _browser.load(written[1]["html"], tmp_path)
    assert probe["errors"] == []
    assert probe["scroll"] <= probe["client"] == _browser.WIDTH
    assert len(probe["rows"]) == 15
    assert probe["changed"] == ["recip", "recip", "scale_shift", "flash_attention"]  # "changed only"
    assert dom.count('<td class="worse"') == 2 + 2 and dom.count('<td class="better"') == 2 + 2  # table and steps
