"""The benchmarks run at a tiny scale and produce results of the documented structure.

Figures are measured, never asserted: these tests check keys, types and signs only.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import (
    bare,
    baselines,
    clean_pass,
    cold_warm,
    conformance_kills,
    cost,
    deadlock,
    detection,
    faults,
    machine,
    overhead,
    precision,
    run,
    sampling,
    table,
)
from pallas_verify.execution import Failure
from reference_kernels.mutants import mutants


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_machine_records_cores_and_cpu_model() -> None:
    info = machine.machine()
    assert info["cores"] >= 1
    assert info["cpu_model"]
    assert info["jax"]


def test_drawn_examples_repeat_for_a_seed() -> None:
    spec = mutants()[0].spec
    first = sampling.draw_examples(spec, count=3, seed=7)
    again = sampling.draw_examples(spec, count=3, seed=7)
    assert [e.config for e in first] == [e.config for e in again]
    for a, b in zip(first, again, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a.inputs, b.inputs, strict=True))
    grid = sampling.grid_examples(spec, size=4, seed=7)
    assert len({repr(sorted(e.config.items())) for e in grid}) == len(grid) >= 1


def test_allclose_failure_names_the_output() -> None:
    spec = mutants()[0].spec
    same = (np.ones((2, 2), np.float32),)
    assert bare.allclose_failure(spec, same, same) is None
    assert "output 0" in bare.allclose_failure(spec, (same[0] + 1,), same)
    assert "output 0" in bare.allclose_failure(spec, (np.ones((3,), np.float32),), same)


def test_a_baseline_finds_a_mismatch_mutant() -> None:
    mutant = next(m for m in mutants() if m.name == "rotated_index_map")
    events: list[dict] = []
    verdict = baselines.run_baseline(mutant.spec, "hlo_grid", budget_s=30.0, seed=0, emit=events.append)
    assert verdict["found"] is True
    assert _positive(verdict["seconds"])
    assert verdict["examples"] == len(events) >= 1


def test_overhead_structure() -> None:
    result = overhead.overhead(examples=1, repeats=1, specs=overhead.SPECS[:1], modes=overhead.MODES[:1])
    assert _positive(result["overhead_ratio"])
    assert _positive(result["overhead_ratio_in_process"])
    assert result["executions_per_path"] == result["cases"] * 2
    assert set(result["example_cost"]) == {"interpret"}


def test_clean_pass_structure() -> None:
    result = clean_pass.clean_pass(examples=1, specs=clean_pass.CATALOG[:1], backends=("interpret",))
    [cell] = result["cells"]
    assert cell["kernel"] == "ragged_add" and cell["status"] == "pass" and cell["examples"] >= 1
    assert _positive(cell["pv_s"]) and _positive(cell["bare_s"])
    assert result["clean_pass_ratio_interpret"] == cell["ratio"]
    assert "clean_pass_ratio_tpu_interpret" not in result  # that backend was not asked for


def test_the_clean_pass_section_draws_what_a_ci_run_draws() -> None:
    from benchmarks.run import SCALES
    from pallas_verify.choices import PROFILES

    assert SCALES["full"].clean_examples == PROFILES["ci"][1]["max_examples"]


@pytest.mark.slow
def test_cold_warm_structure() -> None:
    result = cold_warm.cold_warm(examples=1, kernels=cold_warm.KERNELS[:1], backends=("interpret",))
    [cell] = result["cells"]
    assert cell["kernel"] == "ragged_add" and cell["backend"] == "interpret" and cell["examples"] >= 1
    assert all(_positive(v) for v in cell["in_process"]["seconds"].values())
    runs = ("cli_cold", "cli_warm", "cli_warm_searched", "plugin_cold", "plugin_warm", "plugin_warm_searched")
    assert set(cell["commands"]["seconds"]) == {"hand", *runs}
    assert all(_positive(v) for v in [*cell["commands"]["seconds"].values(), *cell["commands"]["cpu_seconds"].values()])
    for key in runs:
        assert result[f"{key}_ratio_interpret"] == result[f"{key}_ratio_interpret_worst"] == cell["commands"]["ratios"][key]
    assert _positive(result["in_process_warm_ratio_interpret"])
    assert "cli_cold_ratio_tpu_interpret" not in result  # that backend was not asked for


def test_the_hand_written_test_runs_the_examples_it_is_given(tmp_path: Path) -> None:
    import subprocess

    from benchmarks import handwritten
    from benchmarks.sampling import draw_examples
    from pallas_verify.loader import load_spec

    spec = load_spec("reference_kernels.elementwise:RAGGED_ADD")
    examples = [(e.config, e.inputs) for e in draw_examples(spec, count=2, seed=0)]
    test = handwritten.write_test(tmp_path, "ragged", module="reference_kernels.elementwise", attr="RAGGED_ADD",
                                  spec=spec, backend="interpret", examples=examples)
    run = subprocess.run([*handwritten.command(test), "-v"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_cost_structure_and_budget() -> None:
    result = cost.cost(grid_points=(1, 2), backends=cost.BACKENDS[:3])
    assert set(result["series"]) == {"interpret", "tpu_interpret", "tpu_interpret+races"}
    for series in result["series"].values():
        assert [r["grid_points"] for r in series["rows"]] == [1, 2]
        assert all(_positive(r["cold_s"]) and _positive(r["warm_s"]) for r in series["rows"])
    assert result["recommended_max_grid_points"] >= 1


def test_table_renders_headlines_and_mutants() -> None:
    results = {"machine": {"cores": 2}, "scale": "tiny", "seconds": 1.0, "kill_rate": 1.0, "detection": {
        "per_mutant": {"m": {"pallas_verify": {"found": True, "seconds": 0.5, "kind": "interpret:mismatch"},
                             "baselines": {"hlo_grid": {"found": False, "seconds": 0.1}}}}}}
    text = table.render(results)
    assert "kill rate, pallas-verify" in text
    assert "missed" in text
    assert "interpret:mismatch" in text
    smith = {"mutants": {"mutants": {"dma_signals_twice": {"backend": "tpu_interpret", "found": True, "first_s": 12.3,
                                                           "programs": 9, "seconds": 14.0}}}}
    assert re.search(r"dma_signals_twice +tpu_interpret +12.3 s +9", table.render({**results, "smith": smith}))
    kills = {"bugs": {"outputs_start_at_zero": {"class": 4, "backend": "interpret", "smith": {
        "killed": False, "seconds": 180.0}, "conformance": {"killed": True, "first_s": 21.5}}}}
    assert re.search(r"4 +outputs_start_at_zero +interpret +missed \(180 s\) +21.5 s",
                     table.render({**results, "kills": kills}))


def test_each_class_of_planted_bug_meets_the_conformance_rows_of_its_class() -> None:
    from pallas_verify.campaigns.sanitizer import Planted, planted_rows

    planted = [r.name for r in planted_rows()]
    bugs = conformance_kills._bugs().BUGS
    assert {bug.cls for bug in bugs.values()} == {1, 2, 3, 4}
    for cls in (1, 2, 3, 4):
        rows = conformance_kills.conformance_rows(cls)
        catalog = [r for r in rows if not isinstance(r, Planted)]
        assert [r.name for r in rows[len(catalog):]] == planted  # the planted-bug rows come last
        assert all("vmap" in (*r.transforms, *r.features) for r in catalog) if cls == 2 else True
    assert "tail_windows" in [r.name for r in conformance_kills.conformance_rows(3)]
    assert "table_alias_add" in [r.name for r in conformance_kills.conformance_rows(1)]
    assert "vmapped_inplace" in [r.name for r in conformance_kills.conformance_rows(2)]


@pytest.mark.slow
def test_deadlock_section_times_the_deadlock_finding() -> None:
    result = deadlock.deadlock(only=("deadlock_semaphore",))
    [(name, runs)] = result["per_mutant"].items()
    assert name == "deadlock_semaphore"
    assert set(runs) == set(deadlock.RUNS)
    assert all(r["kind"] == "deadlock" and _positive(r["seconds"]) for r in runs.values())
    assert result["deadlock_report_s"] == runs["tpu_interpret_alone"]["seconds"]
    assert result["all_reported_as_deadlock"] is True
    assert "seconds from search start to a deadlock finding" in table.render({**result, "deadlock": result})


def test_main_writes_the_results_file_with_each_sections_headline_keys(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    assert run.main(["--scale", "tiny", "--sections", "kills", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["scale"] == "tiny" and results["machine"]["cores"] >= 1
    assert set(results["section_seconds"]) == {"kills"}
    assert results["planted_bugs_killed_by_class"] == results["kills"]["planted_bugs_killed_by_class"]


# The sections no test above runs on their own, each at the tiny scale (a test per section,
# so that the suite's workers share them): each lifts its headline keys to the top.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["compiles", "detection", "scaling", "cluster", "smith"])
def test_each_section_runs_at_the_tiny_scale_and_lifts_its_headline_keys(name: str) -> None:
    results = run.run("tiny", (name,))
    _, lifted = run.SECTIONS[name]
    # each from the section itself (run lifts a key it lacks as None); the cluster's nights
    # only where a Redis server runs
    skipped = ("night1_find_s", "night2_refind_s") if "night2_skipped" in results[name] else ()
    assert [key for key in lifted if key not in results[name] and key not in skipped] == []
    if name == "compiles":
        repeated = results["compiles"]["metamorphic"]["repeat_compiled"]
        assert "jit(ragged_add)" not in repeated, f"a rerun of a (config, mode) seen before compiled the kernel: {repeated}"
    elif name == "detection":
        assert _positive(results["detect_ratio_vs_best_baseline"])
        per_mutant = results["detection"]["per_mutant"]
        assert set(per_mutant) == set(run.SCALES["tiny"].mutants)
        for row in per_mutant.values():
            assert set(row["baselines"]) == set(baselines.METHODS)
            assert row["pallas_verify"]["seconds"] is None or row["pallas_verify"]["seconds"] >= 0
    elif name == "scaling":
        assert all(_positive(v) for v in results["examples_per_s"].values())
    elif name == "cluster":
        assert _positive(results["ray_overhead_ratio"])
    else:
        assert all(_positive(results[k]) for k in ("smith_programs_per_minute_interpret",
                                                   "smith_programs_per_minute_tpu_interpret"))


def test_precision_section_reports_margins_of_correct_kernels_and_mutants() -> None:
    result = precision.precision(examples=1, mutant_examples=1, only=("tiled_matmul_bfloat16_out", "bf16_acc_bf16_out"))
    assert set(result["per_subject"]) == {"tiled_matmul_bfloat16_out on interpret",
                                          "tiled_matmul_bfloat16_out on tpu_interpret"}
    assert 0 < result["correct_margin"] <= 1 and result["correct_false_fails"] == []
    assert set(result["per_mutant"]) == {"bf16_acc_bf16_out"}
    assert result["mutant_ratio"] == result["per_mutant"]["bf16_acc_bf16_out"]["mildest"] > 1
    text = table.render({"precision": result, **{k: result[k] for k in ("correct_margin", "mutant_ratio")}})
    assert "precision: correct kernels' largest kernel error / bound" in text and "bf16_acc_bf16_out" in text


def test_narrowed_spec_casts_inputs_and_says_which_outputs_it_cast() -> None:
    from reference_kernels.upstream import tpu_ops

    spec = precision.narrowed(tpu_ops.TPU_GMM, "bfloat16")
    [row, *_] = precision._judge(spec, 1, 0, first_only=True)
    assert row["subject"] == "upstream_tpu_gmm.bfloat16" and row["dtype"] == "bfloat16"
    assert row["cast"] == ["input float32", "kernel float32"]  # drawn float32; gmm returns float32 for bf16


def test_a_baseline_case_past_the_limit_counts_at_its_start_plus_the_limit(tmp_path: Path) -> None:
    settings = detection.Settings(budget_s=10.0, case_timeout_s=2.0)
    progress = tmp_path / "progress.jsonl"
    progress.write_text('{"event": "start", "example": 0, "t": 0.0, "at": 1.0}\n'
                        '{"event": "start", "example": 1, "t": 3.5, "at": 4.5}\n{"event": "st')  # partial
    start = detection._last_start(progress)
    assert start is not None and start["t"] == 3.5  # the partial last line is not read
    overran = Failure(cause="overran", message="unit limit")
    killed = detection._verdict(None, overran, start, settings)
    assert killed == {"found": True, "seconds": 5.5, "examples": None,
                      "why": "timeout: a case ran past 2.0 s and was killed"}
    assert detection._verdict(None, overran, None, settings)["seconds"] == 2.0
    done = {"found": False, "seconds": 10.0, "examples": 4, "why": None}
    assert detection._verdict(done, None, start, settings) == done
    with pytest.raises(RuntimeError, match="the baseline unit failed \\(raised\\): KeyError: 'nope'"):
        detection._verdict(None, Failure(cause="raised", message="KeyError: 'nope'"), start, settings)


@pytest.mark.slow
def test_baselines_run_on_the_executor_and_a_hang_is_killed_at_the_per_case_limit(tmp_path: Path) -> None:
    from pallas_verify import execution

    by_name = {m.name: m for m in mutants()}
    settings = detection.Settings(budget_s=30.0, case_timeout_s=2.0)
    progress = tmp_path / "progress.jsonl"
    with execution.make("local", workers=1) as pool:
        hung = detection._baseline(pool, by_name["deadlock_semaphore"], "tpu_default", settings, progress)
        assert hung["why"] == "timeout: a case ran past 2.0 s and was killed"
        assert hung["found"] is True and hung["seconds"] >= 2.0
        assert pool.running() == []  # the hung worker was stopped
        found = detection._baseline(pool, by_name["rotated_index_map"], "hlo_grid", settings, progress)
    assert found["found"] is True and _positive(found["seconds"]) and found["examples"] >= 1


def test_faults_section_stages_faults_and_says_what_survived_and_what_each_cost() -> None:
    result = faults.faults(only=("out_dev_null", "bad_numbers"))
    assert result["faults_tried"] == 2 and result["faults_survived"] == 2
    for name in ("out_dev_null", "bad_numbers"):
        row = result["per_fault"][name]
        assert row["survived"] is True and row["exit"] == 2 and _positive(row["seconds"])
        assert row["checks"]["refused_with_exit_2"] and row["checks"]["no_orphan"]
    text = table.render({"faults_survived": 2, "faults": result})
    assert "faults survived" in text and "out_dev_null  survived" in text


def test_races_only_structure() -> None:
    from benchmarks import races_only

    result = races_only.races_only(repeats=1, cases=races_only.CASES[:1])
    assert _positive(result["races_only_speedup"])
    case = result["per_case"]["matmul_f32"]
    assert case["platform"] == "tpu"
    for timing in (case["cold"], case["warm"]):
        assert _positive(timing["full_s"]) and _positive(timing["races_only_s"]) and _positive(timing["speedup"])
    assert result["races_agree"] is True
    assert "races-only rerun" in table.render({"races_only": result, **result})
