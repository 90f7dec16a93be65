"""Metamorphic oracle: the same case with interpreter knobs changed must give
bitwise-identical outputs (a correct kernel does not depend on them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding, Kind
from pallas_verify.oracles.base import bitwise_differences, case_finding

__all__ = ["knob_changes", "metamorphic_finding"]

# Knobs a rerun changes only to be cheaper, never to expose a bug.
_QUIET = frozenset({"detect_races"})


def knob_changes(mode: Mapping[str, Any], variant: Mapping[str, Any]) -> str:
    """What a rerun changed: ``"dma_execution_mode changes from 'eager' to 'on_wait'"``, or
    ``"random_seed (3 to 4) and num_cores_or_threads (1 to 2) change"`` (race detection,
    which reruns turn off for speed, aside)."""
    changed = [k for k in sorted({*mode, *variant}) if k not in _QUIET and mode.get(k) != variant.get(k)]
    if len(changed) == 1:
        (k,) = changed
        return f"{k} changes from {mode.get(k)!r} to {variant.get(k)!r}"
    parts = [f"{k} ({mode.get(k)!r} to {variant.get(k)!r})" for k in changed]
    return ", ".join(parts[:-1]) + f" and {parts[-1]} change" if parts else "nothing changes"


def metamorphic_finding(
    case: Case, kind: Kind, base: Outcome, variant_case: Case, variant: Outcome, paths: Sequence[str]
) -> Finding | None:
    """A finding of ``kind`` when the variant (knobs changed) does not reproduce ``base`` bitwise."""
    changes = knob_changes(case.mode, variant_case.mode)
    if variant.error is not None and base.error is None:
        return case_finding(case, kind, f"when {changes}, the kernel fails: {variant.error.summary()}",
                            variant_mode=dict(variant_case.mode))
    if base.outputs is None or variant.outputs is None:
        return None
    lines = bitwise_differences(paths, base.outputs, variant.outputs)
    if not lines:
        return None
    return case_finding(case, kind, f"outputs change when {changes}:\n" + "\n".join(lines),
                        variant_mode=dict(variant_case.mode), outputs=lines)

