"""Metamorphic oracle: the same case with one interpreter knob changed must give
bitwise-identical outputs (a correct kernel does not depend on the knob)."""

from __future__ import annotations

from collections.abc import Sequence

from pallas_verify.case import Case, Outcome
from pallas_verify.findings import Finding
from pallas_verify.oracles.base import bitwise_differences, case_finding

__all__ = ["metamorphic_finding"]


def metamorphic_finding(
    case: Case, kind: str, knob: str, base: Outcome, variant_case: Case, variant: Outcome, paths: Sequence[str]
) -> Finding | None:
    """A finding when the variant (one knob changed) does not reproduce ``base`` bitwise.

    A races-only variant (``skip_floating_point_ops``: its outputs are placeholders) is
    judged by its race reports alone: a ``race`` finding when it shows one."""
    if variant_case.mode.get("skip_floating_point_ops"):
        return _races_only(case, knob, variant_case, variant)
    if variant.error is not None and base.error is None:
        return case_finding(case, kind, f"with {knob} changed from {case.mode.get(knob)!r} to "
                            f"{variant_case.mode.get(knob)!r} the kernel fails: {variant.error.summary()}",
                            variant_mode=dict(variant_case.mode))
    if base.outputs is None or variant.outputs is None:
        return None
    lines = bitwise_differences(paths, base.outputs, variant.outputs)
    if not lines:
        return None
    return case_finding(case, kind, f"outputs change when {knob} changes from {case.mode.get(knob)!r} to "
                        f"{variant_case.mode.get(knob)!r}:\n" + "\n".join(lines),
                        variant_mode=dict(variant_case.mode), outputs=lines)


def _races_only(case: Case, knob: str, variant_case: Case, variant: Outcome) -> Finding | None:
    if not variant.races:
        return None
    mode = variant_case.mode
    return case_finding(case, "race", f"data race detected by a races-only rerun ({knob}="
                        f"{mode.get(knob)!r}, random_seed={mode.get('random_seed')!r}, floating-point ops "
                        f"skipped):\n{variant.diagnostics}", variant_mode=dict(mode), log=variant.diagnostics)
