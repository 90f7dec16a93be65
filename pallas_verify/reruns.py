"""The metamorphic reruns of an example: the same case with one interpreter knob changed,
or its inputs grown along a tiled axis, must give bitwise-identical outputs
(``Backend.variants`` says which knobs, per kind; ``oracles.shape_invariance`` the growth).

Which reruns are due is the base run's to say (``Outcome.reruns``): those whose knob its
kernel has (its jaxpr) and that its memory shows could change a bit (``_jax_compat``'s
watch). A rerun that changes only knobs TPU interpret mode reads at run time (the fill,
when DMAs complete, race detection) reuses the base run's compile, in the base run's
worker (a backend's ``recompiles`` says so): the fill
and DMA reruns run so, together, after the base run. The others (another grid order and
core count, race detection on two cores, the grown inputs) cost a compile, so an example
gets **one** such rerun that carries every change at once (``Rerun``); it starts beside
the base run, in a worker of its own, when a core is spare and the kernel's last example
needed one. A kernel that lacks a knob is
unchanged by it, so the one rerun serves whichever reruns apply. Only when a rerun's
outputs differ is each change run alone, to name the finding's kind. ``RerunTally``
counts what was left out, for the spec's notes.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pallas_verify.backends import tpu_reruns
from pallas_verify.backends.base import Backend
from pallas_verify.case import Case, Outcome
from pallas_verify.execution.isolation import static_tracer_slot
from pallas_verify.execution.sandbox import Running, Sandbox
from pallas_verify.findings import Finding
from pallas_verify.oracles.base import bitwise_differences, bitwise_equal, case_finding
from pallas_verify.oracles.metamorphic import knob_changes, metamorphic_finding
from pallas_verify.oracles.shape_invariance import Grown, ShapeRerun
from pallas_verify.tracer import BlameInputs

__all__ = ["Rerun", "RerunTally", "Reruns"]

RACE = "race"


@dataclasses.dataclass
class RerunTally:
    """How many examples each backend ran, and on how many it left a check out, and why: the
    kernel has nothing that check varies or could trip (a metamorphic rerun, or race
    detection), or the base run's memory showed the rerun could not change its outputs: the
    reasons are the rerun table's (``backends.tpu_reruns``)."""

    examples: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter[tuple[str, str, str]] = dataclasses.field(default_factory=collections.Counter)
    # backend -> whether its last example's rerun compiled anew (the next one's then starts ahead)
    compiled_last: dict[str, bool] = dataclasses.field(default_factory=dict)

    def count(self, backend: str, kinds: Sequence[str], wanted: Sequence[str], skipped: Sequence[str] = (),
              settled: Sequence[str] = ()) -> None:
        self.examples[backend] += 1  # every example judged, so a count of left-out checks never exceeds it
        left_out = {k: "settled" if k in settled else "rerun" for k in kinds if k not in wanted}
        left_out.update(dict.fromkeys(skipped, "check"))  # each check once per example, for one reason
        self.skipped.update((backend, k, why) for k, why in left_out.items())

    def notes(self) -> list[str]:
        """One line per check left out for one reason: on how many examples, and why."""
        reasons = tpu_reruns.reasons()
        return [f"{backend}: {'race detection' if kind == RACE else f'the {kind} rerun'} was "
                f"skipped on {n} of {self.examples[backend]} examples "
                f"({reasons[why].get(kind, 'the kernel has nothing it changes')})"
                for (backend, kind, why), n in sorted(self.skipped.items())]


@dataclasses.dataclass
class Rerun:
    """The one rerun of an example (module docstring).

    Attributes:
      backend, base: the backend and the example's own case.
      variants: the knob reruns it carries, (kind, mode) as ``Backend.variants`` gives them.
      races: race detection on two cores is carried (where the base run had none there).
      grown: the shape_invariance rerun is carried: the example's inputs grown.
      case: the rerun's case: every carried change at once.
      running: its run, when started beside the base run.
    """

    backend: Backend
    base: Case
    variants: list[tuple[str, dict[str, Any]]]
    races: bool
    grown: Grown | None
    case: Case
    running: Running | None = None


