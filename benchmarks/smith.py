"""``python -m benchmarks.smith``: generated-program campaigns, measured.

Three figures (printed, and written to benchmarks/smith_results.json):

1. rates: one campaign on interpret, tpu_interpret and mosaic_tpu:v5e; programs per
   minute per backend (the engine's examples per backend over its seconds), validity;
2. validity, exactly: N fresh programs run once on each interpreter, counting rejections;
3. backend mutation score: per planted interpreter bug (tests/campaigns/smith/_mutants.py), a
   campaign on the HLO interpreter with the bug planted; found or not, and how fast.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "smith_results.json"
_MUTANTS = Path(__file__).resolve().parent.parent / "tests" / "campaigns" / "smith" / "_mutants.py"


def _mutants() -> Any:
    spec = importlib.util.spec_from_file_location("smith_mutants", _MUTANTS)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def rates(budget_s: float, out: Path) -> dict[str, Any]:
    from pallas_verify.campaigns.smith.campaign import SmithOptions, smith

    run = smith(SmithOptions(backends=("interpret", "tpu_interpret", "mosaic_tpu:v5e"), budget_s=budget_s,
                             out_dir=out / "rates", seed=0))
    data = run.to_dict()
    return {"budget_s": budget_s, "programs": data["programs"], "validity": data["validity"],
            "backends": data["backends_run"], "findings": [(f["kind"], f["backend"]) for f in data["findings"]],
            "not_supported": data["not_supported"]}


def exact_validity(n: int) -> dict[str, Any]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pallas_verify.backends import registry
    from pallas_verify.campaigns.smith.spec import SPEC
    from pallas_verify.case import Case

    counts = {"programs": 0, "interpret": 0, "tpu_interpret": 0, "rejections": []}

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


def mutation_score(budget_s: float, out: Path) -> dict[str, Any]:
    from pallas_verify.campaigns.smith.campaign import SmithOptions, smith

    mutants, rows = _mutants(), {}
    for name in mutants.MUTANTS:
        started = time.monotonic()
        with mutants.planted(name):
            run = smith(SmithOptions(backends=("interpret",), budget_s=budget_s, out_dir=out / name, seed=0,
                                     isolate="never"))
        real = [f for f in run.report.findings if f.kind in ("mismatch", "backend_divergence")]
        rows[name] = {"found": bool(real), "first_s": min((f.elapsed_s for f in real), default=None),
                      "kinds": sorted({f.kind for f in run.report.findings}), "programs": run.programs,
                      "seconds": round(time.monotonic() - started, 1)}
    return {"budget_s": budget_s, "mutants": rows, "found": sum(r["found"] for r in rows.values()), "total": len(rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.smith", description=__doc__)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of the rates campaign")
    parser.add_argument("--mutant-budget", type=float, default=300.0, help="seconds per planted bug")
    parser.add_argument("--validity-programs", type=int, default=100)
    parser.add_argument("--sections", default="rates,validity,mutants")
    parser.add_argument("--out", default="pv-bench-smith")
    args = parser.parse_args(argv)
    out, results = Path(args.out), {}
    sections = args.sections.split(",")
    if "rates" in sections:
        results["rates"] = rates(args.budget, out)
    if "validity" in sections:
        results["validity"] = exact_validity(args.validity_programs)
    if "mutants" in sections:
        results["mutants"] = mutation_score(args.mutant_budget, out)
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    RESULTS.write_text(json.dumps({**old, **results}, indent=2) + "\n")
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
