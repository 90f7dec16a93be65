"""The metamorphic reruns still find what each exists for, now that a kernel gets only the
reruns its jaxpr can need (and one rerun with all their knobs changed while they agree).

Each mutant runs one example in a base mode that hides its bug (the fill, DMA timing or
core count that happens to give the right answer); only a rerun can show it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pallas_verify.backends import registry
from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.causes import simplest
from pallas_verify.runner import Runner
from reference_kernels.mutants import mutants

MUTANTS = {m.name: m for m in mutants()}
HIDING = {"detect_races": False, "num_cores_or_threads": 1, "random_seed": 0, "out_of_bounds_reads": "raise"}

pytestmark = pytest.mark.quality


@pytest.mark.parametrize(("name", "hiding", "kind"), [
    ("unmasked_ragged_reduction", {"uninitialized_memory": "zero", "dma_execution_mode": "on_wait"},
     "uninitialized_read"),
    ("tile_padding_leak", {"uninitialized_memory": "zero", "dma_execution_mode": "on_wait"}, "uninitialized_read"),
    ("read_before_wait", {"uninitialized_memory": "nan", "dma_execution_mode": "eager"}, "dma_ordering"),
    # Zero fill and one sweep per core hide it; no scratch or padding in its jaxpr, but its
    # base run reads its output block before writing it: the watch adds the fill rerun.
    ("missing_acc_init", {"uninitialized_memory": "zero", "num_cores_or_threads": 2}, "uninitialized_read"),
])
def test_a_rerun_finds_the_bug_its_base_mode_hides(name, hiding, kind):
    m = MUTANTS[name]
    config = simplest(m.spec.configs)
    inputs = tuple(simplest(m.spec.inputs(config)))
    with Runner(m.spec, isolate="never") as runner:
        found = runner.check(config, inputs, registry.get("tpu_interpret"), {**HIDING, **hiding})
    assert [f.kind for f in found] == [kind], [f.message for f in found]


def test_a_clean_kernel_skips_the_reruns_it_cannot_need_and_the_report_says_so(tmp_path):
    from pallas_verify.engine import verify

    twin = MUTANTS["read_before_wait"].twin  # manual DMAs, whole chunks, no parallel grid
    report = verify(twin, ["tpu_interpret"], max_examples=2, profile="ci", out_dir=tmp_path)
    assert report.findings == []
    notes = report.kernels[0]["notes"]
    assert any(n.startswith("tpu_interpret: the grid_order rerun was skipped on 2 of 2 examples (no 'parallel'")
               for n in notes), notes
    counts = [tuple(map(int, m.groups())) for n in notes for m in [re.search(r"skipped on (\d+) of (\d+) examples", n)] if m]
    assert counts and all(skipped <= examples for skipped, examples in counts), notes


def test_no_left_out_check_is_counted_on_more_examples_than_ran(tmp_path):
    """Race detection left out of a kernel with nothing concurrent is counted per example
    judged, as the reruns are (it once read "skipped on 6 of 5 examples")."""
    from pallas_verify.engine import verify
    from reference_kernels.reductions import ROW_SUM

    report = verify(ROW_SUM, ["tpu_interpret"], max_examples=5, seed=0, profile="ci", out_dir=tmp_path)
    notes = report.kernels[0].get("notes", [])
    counts = [tuple(map(int, m.groups())) for n in notes for m in [re.search(r"skipped on (\d+) of (\d+) examples", n)] if m]
    assert any("race detection" in n for n in notes), notes
    assert counts and all(skipped <= examples for skipped, examples in counts), notes


class _Counting(TpuInterpret):
    """TPU interpret mode that counts the runs it is asked for (and their modes)."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "ran", [])

    def run(self, case):
        self.ran.append((dict(case.mode), tuple(np.shape(x) for x in case.inputs)))
        return super().run(case)


def test_a_clean_example_costs_one_rerun_that_carries_every_change_due():
    """Every knob, race detection on two cores and the grown inputs of the shape_invariance
    rerun ride in one rerun: two runs (two compiles) per clean example, not five."""
    from reference_kernels.reductions import ROW_SUM as twin

    config = simplest(twin.configs.filter(lambda c: any(s == "parallel" and n > 1  # grid_order and race apply
                                                        for s, n in zip(c["dimension_semantics"], c["grid"],
                                                                        strict=True))))
    inputs = tuple(simplest(twin.inputs(config)))
    backend = _Counting()
    base = {**HIDING, "detect_races": True, "uninitialized_memory": "nan", "dma_execution_mode": "on_wait"}
    with Runner(twin, isolate="never") as runner:
        assert runner.check(config, inputs, backend, base) == []
    assert len(backend.ran) == 2, backend.ran
    (_, shapes), (rerun, grown) = backend.ran
    assert rerun["detect_races"] and rerun["num_cores_or_threads"] == 2 and rerun["random_seed"] == 1
    assert rerun["uninitialized_memory"] == "zero" and rerun["dma_execution_mode"] == "eager"
    assert grown != shapes  # the shape_invariance rerun rode along


def test_a_change_the_one_rerun_shows_is_named_by_running_it_alone():
    """The one rerun differs: the grown inputs alone, then each knob alone, name the kind."""
    m = MUTANTS["unmasked_ragged_reduction"]
    config = simplest(m.spec.configs)
    inputs = tuple(simplest(m.spec.inputs(config)))
    backend = _Counting()
    with Runner(m.spec, isolate="never") as runner:
        found = runner.check(config, inputs, backend, {**HIDING, "uninitialized_memory": "zero",
                                                        "dma_execution_mode": "on_wait"})
    assert [f.kind for f in found] == ["uninitialized_read"]
    assert "uninitialized_memory changes from 'zero' to 'nan'" in found[0].message


def test_a_rerun_of_the_fill_alone_reuses_the_base_runs_compile():
    """The fill and DMA reruns change only knobs read at run time: they run right after the
    base run on its compile (one executable for the two runs)."""
    from pallas_verify.backends.execute import jitted
    from pallas_verify.case import Case
    from reference_kernels.elementwise import RAGGED_ADD

    config = {"block_rows": 8, "block_cols": 128, "dimension_semantics": ("arbitrary", "arbitrary")}
    inputs = tuple(np.ones((13, 256), np.float32) for _ in range(2))  # the last row block overhangs
    backend = _Counting()
    base = {**HIDING, "detect_races": True, "uninitialized_memory": "zero", "dma_execution_mode": "on_wait"}
    with Runner(RAGGED_ADD, isolate="never") as runner:
        runner.shapes.due = lambda case: None  # no shape_invariance rerun: the knobs' alone
        assert runner.check(config, inputs, backend, base) == []
    assert len(backend.ran) == 2, backend.ran
    (_, shapes), (rerun, rerun_shapes) = backend.ran
    assert rerun_shapes == shapes and rerun["uninitialized_memory"] == "nan"
    case = Case(spec=RAGGED_ADD, config=config, inputs=inputs, backend="tpu_interpret")
    assert jitted(case)._cache_size() == 1
