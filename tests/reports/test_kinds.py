"""Every finding kind is documented, and an alias_hazard finding survives JSON and renders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import find

from pallas_verify import attribution, search
from pallas_verify.findings import FINDING_KINDS, INPUT_BLIND, KINDS, OUTPUT_KINDS, SANITIZER_KINDS
from pallas_verify.reports.html import html_page
from pallas_verify.reports.markdown import markdown
from pallas_verify.reports.report import Report
from pallas_verify.runner import Runner
from reference_kernels.mutants import hazards

ROOT = Path(__file__).resolve().parents[2]


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


@pytest.mark.parametrize("kind", FINDING_KINDS)
def test_kind_is_in_the_readme_and_the_json_reference(kind):
    readme = _section((ROOT / "README.md").read_text(), "## Finding kinds")
    table = _section((ROOT / "docs" / "report-json.md").read_text(), "## Kinds")
    assert f"`{kind}`" in readme
    assert re.search(rf"^\| `{kind}` \|", table, re.MULTILINE)


def test_the_json_reference_table_is_the_kind_table():
    table = _section((ROOT / "docs" / "report-json.md").read_text(), "## Kinds")
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| (.*?) \|$", table, re.MULTILINE)
    assert [kind for kind, _, _ in rows] == list(KINDS) == list(FINDING_KINDS)
    for kind, found_by, meaning in rows:
        assert found_by == KINDS[kind].found_by, kind
        assert meaning.startswith(KINDS[kind].summary), kind


def test_the_per_kind_sets_derive_from_the_kind_table():
    assert sorted(INPUT_BLIND) == ["compile_error", "crash", "exception", "timeout"]
    assert sorted(SANITIZER_KINDS) == ["deadlock", "dma_ordering", "out_of_bounds", "race", "revisit",
                                       "semaphore_leak", "uninitialized_read"]
    assert sorted(OUTPUT_KINDS) == ["backend_divergence", "mismatch"]
    assert search.INPUT_BLIND is INPUT_BLIND and attribution.SANITIZER_KINDS is SANITIZER_KINDS


def test_alias_hazard_finding_round_trips_through_json_and_renders():
    spec = hazards.aliased_stencil_spec
    inputs = tuple(np.asarray(x) for x in find(spec.inputs({}), lambda _: True))
    with Runner(spec, isolate="never") as runner:
        [finding] = runner.static_findings({}, inputs)
    assert finding.kind == "alias_hazard"
    assert finding.backend == "static"
    assert finding.evidence["grid_points"] == ((0,), (3,))
    report = Report(kernels=[{"name": spec.name}], backends=["interpret"], findings=[finding])
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.findings[0].kind == "alias_hazard"
    assert again.findings[0].evidence["operand"] == "input 1 aliased to output 0"
    page = html_page(again)
    assert "alias_hazard in aliased_stencil on static" in page
    assert "input 1 aliased to output 0" in page
    assert "`alias_hazard`" in markdown(again)


def test_an_unknown_kind_in_a_report_is_rejected():
    data = {"kernels": [], "backends": [], "findings": [{"kind": "alias-hazard", "kernel": "k", "backend": "static",
                                                          "message": "m"}]}
    with pytest.raises(ValueError, match="alias-hazard"):
        Report.from_dict(data)
