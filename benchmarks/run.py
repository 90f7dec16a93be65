"""``python -m benchmarks.run``: measure everything, print the table, write results.json.

``--scale full`` (the default, what ``make bench`` runs) takes about ten minutes on two
cores; ``--scale tiny`` runs every section at the smallest size that still produces
every figure. ``--sections`` picks sections (default: all).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SCALES", "SECTIONS", "Scale", "main", "run"]

RESULTS = Path(__file__).resolve().parent / "results.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scale:
    """How much of each section to run.

    Attributes:
      overhead_examples, overhead_repeats: examples per spec; warm runs per case.
      search_examples, shrink_budget_s, metamorphic_examples: compile-reuse sizes.
      budget_s, case_timeout_s, mutants: detection budget per mutant and method, per-case
        time limit, and which mutants (empty: all).
      scaling_examples, scaling_specs: examples per kernel and backend; how many specs.
      grid_points: grid sizes of the cost series.
      deadlock_mutants: which deadlocking mutants the deadlock section times (empty: all).
      cluster_units, night_budget_s: fuzz slices timed per executor; budget of each night.
      clean_examples, clean_specs: examples per correct kernel and backend of the clean-pass
        section (default the ``ci`` profile's 10, what a kernel author's CI run draws); how
        many of its kernels (0: all).
      precision_examples, precision_only: examples per correct kernel and dtype (the
        mutants run one more); which subjects and mutants (names containing one; empty: all).
      faults: which faults the faults section stages (empty: all).
      races_only_repeats, races_only_cases: timed runs per mode and case of the races-only
        rerun; how many of its cases (0: all).
      smith_budget_s, smith_mutant_budget_s, smith_mutants: generated programs: seconds of
        each rates campaign, at most per planted interpreter bug, and which bugs (empty: all).
      kills_smith_budget_s, kills_bugs, kills_campaigns: the planted interpreter bugs by class
        (``benchmarks.conformance_kills``): seconds of each smith campaign at most, which bugs
        (empty: all), and which campaigns try to kill them.
      cold_warm_kernels, cold_warm_repeats: the cold and warm section (``benchmarks.cold_warm``,
        ``clean_examples`` examples per kernel and interpreter): how many of its kernels (0:
        all), and how many times each whole command is timed (the median counts).
    """

    overhead_examples: int
    overhead_repeats: int
    search_examples: int
    shrink_budget_s: float
    metamorphic_examples: int
    budget_s: float
    case_timeout_s: float
    mutants: tuple[str, ...]
    scaling_examples: int
    scaling_specs: int
    grid_points: tuple[int, ...]
    deadlock_mutants: tuple[str, ...] = ()
    cluster_units: int = 12
    night_budget_s: float = 120.0
    clean_examples: int = 10  # the ci profile's examples: what a kernel author's CI run draws
    clean_specs: int = 0
    precision_examples: int = 2
    precision_only: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()
    races_only_repeats: int = 3
    races_only_cases: int = 0  # the first N cases of races_only.CASES (0: all)
    smith_budget_s: float = 60.0
    smith_mutant_budget_s: float = 120.0
    smith_mutants: tuple[str, ...] = ()
    kills_smith_budget_s: float = 180.0
    kills_bugs: tuple[str, ...] = ()
    kills_campaigns: tuple[str, ...] = ("smith", "conformance")
    cold_warm_kernels: int = 0
    cold_warm_repeats: int = 1


SCALES: dict[str, Scale] = {
    "full": Scale(overhead_examples=2, overhead_repeats=5, search_examples=5, shrink_budget_s=8.0,
                  metamorphic_examples=2, budget_s=15.0, case_timeout_s=8.0, mutants=(), scaling_examples=3,
                  scaling_specs=6, grid_points=(1, 2, 4, 8, 16, 32)),
    "tiny": Scale(overhead_examples=1, overhead_repeats=2, search_examples=1, shrink_budget_s=1.0,
                  metamorphic_examples=1, budget_s=8.0, case_timeout_s=5.0,
                  mutants=("rotated_index_map",), scaling_examples=1, scaling_specs=1,
                  grid_points=(1, 2), deadlock_mutants=("deadlock_semaphore",), cluster_units=2,
                  night_budget_s=120.0, clean_examples=2, clean_specs=2, precision_examples=1,
                  precision_only=("matmul_bf16", "tiled_matmul_bfloat16_out", "bf16_acc_bf16_out"),
                  faults=("out_dev_null", "bad_numbers"), races_only_repeats=1, races_only_cases=1,
                  smith_budget_s=1.0, smith_mutant_budget_s=2.0, smith_mutants=("iota_wrong_axis_rank3",),
                  kills_smith_budget_s=8.0, kills_bugs=("outputs_start_at_zero",), kills_campaigns=("conformance",),
                  cold_warm_kernels=1),
}


def _overhead(scale: Scale) -> dict[str, Any]:
    from benchmarks.overhead import overhead

    return overhead(examples=scale.overhead_examples, repeats=scale.overhead_repeats)


def _compiles(scale: Scale) -> dict[str, Any]:
    from benchmarks.compiles import compile_reuse

    return compile_reuse(max_examples=scale.search_examples, shrink_budget_s=scale.shrink_budget_s,
                         metamorphic_examples=scale.metamorphic_examples)


def _detection(scale: Scale) -> dict[str, Any]:
    from benchmarks.detection import Settings, detection

    return detection(Settings(budget_s=scale.budget_s, case_timeout_s=scale.case_timeout_s, only=scale.mutants))


def _scaling(scale: Scale) -> dict[str, Any]:
    from benchmarks.scaling import SPECS, scaling

    return scaling(max_examples=scale.scaling_examples, specs=SPECS[: scale.scaling_specs])


def _deadlock(scale: Scale) -> dict[str, Any]:
    from benchmarks.deadlock import deadlock

    return deadlock(only=scale.deadlock_mutants)


def _cost(scale: Scale) -> dict[str, Any]:
    from benchmarks.cost import cost

    return cost(grid_points=scale.grid_points)


def _clean_pass(scale: Scale) -> dict[str, Any]:
    from benchmarks.clean_pass import CATALOG, UPSTREAM, clean_pass

    return clean_pass(examples=scale.clean_examples, specs=(CATALOG + UPSTREAM)[: scale.clean_specs or None])


def _cold_warm(scale: Scale) -> dict[str, Any]:
    from benchmarks.cold_warm import KERNELS, cold_warm

    return cold_warm(examples=scale.clean_examples, kernels=KERNELS[: scale.cold_warm_kernels or None],
                     repeats=scale.cold_warm_repeats)


def _precision(scale: Scale) -> dict[str, Any]:
    from benchmarks.precision import precision

    return precision(examples=scale.precision_examples, mutant_examples=scale.precision_examples + 1,
                     only=scale.precision_only)


def _cluster(scale: Scale) -> dict[str, Any]:
    from benchmarks.cluster import cluster

    return cluster(units=scale.cluster_units, budget_s=scale.night_budget_s)


def _faults(scale: Scale) -> dict[str, Any]:
    from benchmarks.faults import faults

    return faults(only=scale.faults)


def _races_only(scale: Scale) -> dict[str, Any]:
    from benchmarks.races_only import CASES, races_only

    return races_only(repeats=scale.races_only_repeats, cases=CASES[: scale.races_only_cases or len(CASES)])
def _smith(scale: Scale) -> dict[str, Any]:
    import tempfile

    from benchmarks.smith import mutation_score, rates

    out = Path(tempfile.mkdtemp(prefix="pv-bench-smith-"))
    result = {"rates": rates(scale.smith_budget_s, out),
              "mutants": mutation_score(scale.smith_mutant_budget_s, out, scale.smith_mutants)}
    alone = result["rates"]["alone"]
    return {**result, "smith_programs_per_minute_interpret": alone["interpret"]["programs_per_minute"],
            "smith_programs_per_minute_tpu_interpret": alone["tpu_interpret"]["programs_per_minute"],
            "smith_planted_bugs_found": f"{result['mutants']['found']}/{result['mutants']['total']}"}


def _kills(scale: Scale) -> dict[str, Any]:
    import tempfile

    from benchmarks.conformance_kills import kills

    out = Path(tempfile.mkdtemp(prefix="pv-bench-kills-"))
    result = kills(scale.kills_smith_budget_s, out, scale.kills_bugs, scale.kills_campaigns)
    killed = sum(any((row.get(c) or {}).get("killed") for c in ("smith", "conformance"))
                 for row in result["bugs"].values())
    return {**result, "planted_bugs_killed_by_class": f"{killed}/{len(result['bugs'])}"}


#: Section name -> (runner, keys lifted to the top level of results.json).
SECTIONS: dict[str, tuple[Callable[[Scale], dict[str, Any]], tuple[str, ...]]] = {
    "overhead": (_overhead, ("overhead_ratio", "overhead_ratio_in_process")),
    "compiles": (_compiles, ("compiles_per_100_search_examples", "compiles_per_100_shrink_examples",
                             "compiles_per_metamorphic_rerun_first", "compiles_per_metamorphic_rerun_repeat")),
    "detection": (_detection, ("kill_rate", "kill_rate_hlo_grid", "kill_rate_hlo_random", "kill_rate_tpu_default",
                               "detect_ratio_vs_best_baseline")),
    "deadlock": (_deadlock, ("deadlock_report_s",)),
    "scaling": (_scaling, ("examples_per_s",)),
    "cost": (_cost, ("recommended_max_grid_points",)),
    "clean_pass": (_clean_pass, ("clean_pass_ratio_interpret", "clean_pass_ratio_tpu_interpret")),
    "cold_warm": (_cold_warm, tuple(f"{key}_ratio_{backend}{worst}" for backend in ("interpret", "tpu_interpret")
                                    for key in ("cli_cold", "cli_warm", "cli_warm_searched", "plugin_cold",
                                                "plugin_warm", "plugin_warm_searched")
                                    for worst in ("", "_worst"))
                  + tuple(f"in_process_{key}_ratio_{backend}" for backend in ("interpret", "tpu_interpret")
                          for key in ("cold", "warm"))),
    "precision": (_precision, ("correct_margin", "mutant_ratio")),
    "cluster": (_cluster, ("ray_overhead_ratio", "night1_find_s", "night2_refind_s")),
    "faults": (_faults, ("faults_tried", "faults_survived")),
    "races_only": (_races_only, ("races_only_speedup", "races_only_speedup_warm_max", "races_agree")),
    "smith": (_smith, ("smith_programs_per_minute_interpret", "smith_programs_per_minute_tpu_interpret",
                       "smith_planted_bugs_found")),
    "kills": (_kills, ("planted_bugs_killed_by_class",)),
}


def run(scale_name: str, sections: tuple[str, ...] = tuple(SECTIONS)) -> dict[str, Any]:
    """Run ``sections`` at ``scale_name``; the results dict (headline keys at the top)."""
    from benchmarks.machine import machine

    scale = SCALES[scale_name]
    results: dict[str, Any] = {"scale": scale_name, "settings": dataclasses.asdict(scale), "machine": machine(),
                               "section_seconds": {}}
    started = time.perf_counter()
    for name in sections:
        section, lifted = SECTIONS[name]
        t0 = time.perf_counter()
        results[name] = section(scale)
        results["section_seconds"][name] = round(time.perf_counter() - t0, 1)
        results.update({key: results[name].get(key) for key in lifted})
    if "scaling" in results:
        results["scaling_speedup"] = results["scaling"]["speedup"]
    results["seconds"] = time.perf_counter() - started
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=tuple(SCALES), default="full")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated sections (default: all of {','.join(SECTIONS)})")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results file (default: {RESULTS})")
    args = parser.parse_args(argv)
    sections = tuple(s for s in args.sections.split(",") if s)
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    from pallas_verify._env import configure, disable_compile_cache

    configure()  # before anything imports jax: CPU-first when no accelerator is attached
    disable_compile_cache()  # every section measures cold compiles; the verdict section places its own caches
    from pallas_verify.passes import disable as disable_kept_passes

    disable_kept_passes()  # every section searches: a pass kept by an earlier bench run is never reused
    results = run(args.scale, sections)
    from benchmarks.table import render

    args.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(render(results))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
