"""Backend divergence: executing backends that each pass the reference must agree bitwise
with each other (for specs that declare ``bitwise_stable``)."""

from __future__ import annotations

from collections.abc import Sequence

from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding
from pallas_verify.oracles.base import bitwise_differences, case_finding

__all__ = ["divergence_findings"]


def divergence_findings(cases: Sequence[Case], outcomes: Sequence[Outcome], paths: Sequence[str]) -> list[Finding]:
    """Executing backends that each pass the reference but differ from each other bitwise.

    Only for specs declaring ``bitwise_stable`` (no floating-point reassociation that a
    backend may legitimately order differently); reported against the later backend.
    """
    runs = [(c, o) for c, o in zip(cases, outcomes, strict=True) if o.ok and o.outputs is not None]
    if len(runs) < 2 or not runs[0][0].spec.bitwise_stable:
        return []
    (first_case, first), found = runs[0], []
    for case, outcome in runs[1:]:
        lines = bitwise_differences(paths, first.outputs, outcome.outputs)  # type: ignore[arg-type]
        if lines:
            found.append(case_finding(case, "backend_divergence", f"outputs agree with the reference on both "
                                      f"{first_case.backend} and {case.backend} but differ bitwise between them:\n"
                                      + "\n".join(lines), other_backend=first_case.backend))
    return found
