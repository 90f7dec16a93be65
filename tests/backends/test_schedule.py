"""TPU interpret mode's grid orders and core assignments: recorded per run, folded into the
report's coverage figure, named in blame; and the races-only rerun on two cores."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import find

from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.backends.schedule import Coverage, cores_named
from pallas_verify.backends.tpu_reruns import RACE_DETECTION
from pallas_verify.case import Case
from pallas_verify.engine import verify
from pallas_verify.runner import Runner
from reference_kernels.mutants import mutants

MUTANTS = {m.name: m for m in mutants()}


def test_coverage_counts_distinct_orders_and_schedules():
    cov = Coverage()
    a = (((0,), 0), ((1,), 1))
    cov.add(a)
    cov.add(a)
    cov.add((((1,), 0), ((0,), 1)))  # another order
    cov.add((((0,), 1), ((1,), 0)))  # the first order, other cores
    cov.add(None)
    assert cov.figure() == {"runs": 4, "points": 8, "grids": 1, "orders": 2, "schedules": 3, "cores": [0, 1]}


def test_cores_are_named_only_when_two_cores_ran():
    ran = [[[0, 0], 0], [[0, 1], 1]]
    assert cores_named(ran, [[[0, 0], [[0, 0], [0, 1]]]]) == (
        "block (0, 0) was written on core 0 (grid point (0, 0)), core 1 (grid point (0, 1))")
    assert cores_named([[[0, 0], 0], [[0, 1], 0]], [[[0, 0], [[0, 0]]]]) is None


def _example(name):
    m = MUTANTS[name]
    config = find(m.spec.configs, lambda c: True)
    return m, config, find(m.spec.inputs(config), lambda _: True)


def test_a_run_records_its_grid_points_and_their_cores():
    m, config, inputs = _example("acc_across_parallel")
    mode = {"detect_races": False, "num_cores_or_threads": 2, "random_seed": 3}
    outcome = TpuInterpret().run(Case(spec=m.spec, config=config, inputs=inputs, backend="tpu_interpret", mode=mode))
    assert outcome.ok, outcome.error
    points = [p for p, _ in outcome.schedule]
    assert sorted(points) == sorted(set(points)) and len(points) >= 2  # each grid point once
    assert {c for _, c in outcome.schedule} == {0, 1}


def test_race_rerun_only_when_the_base_run_checked_no_race_between_cores():
    backend = TpuInterpret()
    one_core = {"detect_races": True, "num_cores_or_threads": 1, "random_seed": 5}
    [(_kind, mode)] = [v for v in backend.variants(one_core) if v[0] == "race"]
    assert mode == {**one_core, **RACE_DETECTION, "random_seed": 6}
    two_cores = {**one_core, "num_cores_or_threads": 2}
    assert [v for v in backend.variants(two_cores) if v[0] == "race"] == []


class _RacesOnly(TpuInterpret):
    """TPU interpret mode with its races-only rerun as its only rerun."""

    def variants(self, mode):
        return [v for v in super().variants(mode) if v[0] == "race"]


def test_the_race_rerun_finds_a_race_between_cores_the_base_run_could_not():
    m, config, inputs = _example("acc_across_parallel")
    base = {"detect_races": True, "num_cores_or_threads": 1, "random_seed": 0, "dma_execution_mode": "on_wait",
            "uninitialized_memory": "nan", "out_of_bounds_reads": "raise"}
    case = Case(spec=m.spec, config=config, inputs=inputs, backend="tpu_interpret", mode=base)
    with Runner(m.spec, isolate="never") as runner:
        outcome = runner.run(case)
        assert not outcome.races  # one core: no race shows
        expected = runner.expected(config, inputs, "example")
        rerun = runner.reruns.start(_RacesOnly(), case)
        assert rerun is not None and rerun.variants == [] and rerun.races
        found, _ = runner.reruns.findings(rerun, outcome, expected.outputs, ["out"])
    assert [f.kind for f in found] == ["race"]
    assert "race detection on two cores" in found[0].message and "RACE DETECTED" in found[0].message
    assert found[0].evidence["variant_mode"]["detect_races"] is True
    assert found[0].evidence["variant_mode"]["num_cores_or_threads"] == 2


def test_the_json_report_carries_the_coverage_figure(tmp_path):
    m = MUTANTS["acc_across_parallel"]
    report = verify(m.twin, ["interpret", "tpu_interpret"], max_examples=2, profile="ci", out_dir=tmp_path)
    cells = json.loads(json.dumps(report.to_dict()))["kernels"][0]["results"]
    assert cells["interpret"]["grid_coverage"] is None
    figure = cells["tpu_interpret"]["grid_coverage"]
    assert figure["runs"] >= 2 and figure["schedules"] >= 1 and figure["points"] >= figure["runs"]
    assert set(figure) == {"runs", "points", "grids", "orders", "schedules", "cores"}
    assert np.all(np.diff(figure["cores"]) > 0)
