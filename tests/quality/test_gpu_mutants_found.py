"""Every Mosaic GPU mutant is found by ``verify`` on ``gpu_interpret`` with a kind it
declares; every correct twin is clean there. Same protocol as test_mutants_found.py
(deterministic ``ci`` profile, no shrinking), fewer examples: GPU interpret mode costs
about a second per case."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pallas_verify.engine import verify
from reference_kernels.mutants import Mutant, gpu_mutants

BACKENDS = ["gpu_interpret"]
MAX_EXAMPLES = 5
TWIN_EXAMPLES = 3
MUTANTS = gpu_mutants()
IDS = [m.name for m in MUTANTS]

pytestmark = [pytest.mark.quality, pytest.mark.slow]


def _verify(spec, out_dir: Path, examples: int):
    return verify(spec, BACKENDS, max_examples=examples, profile="ci", out_dir=out_dir, timeout_s=60.0,
                  shrink_budget_s=0.0)


@pytest.mark.parametrize("mutant", MUTANTS, ids=IDS)
def test_gpu_mutant_is_found_with_a_declared_kind(mutant: Mutant, tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    started = time.perf_counter()
    report = _verify(mutant.spec, tmp_path, MAX_EXAMPLES)
    found = [f for f in report.findings if f.kind in mutant.expects and f.backend == "gpu_interpret"]
    request.node.user_properties.append(("wall_s", round(time.perf_counter() - started, 2)))
    assert found, (mutant.name, [(f.backend, f.kind, f.message[:200]) for f in report.findings])
    [cell] = [r for r in report.results if r.backend == "gpu_interpret"]
    assert cell.status == "fail" and 1 <= cell.examples <= MAX_EXAMPLES
    assert all(f.reproducer and Path(f.reproducer).is_file() for f in found)


@pytest.mark.parametrize("mutant", MUTANTS, ids=IDS)
def test_gpu_twin_is_clean(mutant: Mutant, tmp_path: Path) -> None:
    report = _verify(mutant.twin, tmp_path, TWIN_EXAMPLES)
    assert report.findings == [], [(f.backend, f.kind, f.message[:300]) for f in report.findings]
    assert [(r.backend, r.status, r.examples) for r in report.results] == [("gpu_interpret", "pass", TWIN_EXAMPLES)]
