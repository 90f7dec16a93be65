"""Every screenshot tests/reports/screenshots.py takes is in docs/screenshots, a small PNG,
and linked from the README; every screenshot the README links is there."""

from __future__ import annotations

import re
from pathlib import Path

from tests.reports.screenshots import SHOTS

ROOT = Path(__file__).parents[2]
MAX_BYTES = 300_000


def test_each_screenshot_is_a_small_png_the_readme_links():
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\(docs/screenshots/([\w.-]+\.png)\)", readme))
    for name, _, _ in SHOTS:
        shot = ROOT / "docs" / "screenshots" / name
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert shot.stat().st_size < MAX_BYTES, name
        assert name in linked, f"README does not link docs/screenshots/{name}"
    assert all((ROOT / "docs" / "screenshots" / name).is_file() for name in linked)
