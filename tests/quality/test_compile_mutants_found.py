"""Every planted bug only a compile shows (``reference_kernels.mutants.compile_mutants``) is
found on ``mosaic_tpu:v5e`` with its declared kind; every correct twin passes there, its
cell carrying what the drawn compiler-param overrides did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pallas_verify.engine import verify
from pallas_verify.reports.report import Report
from reference_kernels.mutants import Mutant, compile_mutants

BACKEND = "mosaic_tpu:v5e"
MUTANTS = compile_mutants()

pytestmark = [pytest.mark.quality, pytest.mark.compile]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_found_and_twin_passes(mutant: Mutant, tmp_path: Path) -> None:
    report = verify(mutant.spec, [BACKEND], max_examples=3, profile="ci", out_dir=tmp_path, shrink_budget_s=0.0)
    kinds = {f.kind for f in report.findings if f.backend == BACKEND}
    assert kinds & set(mutant.expects), [f"{f.kind}: {f.message}" for f in report.findings]
    [finding] = [f for f in report.findings if f.kind in mutant.expects]
    assert finding.reproducer is not None and Path(finding.reproducer).is_file()

    twin = verify(mutant.twin, [BACKEND], max_examples=4, profile="ci", out_dir=tmp_path / "twin")
    assert twin.findings == []
    [cell] = twin.results
    assert (cell.status, cell.examples) == ("pass", 4)
    again = Report.from_dict(json.loads(json.dumps(twin.to_dict()))).results[0]
    assert again.compiler_params == cell.compiler_params
    figure = cell.compiler_params or {"examples": 0}
    assert figure["examples"] >= 1 and sum(figure["results"].values()) == figure["examples"], figure
