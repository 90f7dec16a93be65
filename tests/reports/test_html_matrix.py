"""The HTML matrix: one badge per cell, reasons once in a legend, backends that ran nothing
folded, failures first, and every page kind loaded in headless Chromium."""

from __future__ import annotations

import dataclasses
import html
import re

import pytest

from pallas_verify.reports.groups import matrix_groups
from pallas_verify.reports.html import html_page
from pallas_verify.reports.html_matrix import html_features, html_matrix
from pallas_verify.reports.render import write_reports
from tests.reports import _browser, _pages


def _badges(page: str) -> list[str]:
    return re.findall(r'<span class="b (\w+)"', page)


def test_a_reason_repeated_down_a_column_is_written_once_with_a_mark_in_each_cell():
    page, reason = html_matrix(_pages.conformance()), html.escape(_pages.LONG_NA)
    assert page.count(reason) == 1 + 6  # once in the legend, else only as hover text
    legend = page[page.index('<ol class="legend">'):]
    assert legend.count(reason) == 1
    mark = re.search(r'<li id="reason-(\d+)" value="\d+"><span class="b unsupported">n/a</span> '
                     + re.escape(reason[:40]), legend)
    assert mark, legend[:400]
    assert page.count(f'<a href="#reason-{mark.group(1)}">{mark.group(1)}</a></sup>') == 6  # tpu_interpret, 5 chips
    assert f'title="{reason[:30]}' in page


def test_skip_reasons_that_differ_only_by_the_backend_share_one_legend_entry():
    legend = html_matrix(_pages.conformance()).split('<ol class="legend">')[1]
    assert legend.count("the backend serves") == 2  # the TPU kernels' one, the GPU kernels' one
    assert "triton:h100 serves" not in legend


def test_each_platform_group_folds_the_backends_that_ran_nothing_for_it():
    groups = {g.platforms: g for g in matrix_groups(_pages.conformance())}
    assert set(groups) == {("tpu",), ("gpu",)}
    assert groups[("tpu",)].folded == frozenset(_pages.GPU)
    assert groups[("gpu",)].folded == frozenset(_pages.TPU[1:])
    page = html_matrix(_pages.conformance())
    assert page.count('<td class="folded">') == 8 * 7 + 3 * 6  # (6 TPU rows + 2 vmap) x 7, 3 GPU rows x 6
    assert 'id="pv-unfold"' in page


def test_rows_are_sorted_failures_first_and_a_failure_badge_names_its_kind_and_links_its_finding():
    report = _pages.conformance()
    rows = [r for g in matrix_groups(report) for r in g.rows]
    assert rows[0] == ("tpu_kernel_4", None)
    assert next(r for r in rows if r[0].startswith("gpu")) == ("gpu_kernel_2", None)
    page = html_page(report)
    assert '<a href="#finding-1">FAIL mismatch</a>' in page
    assert '<a href="#finding-2">FAIL compile_error</a>' in page
    assert 'data-kernel="tpu_kernel_4" data-worst="fail"' in page


def test_every_cell_is_one_badge_and_the_feature_table_uses_the_same_badges():
    report = _pages.conformance()
    assert len(_badges(html_matrix(report).split('<ol class="legend">')[0])) == len(report.results)
    features = html_features(report)
    tiling = features[features.index("<th>tiling</th>"):].split("</tr>")[0]
    assert tiling.count('<span class="b pass">3/3</span>') == 7  # tpu_kernel_1, 3 and 5 on every TPU backend
    assert tiling.count('<span class="b skipped">skip</span>') == 7  # and no GPU backend serves them
    reduction = features[features.index("<th>reduction</th>"):].split("</tr>")[0]
    assert '<span class="b fail">2/3</span>' in reduction  # tpu_kernel_4 fails on mosaic_tpu:v5e
    assert "folded" not in features  # every backend ran some feature
    report.results = [dataclasses.replace(r, status="unsupported", reason="declared") if r.kernel.startswith("gpu")
                      and r.backend == "interpret" else r for r in report.results]
    attention = html_features(report).split("<th>attention</th>")[1].split("</tr>")[0]
    assert attention.startswith('<td class=""><span class="b unsupported">n/a</span>')  # a label, not 0 of 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(_pages.KINDS))
def test_each_report_kind_loads_in_chromium_without_errors_or_sideways_scrolling_and_draws_its_findings(kind, tmp_path):
    report = _pages.KINDS[kind]()
    page = write_reports(report, tmp_path, formats=("html",))["html"]
    dom, probe = _browser.load(page, tmp_path)
    assert probe["errors"] == []
    assert probe["scroll"] <= probe["client"] == _browser.WIDTH
    assert all(right <= _browser.WIDTH for right in probe["tables"])
    assert set(probe["rows"]) == {r.kernel for r in report.results}  # every row shows
    failing = [k for k, _ in dict.fromkeys((r.kernel, r.transform) for r in report.results)
               if any(r.kernel == k and r.status == "fail" for r in report.results)]
    assert sorted(probe["failing"]) == sorted(failing)  # "failing only": a failing kernel's rows, all of them
    if kind == "conformance":
        assert (probe["folded_shown"], probe["unfolded"]) == (False, True)
    sections = dom.split('<section class="finding"')[1:]
    assert len(sections) == len(report.findings)
    for i, (finding, section) in enumerate(zip(report.findings, sections, strict=True), 1):
        assert section.startswith(f' id="finding-{i}"')
        assert f"{finding.kind} in {finding.kernel}" in section
        assert '<pre class="src">' in section  # each finding's source excerpt
        if finding.kind == "mismatch":  # and a mismatch's picture
            assert '<svg xmlns="http://www.w3.org/2000/svg" class="elements"' in section
        if finding.kind in ("race", "out_of_bounds"):  # the static check's: its lines marked, its grid drawn
            assert "<mark " in section
            assert '<svg xmlns="http://www.w3.org/2000/svg" class="grid-picture"' in section
        if kind == "fuzz_night_2":  # its status tonight, first and last seen
            assert re.match(r' id="finding-\d+"><h2>[^<]*</h2><p class="night"><span class="b (new|still)">', section)
    if kind == "fuzz_night_2":
        assert "<h2>night 2: 1 new, 2 still failing, 1 fixed</h2>" in dom
        assert '<table class="history">' in dom and dom.count('<span class="b fixed">fixed</span>') == 1


def test_a_report_without_a_seed_does_not_say_seed_none():
    report = _pages.conformance()
    report.seed = None
    page = html_page(report)
    assert "<dt>seed</dt><dd>not recorded</dd>" in page
    assert "<dd>None</dd>" not in page


@pytest.mark.slow
def test_the_comparison_page_loads_in_chromium_without_errors_or_sideways_scrolling(tmp_path):
    from pallas_verify.reports.compare_html import write_comparison

    comparison = _pages.comparison()
    page = write_comparison(comparison, tmp_path)["html"]
    dom, probe = _browser.load(page, tmp_path)
    assert probe["errors"] == []
    assert probe["scroll"] <= probe["client"] == _browser.WIDTH
    assert '<h2 class="bad">new failure (2)</h2>' in dom
    assert '<h2 class="">new n/a (1)</h2>' in dom
