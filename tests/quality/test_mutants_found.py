"""Every planted bug of the mutant catalog is found by ``verify``; every correct twin is clean.

Each mutant is searched on the HLO interpreter and TPU interpret mode (after the static
grid search) with the deterministic ``ci`` profile, so the same examples run every
time. The search must report at least one of the finding kinds the mutant declares,
from an example within the first ``MAX_EXAMPLES``. Shrinking is switched off
(``shrink_budget_s=0``): these tests measure detection, and a backend's search then
stops at its first failing example, so its ``examples`` count is the examples it took
to detect the bug. Once a declared kind is found the run stops (``verify``'s ``stop``):
a search not yet started still runs its first example, and none spends the rest of its
budget on a backend, or the bare kernel, that cannot show the bug.

Per-mutant measurements (kinds found, examples, seconds to detect, wall seconds) are
attached to each test's report as user properties; ``--junitxml`` collects them.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pallas_verify.engine import verify
from pallas_verify.findings import KERNEL_ROWS, row_of
from pallas_verify.reports.report import Report
from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant, mutants

BACKENDS = ("interpret", "tpu_interpret")
# Backward-pass mutants (found only through ``grad``) run on the HLO interpreter here:
# gradients in TPU interpret mode cost minutes per flash-attention twin, and
# tests/engine/test_verify_transforms.py checks backward kernels there.
GRAD_BACKENDS = ("interpret",)
# Every mutant shows its bug on its first example; ten leaves room for a draw that hides it.
MAX_EXAMPLES = 10
# A correct twin runs its whole budget: the simplest config, then a drawn one (each TPU
# interpret example with its reruns: another fill, DMA timing, core count and grown inputs).
TWIN_EXAMPLES = 2
# The ceiling of one case, including the worker's start. A semaphore deadlock in TPU
# interpret mode is reported as `deadlock` in about a second; other hangs end at the
# adaptive idle limit (caselimit.py) or here.
TIMEOUT_S = 20.0

MUTANTS = mutants()
IDS = [m.name for m in MUTANTS]

pytestmark = [pytest.mark.quality, pytest.mark.slow]


def _backends(spec: KernelSpec) -> tuple[str, ...]:
    return GRAD_BACKENDS if "grad" in spec.transforms else BACKENDS


def _search(spec: KernelSpec, out_dir: Path, max_examples: int,
            expects: tuple[str, ...] = ()) -> tuple[Report, float]:
    """``verify`` on the backends; with ``expects``, stopped once one of those kinds is found."""
    found: list[str] = []
    started = time.perf_counter()
    report = verify(
        spec,
        list(_backends(spec)),
        max_examples=max_examples,
        profile="ci",
        out_dir=out_dir,
        timeout_s=TIMEOUT_S,
        shrink_budget_s=0.0,
        on_finding=(lambda finding: found.append(finding.kind)) if expects else None,
        stop=(lambda: any(kind in expects for kind in found)) if expects else None,
    )
    return report, time.perf_counter() - started


def _describe(report: Report) -> str:
    findings = [f"{f.backend}: {f.kind}: {f.message.splitlines()[0]}" for f in report.findings]
    cells = [
        f"{r.backend}[{r.transform}]: {r.status} after {r.examples} examples {r.reason}"
        for r in report.results
    ]
    return "\n".join(["findings:", *findings, "results:", *cells])


def _record(request: pytest.FixtureRequest, name: str, value: object) -> None:
    """A measurement on the test's report (``--junitxml`` writes it as a property)."""
    request.node.user_properties.append((name, value))


def _examples_to_detect(report: Report, backend: str, transform: str | None) -> int | None:
    """Examples the backend's search ran: with shrinking off, up to its first failure."""
    if backend == "static":
        return None  # the static check runs no kernel; the report keeps no example count
    [cell] = [r for r in report.results if r.backend == backend and r.transform == transform]
    return cell.examples


@pytest.mark.parametrize("mutant", MUTANTS, ids=IDS)
def test_mutant_is_found_with_a_declared_kind(
    mutant: Mutant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    report, wall = _search(mutant.spec, tmp_path, MAX_EXAMPLES, mutant.expects)
    expected = [f for f in report.findings if f.kind in mutant.expects]
    _record(request, "kinds", sorted({f"{f.backend}:{f.kind}" for f in report.findings}))
    _record(request, "wall_s", round(wall, 2))
    assert expected, (
        f"{mutant.name} ({mutant.bug}) expects one of {mutant.expects}\n{_describe(report)}"
    )
    for finding in expected:
        examples = _examples_to_detect(report, finding.backend, finding.transform)
        _record(
            request,
            f"{finding.backend}:{finding.kind}",
            {"examples": examples, "elapsed_s": round(finding.elapsed_s, 2)},
        )
        assert examples is None or 1 <= examples <= MAX_EXAMPLES, _describe(report)
        assert 0.0 <= finding.elapsed_s <= wall
        assert finding.kernel == mutant.name
        assert finding.reproducer is not None
        assert Path(finding.reproducer).is_file()
    # A finding fails its own row: its backend's cell, or the static check's or the
    # divergence's row (findings.row_of), which the report then has.
    failing = {(row_of(f), None if row_of(f) in KERNEL_ROWS else f.transform) for f in expected}
    cells = {(cell.backend, cell.transform): cell for cell in report.results}
    for row in failing:
        assert row in cells and cells[row].status == "fail", _describe(report)


@pytest.mark.parametrize("mutant", MUTANTS, ids=IDS)
def test_correct_twin_is_clean(
    mutant: Mutant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    report, wall = _search(mutant.twin, tmp_path, TWIN_EXAMPLES)
    _record(request, "wall_s", round(wall, 2))
    assert report.findings == [], f"twin {mutant.twin.name} of {mutant.name}\n{_describe(report)}"
    # A backend the twin declares unsupported (with the reason) is an n/a cell, one that serves
    # none of its platforms a skipped one; neither runs.
    from pallas_verify.backends import registry

    skips = {b: registry.skip_reason(mutant.twin, registry.get(b)) for b in _backends(mutant.twin)}
    expected = {(b, skip.status if skip else "pass") for b, skip in skips.items()}
    assert {(r.backend, r.status) for r in report.results} == expected, _describe(report)
    assert all(r.examples == TWIN_EXAMPLES for r in report.results if r.status == "pass"), _describe(report)
