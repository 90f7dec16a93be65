"""``python -m benchmarks.smith``: generated-program campaigns, measured.

Three figures (printed as a table, and written to benchmarks/smith_results.json):

1. rates: per backend (interpret, tpu_interpret), a campaign on that backend alone with
   one batch per core (``workers``): programs per minute of wall time, and the validity;
   then one campaign on both: programs per minute of each backend's own search time
   (how earlier figures were taken) and end to end;
2. validity, exactly: N fresh programs run once on each interpreter, counting rejections;
3. backend mutation score: per planted interpreter bug (tests/campaigns/smith/_mutants.py),
   a campaign on both interpreters (as ``smith --backends interpret,tpu_interpret``), with
   the bug planted, until its first mismatch or divergence: found or not, and the seconds
   from the start of the campaign.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "smith_results.json"
_MUTANTS = Path(__file__).resolve().parent.parent / "tests" / "campaigns" / "smith" / "_mutants.py"
_KILLS = ("mismatch", "backend_divergence")


def _mutants() -> Any:
    spec = importlib.util.spec_from_file_location("smith_mutants", _MUTANTS)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["smith_mutants"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _quiet() -> Any:
    import io

    return io.StringIO()


def rates(budget_s: float, out: Path, workers: int | None = None) -> dict[str, Any]:
    from pallas_verify.campaigns.smith.campaign import SmithOptions, smith

    result: dict[str, Any] = {"budget_s": budget_s, "workers": workers or len(os.sched_getaffinity(0)), "alone": {}}
    for backend in ("interpret", "tpu_interpret"):
        run = smith(SmithOptions(backends=(backend,), budget_s=budget_s, out_dir=out / f"rates-{backend}", seed=0,
                                 workers=workers), stream=_quiet())
        data = run.to_dict()
        result["alone"][backend] = {"programs": data["programs"], "programs_per_minute": data["programs_per_minute"],
                                    "validity": data["validity"], "seconds": round(data["seconds"], 1),
                                    "findings": [(f["kind"], f["backend"]) for f in data["findings"]]}
    run = smith(SmithOptions(backends=("interpret", "tpu_interpret"), budget_s=budget_s, out_dir=out / "rates-both",
                             seed=0, workers=workers), stream=_quiet())
    data = run.to_dict()
    result["both"] = {"programs": data["programs"], "programs_per_minute": data["programs_per_minute"],
                      "validity": data["validity"], "own_search_rates": data["backends_run"],
                      "findings": [(f["kind"], f["backend"]) for f in data["findings"]]}
    return result


def exact_validity(n: int) -> dict[str, Any]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pallas_verify.backends import registry
    from pallas_verify.campaigns.smith.spec import SPEC
    from pallas_verify.case import Case

    counts: dict[str, Any] = {"programs": 0, "interpret": 0, "tpu_interpret": 0, "rejections": []}

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data: Any) -> None:
        config = data.draw(SPEC.configs)
        inputs = data.draw(SPEC.inputs(config))
        counts["programs"] += 1
        for name in ("interpret", "tpu_interpret"):
            outcome = registry.get(name).run(Case(spec=SPEC, config=config, inputs=inputs, backend=name))
            if outcome.error is None:
                counts[name] += 1
            else:
                counts["rejections"].append(f"{name}: {outcome.error.type}: {outcome.error.message[:200]}")

    one()
    both = min(counts["interpret"], counts["tpu_interpret"])
    return {**counts, "validity_lower_bound": both / max(1, counts["programs"])}


def mutation_score(budget_s: float, out: Path, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per planted bug, a campaign on both interpreters (in this process, where the bug is
    planted) until its first mismatch or divergence, at most ``budget_s``."""
    from pallas_verify.campaigns.smith.campaign import SmithOptions, smith

    mutants, rows = _mutants(), {}
    for name, mutant in mutants.MUTANTS.items():
        if only and name not in only:
            continue
        started = time.monotonic()
        with mutants.planted(name):
            run = smith(SmithOptions(backends=("interpret", "tpu_interpret"), budget_s=budget_s, out_dir=out / name,
                                     seed=0, isolate="never", stop_on=_KILLS), stream=_quiet())
        real = [f for f in run.report.findings if f.kind in _KILLS]
        rows[name] = {"backend": mutant.backend, "where": mutant.where, "found": bool(real),
                      "kill": f"{real[0].kind} on {real[0].backend}" if real else None,
                      "first_s": round(min(f.elapsed_s for f in real), 1) if real else None,
                      "kinds": sorted({f.kind for f in run.report.findings}), "programs": run.programs,
                      "seconds": round(time.monotonic() - started, 1)}
    return {"budget_s": budget_s, "mutants": rows, "found": sum(r["found"] for r in rows.values()), "total": len(rows)}


def render(results: dict[str, Any]) -> str:
    """The figures as text tables."""
    lines = []
    if "rates" in results:
        r = results["rates"]
        lines += [f"programs per minute, {r['workers']} workers, {r['budget_s']:.0f} s campaigns:"]
        for backend, a in r["alone"].items():
            lines.append(f"  {backend:<14} alone: {a['programs_per_minute']:6.1f} programs/min ({a['programs']} programs, "
                         f"validity {a['validity']:.1%})")
        both = r["both"]
        own = ", ".join(f"{b} {v['programs_per_minute']}" for b, v in both["own_search_rates"].items())
        lines.append(f"  both backends: {both['programs_per_minute']:6.1f} programs/min end to end "
                     f"({both['programs']} programs, validity {both['validity']:.1%}); own search time: {own}")
    if "validity" in results:
        v = results["validity"]
        lines.append(f"validity: {v['validity_lower_bound']:.1%} ({v['programs']} fresh programs on both interpreters)")
    if "mutants" in results:
        m = results["mutants"]
        lines += [f"planted bugs found: {m['found']}/{m['total']} (campaigns of at most {m['budget_s']:.0f} s, "
                  "time to the first mismatch or divergence)"]
        for name, row in m["mutants"].items():
            first = f"{row['first_s']:.1f} s" if row["found"] else "missed"
            lines.append(f"  {name:<34} {row['backend']:<14} {first:>8}  ({row['programs']} programs"
                         + (f", {row['kill']})" if row["found"] else ")"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.smith", description=__doc__)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds of each rates campaign")
    parser.add_argument("--mutant-budget", type=float, default=180.0, help="seconds per planted bug, at most")
    parser.add_argument("--mutants", default="", help="comma-separated planted bugs (default: all)")
    parser.add_argument("--validity-programs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None, help="batches at once in the rates campaigns")
    parser.add_argument("--sections", default="rates,validity,mutants")
    parser.add_argument("--out", default="pv-bench-smith")
    args = parser.parse_args(argv)
    from pallas_verify._env import configure

    configure()
    out, results = Path(args.out), {}
    sections = args.sections.split(",")
    if "rates" in sections:
        results["rates"] = rates(args.budget, out, args.workers)
    if "validity" in sections:
        results["validity"] = exact_validity(args.validity_programs)
    if "mutants" in sections:
        results["mutants"] = mutation_score(args.mutant_budget, out, tuple(m for m in args.mutants.split(",") if m))
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    RESULTS.write_text(json.dumps({**old, **results}, indent=2) + "\n")
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
