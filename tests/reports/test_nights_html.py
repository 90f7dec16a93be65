"""The night in the HTML report: each finding's status, first and last seen, linked to its
section; the kernels' nights; a report without a night draws none, and a run.nights not of
the documented form is said in one line, never drawn half."""

from __future__ import annotations

import copy
import html
import re

import pytest

from pallas_verify.reports.html import html_page
from pallas_verify.reports.nights_html import finding_night, nights_section
from tests.reports import _pages


def test_each_status_links_its_finding_and_says_when_it_was_first_and_last_seen():
    report = _pages.fuzz_night_2()
    section = nights_section(report)
    rows = re.findall(r'<tr><td><span class="b (\w+)">[^<]*</span></td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>',
                      section)
    assert [(r[0], r[2][:7], r[3][:7]) for r in rows] == [
        ("new", "night 2", "night 2"), ("still", "night 1", "night 2"), ("still", "night 1", "night 2"),
        ("fixed", "night 1", "night 1")]
    assert rows[0][1] == '<a href="#finding-3">out_of_bounds in rotated_index_map on static</a>'
    assert rows[3][1] == "mismatch in block_tril on tpu_interpret"  # fixed: not in tonight's findings
    history = section.split('<table class="history">')[1]
    tril = history.split('title="block_tril">block_tril</th>')[1].split("</tr>")[0]
    assert re.findall(r'<span class="b (\w+)"', tril) == ["fail", "pass"]
    assert finding_night(report, 2).startswith('<p class="night"><span class="b new">new tonight</span> first seen '
                                               "night 2 (2025-06-16 15:06 UTC)")


def test_a_report_without_a_night_draws_none():
    report = _pages.verify_findings()
    assert nights_section(report) == "" and finding_night(report, 0) == ""
    assert '<p class="night">' not in html_page(report)


@pytest.mark.parametrize(("damage", "why"), [
    (lambda n: n.pop("counts"), "it has no 'night' number or no 'counts'"),
    (lambda n: n["findings"][0].update(status="gone"), "its 'findings' are not objects each with a 'status' among"),
    (lambda n: n["history"].pop("kernels"), "its 'history' has no 'nights' list or no 'kernels' object"),
    (lambda n: n["history"]["kernels"]["block_tril"][-1].update({"pass": "x"}),
     "its history of 'block_tril' has pass='x', not a whole number"),
])
def test_a_night_not_of_the_documented_form_is_said_in_one_line(damage, why):
    report = _pages.fuzz_night_2()
    report.run = copy.deepcopy(report.run)
    damage(report.run["nights"])
    page = html_page(report)
    assert "<p>The report's run.nights cannot be shown: " + html.escape(why) in page
    assert '<table class="nights">' not in page and '<p class="night">' not in page
