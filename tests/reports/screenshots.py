"""The screenshots in docs/screenshots: each report kind's page (tests/reports/_pages.py) in
headless Chromium at 1400 px, the findings of a failing verify one by one, the comparison
of two reports and the JAX-version matrix.

    python -m tests.reports.screenshots docs/screenshots [NAME.png ...]

(only the NAMEs given, when some are).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pallas_verify.campaigns.versions import write_matrix
from pallas_verify.reports.compare_html import write_comparison
from pallas_verify.reports.render import write_reports
from pallas_verify.reports.report import Report
from tests.reports import _browser, _pages


def _report(make: Callable[[], Report]) -> Callable[[Path], Path]:
    return lambda folder: write_reports(make(), folder, formats=("html",))["html"]


def _one(finding: int) -> Callable[[Path], Path]:
    """The failing verify's page with its ``finding``-th finding alone (the whole of it shows)."""
    def page() -> Report:
        report = _pages.verify_findings()
        report.findings = [report.findings[finding]]
        return report
    return _report(page)


#: (file name, what writes the page into a folder, height in pixels)
SHOTS: list[tuple[str, Callable[[Path], Path], int]] = [
    *((f"{kind}.png", _report(make), 1000) for kind, make in _pages.KINDS.items()),
    ("verify_findings-mismatch.png", _one(0), 1900),
    ("verify_findings-race.png", _one(1), 1700),
    ("verify_findings-out_of_bounds.png", _one(2), 1450),
    ("compare.png", lambda folder: write_comparison(_pages.comparison(), folder)["html"], 700),
    ("versions.png", lambda folder: write_matrix(_pages.versions(folder), folder)["html"], 900),
]


def main(out: str, names: list[str] | None = None) -> list[Path]:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, write, height in SHOTS:
            if names and name not in names:
                continue
            page = write(Path(tmp) / name)
            shots.append(_browser.screenshot(page, folder / name, Path(tmp), height=height))
    return shots


if __name__ == "__main__":
    for shot in main(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots", sys.argv[2:]):
        print(shot)