class Reruns:
    """The metamorphic reruns of one spec's examples, run in ``sandbox``; the
    shape_invariance reruns are ``shapes``'s."""

    def __init__(self, sandbox: Sandbox, shapes: ShapeRerun) -> None:
        self.sandbox = sandbox
        self.shapes = shapes
        self.tally = RerunTally()

    def notes(self) -> list[str]:
        return self.tally.notes()

    def start(self, backend: Backend, case: Case) -> Rerun | None:
        """The example's one rerun (None when the backend has none due), started now in a
        worker of its own when a core is spare for it (``static_tracer_slot``) and the
        kernel's last example needed one: it then runs beside the base run."""
        variants = backend.variants(case.mode)
        grown = self.shapes.due(case) if backend.reruns_shapes else None
        if not variants and grown is None:
            return None
        knobs = [(kind, mode) for kind, mode in variants if kind != RACE]
        races_due = [(kind, mode) for kind, mode in variants if kind == RACE]
        # Race detection last: a run-time knob, on two cores (where the base run had two,
        # the grid order still changes with the seed).
        mode = _merged({**case.mode, "detect_races": False}, [mode for _, mode in (*knobs, *races_due)])
        for _, race_mode in races_due:
            mode.update(detect_races=True, num_cores_or_threads=race_mode["num_cores_or_threads"])
        rerun_case = dataclasses.replace(case, mode=mode, inputs=grown.inputs if grown is not None else case.inputs)
        rerun = Rerun(backend, case, knobs, bool(races_due), grown, rerun_case)
        compiled_last = self.tally.compiled_last.get(backend.name, True) or grown is not None
        if (compiled_last and not backend.isolate and self.sandbox.isolated(backend)
                and static_tracer_slot() == "tracer"):
            rerun.running = self.sandbox.submit(rerun_case, backend, slot="reruns")
        return rerun

    def settle(self, rerun: Rerun | None) -> None:
        """Take a started rerun's answer off its worker's pipe if nobody collected it."""
        if rerun is not None and rerun.running is not None:
            self.sandbox.collect(rerun.running)

    def findings(self, rerun: Rerun, base: Outcome, expected: Sequence[np.ndarray],
                 paths: Sequence[str]) -> tuple[list[Finding], dict[str, BlameInputs]]:
        """The findings of the example's reruns, given its clean base run, and for a finding
        of a knob's rerun alone what blame maps: the elements whose bits changed."""
        case, backend = rerun.base, rerun.backend
        wanted = [(kind, mode) for kind, mode in rerun.variants if base.reruns is None or kind in base.reruns]
        races = rerun.races and (base.reruns is None or RACE in base.reruns)
        kinds = [kind for kind, _ in rerun.variants] + [RACE] * rerun.races  # every rerun the backend has for it
        self.tally.count(backend.name, kinds, [kind for kind, _ in wanted] + [RACE] * races, base.skipped, base.settled)
        grown = rerun.grown if rerun.grown is not None and self.shapes.applies(case, rerun.grown, expected) else None
        quick = not races and not any(backend.recompiles(case.mode, mode) for _, mode in wanted)
        self.tally.compiled_last[backend.name] = races or grown is not None or (bool(wanted) and not quick)
        if not wanted and not races and grown is None:
            return [], {}
        # The knobs on the example's own inputs: where only run-time knobs change, a rerun of
        # them alone on the base run's compile (in its worker); else the one rerun's knobs.
        own = _quick(rerun, wanted) if quick else rerun if rerun.grown is None else _on_own_inputs(rerun)
        if grown is None:
            return self._knobs(own, base, paths, wanted, races)
        variant = self._outcome(rerun)
        outputs = self.shapes.cut(case, grown, base, variant) if variant.error is None else None
        differs = outputs is not None and base.outputs is not None and bool(bitwise_differences(paths, base.outputs,
                                                                                                 outputs))
        if outputs is not None and not differs and not variant.races:
            return [], {}
        if variant.error is not None or differs:  # the grown inputs alone, to name what changed the outputs
            quiet = {**case.mode, "detect_races": False} if "detect_races" in case.mode else dict(case.mode)
            alone = self.sandbox.run(dataclasses.replace(case, inputs=grown.inputs, mode=quiet), backend)
            cut = self.shapes.cut(case, grown, base, alone)
            finding = self.shapes.finding(case, grown, base, cut, list(paths)) if cut is not None else None
            if finding is not None:
                return [finding], {}
        found, blame = self._knobs(own, base, paths, wanted, races) if wanted or races else ([], {})
        if found or not differs or variant.error is not None:
            return found, blame
        kind = tpu_reruns.joint_kind([k for k, _ in wanted]) if wanted else "shape_invariance"  # only together
        return [case_finding(case, kind, f"outputs change when the inputs grow along the tiled axis and "
                             f"{knob_changes(case.mode, rerun.case.mode)}, though neither alone changes them:\n"
                             + "\n".join(bitwise_differences(paths, base.outputs or (), outputs or ())),
                             variant_mode=dict(rerun.case.mode))], {}

    def _knobs(self, rerun: Rerun, base: Outcome, paths: Sequence[str], wanted: list[tuple[str, dict[str, Any]]],
               races: bool) -> tuple[list[Finding], dict[str, BlameInputs]]:
        """The findings of the one rerun on the example's own inputs: a race it reports, and
        when its outputs differ, each knob's rerun alone to name the kind."""
        case, backend = rerun.base, rerun.backend
        variant = self._outcome(rerun)
        race = [_race_finding(case, rerun.case, variant)] if races and variant.races else []
        together = (metamorphic_finding(case, tpu_reruns.joint_kind([kind for kind, _ in wanted]), base, rerun.case,
                                        variant, paths) if wanted else None)
        if together is None:
            return race, {}
        for kind, mode in wanted:  # each alone, to name the kind
            single = dataclasses.replace(case, mode=mode)
            alone = self.sandbox.run(single, backend)
            finding = metamorphic_finding(case, kind, base, single, alone, paths)
            if finding is not None:
                return [finding, *race], _changed(finding, case, base, alone)
        return [together, *race], {}

    def _outcome(self, rerun: Rerun) -> Outcome:
        """The one rerun's outcome: collected when it was started ahead, else run now."""
        if rerun.running is not None:
            return self.sandbox.collect(rerun.running)
        return self.sandbox.run(rerun.case, rerun.backend)


