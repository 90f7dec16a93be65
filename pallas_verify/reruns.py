"""The metamorphic reruns of an example: the same case with one interpreter knob changed
must give bitwise-identical outputs (``Backend.variants`` says which knobs, per kind).

Only the reruns whose knob can change the kernel's outputs run (the base run's
``Outcome.reruns``, from its jaxpr). They run as one rerun with every knob changed (started
beside the base run, in a worker of its own, when a core is spare for it), and each alone
only when that one shows a difference, to name the kind; then the races-only rerun, judged
by its race reports alone. ``RerunTally`` counts what was left out, for the spec's notes.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pallas_verify import _jax_compat
from pallas_verify.backends.base import Backend
from pallas_verify.case import Case, Outcome
from pallas_verify.execution.isolation import static_tracer_slot
from pallas_verify.execution.sandbox import Running, Sandbox
from pallas_verify.findings import Finding
from pallas_verify.oracles.base import bitwise_equal
from pallas_verify.oracles.metamorphic import metamorphic_finding
from pallas_verify.tracer import BlameInputs

__all__ = ["RerunTally", "Reruns"]


@dataclasses.dataclass
class RerunTally:
    """How many examples each backend ran, and on how many it left a check out because the
    kernel has nothing that check varies or could trip (``_jax_compat.RERUNS`` and
    ``SKIPPED_CHECKS`` say why): a metamorphic rerun, or race detection."""

    examples: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter[tuple[str, str]] = dataclasses.field(default_factory=collections.Counter)
    last: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)  # backend -> reruns of its last example

    def count(self, backend: str, kinds: Sequence[str], wanted: Sequence[str], skipped: Sequence[str] = ()) -> None:
        self.examples[backend] += 1  # every example judged, so a count of left-out checks never exceeds it
        left_out = {k for k in kinds if k not in wanted} | set(skipped)  # each check once per example
        self.skipped.update((backend, k) for k in left_out)

    def notes(self) -> list[str]:
        """One line per check left out: on how many examples, and why."""
        reasons = {**_jax_compat.RERUNS, **_jax_compat.SKIPPED_CHECKS}
        return [f"{backend}: {'race detection' if kind == 'race' else f'the {kind} rerun'} was skipped on {n} of "
                f"{self.examples[backend]} examples ({reasons.get(kind, 'the kernel has nothing it changes')})"
                for (backend, kind), n in sorted(self.skipped.items())]


class Reruns:
    """The metamorphic reruns of one spec's examples, run in ``sandbox``."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.tally = RerunTally()

    def notes(self) -> list[str]:
        return self.tally.notes()

    def ahead(self, backend: Backend, case: Case) -> Running | None:
        """The backend's reruns as one case with every knob changed, started now in a worker
        of its own when a core is spare for it (``static_tracer_slot``): it runs beside the
        base run instead of after it. A knob the kernel lacks changes nothing, so the one
        rerun serves whichever of them the base run says apply."""
        variants = backend.variants(case.mode)
        if not variants or backend.isolate or not self.sandbox.isolated(backend) or static_tracer_slot() != "tracer":
            return None
        if self.tally.last.get(backend.name) == frozenset():  # the kernel's last example needed none
            return None
        merged = dataclasses.replace(case, mode=_merged(case.mode, [mode for _, mode in variants if not _races_only(mode)]))
        return self.sandbox.submit(merged, backend, slot="reruns")

    def findings(self, backend: Backend, case: Case, base: Outcome, paths: Sequence[str],
                 ahead: Running | None = None) -> tuple[list[Finding], dict[str, BlameInputs]]:
        """The reruns' findings (module docstring) and, for a finding of a rerun alone, what
        blame maps: the elements whose bits changed."""
        variants = backend.variants(case.mode)
        wanted = [(kind, mode) for kind, mode in variants if base.reruns is None or kind in base.reruns]
        self.tally.count(backend.name, [kind for kind, _ in variants], [kind for kind, _ in wanted], base.skipped)
        self.tally.last[backend.name] = frozenset(kind for kind, _ in wanted)
        races_only = [(kind, mode) for kind, mode in wanted if _races_only(mode)]
        wanted = [(kind, mode) for kind, mode in wanted if not _races_only(mode)]
        together, singles = None, wanted
        if wanted and (ahead is not None or len(wanted) > 1):
            merged = ahead.case if ahead is not None else dataclasses.replace(
                case, mode=_merged(case.mode, [mode for _, mode in wanted]))
            variant = self.sandbox.collect(ahead) if ahead is not None else self.sandbox.run(merged, backend)
            if ahead is not None:
                ahead.outcome = variant
            together = metamorphic_finding(case, wanted[0][0], base, merged, variant, paths)
            singles = wanted if together is not None else []  # each alone only to name the kind
        for kind, mode in singles:
            variant_case = dataclasses.replace(case, mode=mode)
            variant = self.sandbox.run(variant_case, backend)
            finding = metamorphic_finding(case, kind, base, variant_case, variant, paths)
            if finding is not None:
                return [finding], _changed(finding, case, base, variant)
        if together is not None:
            return [together], {}
        for kind, mode in races_only:
            variant_case = dataclasses.replace(case, mode=mode)
            finding = metamorphic_finding(case, kind, base, variant_case, self.sandbox.run(variant_case, backend), paths)
            if finding is not None:
                return [finding], {}
        return [], {}


def _changed(finding: Finding, case: Case, base: Outcome, variant: Outcome) -> dict[str, BlameInputs]:
    """What blame maps for a rerun's finding: the elements whose bits changed."""
    if base.outputs is None or variant.outputs is None:
        return {}
    masks = tuple(~bitwise_equal(a, b) for a, b in zip(base.outputs, variant.outputs, strict=True))
    return {finding.kind: BlameInputs(inputs=case.inputs, masks=masks, errors=(None,) * len(masks))}


def _races_only(mode: Mapping[str, Any]) -> bool:
    """Whether a rerun's mode computes no float values (its outputs are placeholders)."""
    return bool(mode.get("skip_floating_point_ops"))


def _merged(mode: Mapping[str, Any], variants: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``mode`` with every knob that any of ``variants`` changes set as that variant sets it."""
    merged = dict(mode)
    for variant in variants:
        merged.update({k: v for k, v in variant.items() if mode.get(k) != v})
    return merged
