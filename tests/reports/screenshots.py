"""The screenshots in docs/screenshots: each report kind's page (tests/reports/_pages.py) in
headless Chromium at 1400 px, and the first finding of a failing verify.

    python -m tests.reports.screenshots docs/screenshots
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pallas_verify.reports.compare_html import write_comparison
from pallas_verify.reports.render import write_reports
from pallas_verify.reports.report import Report
from tests.reports import _browser, _pages


def _one(finding: int):
    """The failing verify's page with its ``finding``-th finding alone (the whole of it shows)."""
    def page() -> Report:
        report = _pages.verify_findings()
        report.findings = [report.findings[finding]]
        return report
    return page


#: (file name, the report or comparison, height in pixels)
SHOTS = [(f"{kind}.png", make, 1000) for kind, make in _pages.KINDS.items()] + [
    ("verify_findings-mismatch.png", _one(0), 1900),
    ("verify_findings-race.png", _one(1), 1600),
    ("compare.png", _pages.comparison, 700),
]


def main(out: str) -> list[Path]:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, height in SHOTS:
            made = make()
            page = (write_reports(made, Path(tmp) / name, formats=("html",))["html"] if isinstance(made, Report)
                    else write_comparison(made, Path(tmp) / name)["html"])
            shots.append(_browser.screenshot(page, folder / name, Path(tmp), height=height))
    return shots


if __name__ == "__main__":
    for shot in main(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"):
        print(shot)
