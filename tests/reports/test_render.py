"""Renderings of a Report: JUnit XML, Markdown, and an HTML page checked in headless Chromium."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pallas_verify.findings import Finding
from pallas_verify.reports.heatmap import blame_maps, heatmap_svg, text_heatmap, text_legend
from pallas_verify.reports.html import html_page
from pallas_verify.reports.junit import junit_xml
from pallas_verify.reports.markdown import markdown
from pallas_verify.reports.render import write_reports
from pallas_verify.reports.report import BackendResult, Report
from pallas_verify.reports.text import finding_text
from tests.reports import _browser

EVIL = "<script>document.title='pwned'</script>"
BLOCKS = [[0.0, 0.5, 0.0], [0.0, 2.0, float("inf")]]


def _report() -> Report:
    finding = Finding(kind="mismatch", kernel="evil_kernel", backend="interpret",
                      message=f"outputs differ {EVIL}\nout: 12/48 bad", config={"block": 8, "note": EVIL},
                      evidence={"outputs": ["out: 12/48 bad"], "blame": {"block_errors": BLOCKS, "message": "row 1"}},
                      reproducer="/tmp/r/evil_kernel-mismatch-interpret.py")
    results = [
        BackendResult(kernel="evil_kernel", backend="interpret", status="fail", reason="mismatch", examples=3),
        BackendResult(kernel="evil_kernel", backend="tpu_interpret", status="pass", examples=3),
        BackendResult(kernel="evil_kernel", backend="triton:h100", status="skipped", reason=f"gpu only {EVIL}"),
        BackendResult(kernel="ok", backend="interpret", status="unsupported", reason="needs a TPU"),
    ]
    return Report(kernels=[{"name": "evil_kernel"}, {"name": "ok"}], backends=["interpret", "tpu_interpret", "triton:h100"],
                  findings=[finding], results=results, seed=5, profile="ci", seconds=1.5)


def test_junit_has_one_testcase_per_cell_with_failures_and_skips():
    root = ET.fromstring(junit_xml(_report()))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "2")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {("evil_kernel", "interpret"), ("evil_kernel", "tpu_interpret"),
                          ("evil_kernel", "triton:h100"), ("ok", "interpret")}
    failure = cases[("evil_kernel", "interpret")].find("failure")
    assert failure is not None
    assert failure.get("type") == "mismatch"
    assert EVIL in (failure.text or "")  # escaped by XML, intact once parsed
    assert "reproduce: python /tmp/r/evil_kernel-mismatch-interpret.py" in (failure.text or "")
    assert cases[("ok", "interpret")].find("skipped") is not None


def test_finding_text_has_config_evidence_blame_and_command():
    text = finding_text(_report().findings[0])
    assert "[mismatch] evil_kernel on interpret" in text
    assert "minimal config: {'block': 8" in text
    assert "blame: row 1" in text
    assert "  .-.\n  .@X" in text  # the blame map, as characters
    assert text.rstrip().endswith("reproduce: python /tmp/r/evil_kernel-mismatch-interpret.py")


def test_text_heatmap_marks_clean_bad_and_nonfinite_blocks():
    assert text_heatmap(np.asarray(BLOCKS)) == [".-.", ".@X"]
    assert text_heatmap(np.asarray([[0.0, 1e-9, 1.0]])) == [".:@"]  # the least error is not '.'
    assert text_legend(np.asarray(BLOCKS)) == "'.' clean, ':-=+*#%' growing error, '@' the largest (2), X NaN/inf"


def test_markdown_has_summary_matrix_and_findings():
    text = markdown(_report())
    assert "| kernel | interpret | tpu_interpret | triton:h100 |" in text
    assert "| evil_kernel | FAIL | PASS | skip |" in text
    assert "## 1. `mismatch` in `evil_kernel` on `interpret`" in text


def test_blame_maps_accept_one_or_many_outputs_and_reject_non_numbers():
    assert [label for label, _ in blame_maps({"blame": [{"block_errors": BLOCKS, "path": "out[1]"}]})] == ["output out[1]"]
    assert blame_maps({"blame": {"block_errors": [[1, "x"]]}}) == []
    assert blame_maps({"blame": {"block_errors": [[1, 2], [3]]}}) == []
    assert blame_maps({}) == []
    assert blame_maps({"blame": {"block_errors": [1.0, 2.0]}})[0][1].shape == (1, 2)


def test_heatmap_svg_has_a_rect_per_block_and_pools_large_maps():
    assert heatmap_svg(np.asarray(BLOCKS)).count("<rect") == 6
    assert heatmap_svg(np.ones((200, 10))).count("<rect") == 50 * 10  # 4 rows pooled into one


def test_html_escapes_every_user_string_and_draws_the_heatmap():
    page = html_page(_report())
    assert page.count("<script") == 1  # the matrix's filter, the page's own
    assert "<script>document.title" not in page
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert page.count("<svg") == 1
    assert page.count("<rect") == 6
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # no external assets


def test_write_reports_writes_every_format(tmp_path):
    paths = write_reports(_report(), tmp_path)
    assert sorted(p.name for p in paths.values()) == ["report.html", "report.json", "report.junit.xml", "report.md"]
    assert Report.from_dict(__import__("json").loads(paths["json"].read_text())).findings[0].kernel == "evil_kernel"


@pytest.mark.slow
def test_html_renders_in_headless_chromium_without_running_injected_scripts(tmp_path):
    chromium = _browser.chromium()
    page = write_reports(_report(), tmp_path, formats=("html",))["html"]
    shot = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run([chromium, *flags, f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "<title>pallas-verify report</title>" in dom  # the injected script never ran
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom  # shown as text
    assert dom.count("<rect") == 6
