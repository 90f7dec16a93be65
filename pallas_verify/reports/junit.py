"""A report as JUnit XML: one testcase per kernel x backend cell."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from pallas_verify.reports.report import Report
from pallas_verify.reports.text import cell_findings, finding_text

__all__ = ["junit_xml"]

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _XML_BAD.sub("?", text)


def junit_xml(report: Report, *, suite: str = "pallas-verify") -> str:
    """One testcase per kernel x backend cell (classname = kernel, name = backend)."""
    unrun = ("skipped", "unsupported", "interrupted", "not_reached")
    counts = {s: sum(r.status == s for r in report.results) for s in ("fail", "error", *unrun)}
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(report.results)),
                         failures=str(counts["fail"]), errors=str(counts["error"]),
                         skipped=str(sum(counts[s] for s in unrun)), time=f"{report.seconds:.3f}")
    for result in report.results:
        name = result.backend + (f"+{result.transform}" if result.transform else "")
        case = ET.SubElement(node, "testcase", classname=_xml_text(result.kernel), name=_xml_text(name),
                             time=f"{result.seconds:.3f}")
        if result.status == "fail":
            found = cell_findings(report, result)
            failure = ET.SubElement(case, "failure", message=_xml_text(result.reason),
                                    type=found[0].kind if found else "finding")
            failure.text = _xml_text("\n\n".join(finding_text(f) for f in found))
        elif result.status == "error":  # pallas-verify's own failure: JUnit's error, not a failure of the kernel
            ET.SubElement(case, "error", message=_xml_text(result.reason), type="internal error")
        elif result.status in unrun:
            status = result.status.replace("_", " ")
            ET.SubElement(case, "skipped", message=_xml_text(f"{status}: {result.reason}"))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