def _quick(rerun: Rerun, wanted: list[tuple[str, dict[str, Any]]]) -> Rerun:
    """The rerun of the ``wanted`` knobs alone, on the example's own inputs, not started."""
    mode = _merged({**rerun.base.mode, "detect_races": False}, [mode for _, mode in wanted])
    return dataclasses.replace(rerun, variants=wanted, races=False, grown=None, running=None,
                               case=dataclasses.replace(rerun.base, mode=mode))


def _on_own_inputs(rerun: Rerun) -> Rerun:
    """The one rerun without its grown inputs: the knobs on the example's own inputs."""
    return dataclasses.replace(rerun, grown=None, running=None,
                               case=dataclasses.replace(rerun.case, inputs=rerun.base.inputs))


def _race_finding(case: Case, rerun: Case, variant: Outcome) -> Finding:
    mode = rerun.mode
    return case_finding(case, RACE, f"data race detected by a rerun with race detection on two cores "
                        f"(num_cores_or_threads={mode.get('num_cores_or_threads')!r}, random_seed="
                        f"{mode.get('random_seed')!r}):\n{variant.diagnostics}", variant_mode=dict(mode),
                        log=variant.diagnostics)


def _changed(finding: Finding, case: Case, base: Outcome, variant: Outcome) -> dict[str, BlameInputs]:
    """What blame maps for a knob rerun's finding: the elements whose bits changed."""
    if base.outputs is None or variant.outputs is None:
        return {}
    masks = tuple(~bitwise_equal(a, b) for a, b in zip(base.outputs, variant.outputs, strict=True))
    return {finding.kind: BlameInputs(inputs=case.inputs, masks=masks, errors=(None,) * len(masks))}


def _merged(mode: Mapping[str, Any], variants: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``mode`` with every knob that any of ``variants`` changes set as that variant sets it."""
    merged = dict(mode)
    for variant in variants:
        merged.update({k: v for k, v in variant.items() if mode.get(k) != v})
    return merged
