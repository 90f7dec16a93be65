"""Every rendering of a Report written to files: JSON (the source of truth), JUnit XML,
HTML and Markdown."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pallas_verify.reports.html import html_page
from pallas_verify.reports.junit import junit_xml
from pallas_verify.reports.markdown import markdown
from pallas_verify.reports.report import Report, write_atomic

__all__ = ["write_reports"]


def write_reports(report: Report, out_dir: str | Path, *, formats: Iterable[str] = ("json", "xml", "html", "md"),
                  stem: str = "report") -> dict[str, Path]:
    """Write the report in each format under ``out_dir`` atomically; returns the paths. The
    JSON, the source of truth, goes last: a write cut short (a full disk) leaves the one of
    the last write that went through whole, never a JSON newer than its renderings."""
    renderers = {"json": None, "xml": junit_xml, "html": html_page, "md": markdown}
    paths: dict[str, Path] = {}
    for fmt in sorted(formats, key=lambda f: f == "json"):
        if fmt not in renderers:
            from pallas_verify.errors import InvalidArgument

            raise InvalidArgument(f"format={fmt!r} is not one of {tuple(renderers)}.")
        path = Path(out_dir) / (f"{stem}.{fmt}" if fmt != "xml" else f"{stem}.junit.xml")
        render = renderers[fmt]
        paths[fmt] = report.write_json(path) if render is None else write_atomic(path, render(report))
    return paths
