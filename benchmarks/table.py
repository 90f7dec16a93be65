"""The printed table of a benchmark run (results.json holds everything it shows)."""

from __future__ import annotations

from typing import Any

__all__ = ["HEADLINES", "render"]

# The whole commands' runs (benchmarks.cold_warm): label and target.
_TEMPERATURE = {"cold": "cold", "warm": "warm (kept pass)", "warm_searched": "warm, searched (compiles kept)"}
_TARGET = {"cold": "<= 1.0", "warm": "<= 0.5", "warm_searched": ""}

#: (results key, label, target) of the headline figures, in print order.
HEADLINES: tuple[tuple[str, str, str], ...] = (
    ("overhead_ratio", "overhead ratio (worker path / bare)", "<= 1.10"),
    ("overhead_ratio_in_process", "overhead ratio (in-process / bare)", "<= 1.10"),
    ("compiles_per_100_search_examples", "compiles per 100 search examples", ""),
    ("compiles_per_100_shrink_examples", "compiles per 100 shrink examples", ""),
    ("compiles_per_metamorphic_rerun_repeat", "compiles per repeated metamorphic rerun", "0"),
    ("kill_rate", "kill rate, pallas-verify", "1.0"),
    ("kill_rate_hlo_grid", "kill rate, HLO fixed grid", ""),
    ("kill_rate_hlo_random", "kill rate, HLO random", ""),
    ("kill_rate_tpu_default", "kill rate, TPU interpret defaults", ""),
    ("clean_pass_ratio_interpret", "clean PASS / bare, interpret (median over kernels)", "<= 1.5"),
    ("clean_pass_ratio_tpu_interpret", "clean PASS / bare, tpu_interpret (median over kernels)", "<= 1.5"),
    *((f"{front}_{temperature}_ratio_{b}{worst}",
       f"{'verify command' if front == 'cli' else 'pytest + plugin'} {_TEMPERATURE[temperature]} / hand-written "
       f"test, {b} ({'worst kernel' if worst else 'median over kernels'})", _TARGET[temperature])
      for b in ("interpret", "tpu_interpret") for front in ("cli", "plugin")
      for temperature in ("cold", "warm", "warm_searched") for worst in ("", "_worst")),
    *((f"in_process_{temperature}_ratio_{b}", f"verify in process {temperature} / hand-written steps, {b} (median)",
       "") for b in ("interpret", "tpu_interpret") for temperature in ("cold", "warm")),
    ("detect_ratio_vs_best_baseline", "seconds-to-detect / best baseline (median)", "<= 1.5"),
    ("deadlock_report_s", "seconds from search start to a deadlock finding (worst)", "<= 20"),
    ("scaling_speedup", "xdist speed-up, 2 workers over 1", ""),
    ("recommended_max_grid_points", "recommended max_grid_points", ""),
    ("correct_margin", "precision: correct kernels' largest kernel error / bound (bf16, f16)", "<= 0.5"),
    ("mutant_ratio", "precision: mutants' smallest kernel error / bound", ">= 2"),
    ("ray_overhead_ratio", "Ray executor / local executor, equal parallelism", "<= 1.15"),
    ("night1_find_s", "night 1: seconds to find the planted bug", ""),
    ("night2_refind_s", "night 2: seconds to re-find it from the shared Redis database", ""),
    ("faults_survived", "faults survived (report written, no false finding, none lost, no orphan)", "all tried"),
    ("races_only_speedup", "skip_floating_point_ops speed-up of a race-detecting run, cold (median)", ""),
    ("races_only_speedup_warm_max", "skip_floating_point_ops speed-up of a race-detecting run, warm, best kernel", ""),
    ("races_agree", "a race-detecting run with floats skipped reports the races a full run does", "True"),
    ("smith_programs_per_minute_interpret", "smith: programs per minute on interpret (all cores)", ""),
    ("smith_programs_per_minute_tpu_interpret", "smith: programs per minute on tpu_interpret (all cores)", ""),
    ("smith_planted_bugs_found", "smith: planted interpreter bugs found", "all"),
    ("planted_bugs_killed_by_class", "planted interpreter bugs by class, killed", "all"),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _rows(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join
    return [line(h.ljust(w) for h, w in zip(header, widths, strict=True)),
            line("-" * w for w in widths),
            *(line(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)]


def _mutant_cell(verdict: dict[str, Any]) -> str:
    if not verdict["found"]:
        return f"missed ({_fmt(verdict['seconds'])} s)"
    return f"{verdict['seconds']:.2f} s"


def _mutants(detection: dict[str, Any]) -> list[str]:
    per = detection.get("per_mutant", {})
    if not per:
        return []
    methods = list(next(iter(per.values()))["baselines"])
    rows = []
    for name, m in per.items():
        pv = m["pallas_verify"]
        first = f"{_mutant_cell(pv)} {pv['kind'] or ''}".strip()
        rows.append((name, first, *(_mutant_cell(m["baselines"][k]) for k in methods)))
    return _rows(("mutant", "pallas-verify", *methods), rows)


def _deadlocks(deadlock: dict[str, Any]) -> list[str]:
    per = deadlock.get("per_mutant", {})
    rows = [(name, *(f"{_fmt(r['seconds'])} s {r['kind'] or 'missed'}" for r in runs.values()))
            for name, runs in per.items()]
    return _rows(("deadlocking mutant", *next(iter(per.values()))), rows) if rows else []


def _costs(cost: dict[str, Any]) -> list[str]:
    series = cost.get("series", {})
    if not series:
        return []
    rows = []
    for label, s in series.items():
        cold, warm = s["cold_fit"], s.get("warm_fit")
        rows.append((label, f"{cold['fixed_s']:.3f} + {cold['per_point_s'] * 1e3:.2f} ms/pt",
                     f"{warm['fixed_s'] * 1e3:.2f} ms + {warm['per_point_s'] * 1e3:.2f} ms/pt" if warm else "-"))
    return _rows(("backend", "cold run (s)", "warm run"), rows)


def _cold_warm(section: dict[str, Any]) -> list[str]:
    """Per kernel and interpreter: seconds of the hand-written test and each whole command."""
    rows = []
    for c in section.get("cells", []):
        seconds = c.get("commands", {}).get("seconds")
        inside = c["in_process"]["seconds"]
        commands = ([f"{seconds[k]:.1f}" for k in ("hand", "cli_cold", "cli_warm", "cli_warm_searched", "plugin_cold",
                                                   "plugin_warm", "plugin_warm_searched")]
                    if seconds else ["-"] * 7)
        rows.append((c["kernel"], c["backend"], *commands,
                     f"{inside['bare']:.2f} / {inside['pv_cold']:.2f} / {inside['pv_warm']:.2f}"))
    header = ("cold/warm kernel", "backend", "hand s", "verify cold", "warm", "warm searched", "plugin cold", "warm",
              "warm searched", "in process: hand / cold / warm")
    return _rows(header, rows) if rows else []


def _precision(precision: dict[str, Any]) -> list[str]:
    per = precision.get("per_mutant", {})
    rows = [(name, m["dtype"], f"{m['mildest']:.3g}", " ".join(f"{x:.3g}" for x in m["margins"]))
            for name, m in per.items()]
    subjects = sorted(precision.get("per_subject", {}).items(), key=lambda item: -item[1]["margin"])[:5]
    rows += [(name, "/".join(c["dtypes"]), f"{c['margin']:.3g}", "correct (largest margins)") for name, c in subjects]
    return _rows(("precision subject", "dtype", "error / bound", "per example and backend"), rows) if rows else []


def _faults(faults: dict[str, Any]) -> list[str]:
    per = faults.get("per_fault", {})
    rows = []
    for name, r in per.items():
        if "skipped" in r:
            rows.append((name, "skipped", "-", r["skipped"][:70]))
            continue
        failed = [k for k, ok in r["checks"].items() if not ok]
        rows.append((name, "survived" if r["survived"] else "FAILED", f"{r['wall_s']:.1f} s",
                     f"exit {r['exit']}" + (f"; failed: {', '.join(failed)}" if failed else "")))
    return _rows(("fault", "verdict", "wall", "detail"), rows) if rows else []


def _races_only(section: dict[str, Any]) -> list[str]:
    per = section.get("per_case", {})
    rows = [(label, f"{c['cold']['full_s']:.3f} / {c['cold']['races_only_s']:.3f} = {c['cold']['speedup']:.2f}x",
             f"{c['warm']['full_s']:.4f} / {c['warm']['races_only_s']:.4f} = {c['warm']['speedup']:.2f}x")
            for label, c in per.items()]
    return _rows(("races-only rerun", "cold s: full / races only", "warm s: full / races only"), rows) if rows else []
def _smith(smith: dict[str, Any]) -> list[str]:
    """Per planted interpreter bug: the seconds from the start of its campaign to the first finding."""
    rows = [(name, m["backend"], f"{m['first_s']:.1f} s" if m["found"] else f"missed ({m['seconds']:.0f} s)",
             str(m["programs"])) for name, m in smith.get("mutants", {}).get("mutants", {}).items()]
    return _rows(("planted bug (smith)", "backend", "first finding", "programs"), rows) if rows else []


def _kills(kills: dict[str, Any]) -> list[str]:
    """Per class and planted bug: each campaign's first kill and its seconds from the campaign's start."""
    def cell(got: dict[str, Any] | None) -> str:
        if got is None:
            return "not run"
        return f"{got['first_s']:.1f} s" if got["killed"] else f"missed ({got['seconds']:.0f} s)"

    rows = [(str(b["class"]), name, b["backend"], cell(b.get("smith")), cell(b.get("conformance")))
            for name, b in sorted(kills.get("bugs", {}).items(), key=lambda item: item[1]["class"])]
    return _rows(("class", "planted bug", "backend", "smith: first kill", "conformance: first kill"), rows) \
        if rows else []


def render(results: dict[str, Any]) -> str:
    """Headline figures with their targets, then per-mutant times and per-backend costs."""
    m = results.get("machine", {})
    lines = [f"machine: {m.get('cores')} cores, {m.get('cpu_model')}, load {m.get('load_average')}, "
             f"jax {m.get('jax')}; scale={results.get('scale')}; {results.get('seconds', 0):.0f} s", ""]
    lines += _rows(("figure", "value", "target"),
                   [(label, _fmt(results.get(key)), target) for key, label, target in HEADLINES if key in results])
    for block in (_mutants(results.get("detection", {})), _deadlocks(results.get("deadlock", {})),
                  _costs(results.get("cost", {})), _cold_warm(results.get("cold_warm", {})),
                  _precision(results.get("precision", {})),
                  _faults(results.get("faults", {})), _races_only(results.get("races_only", {})),
                  _smith(results.get("smith", {})), _kills(results.get("kills", {}))):
        if block:
            lines += ["", *block]
    return "\n".join(lines)
