"""``python -m benchmarks.conformance_kills``: planted interpreter bugs by class, and what kills them.

Per planted bug of ``tests/campaigns/smith/_classes.py`` (its class, 1 to 4, and the
interpreter it lives in), two campaigns with the bug planted in this process:

- ``smith``: a campaign on both interpreters (as ``smith --backends interpret,tpu_interpret``)
  of at most ``--smith-budget`` seconds, stopped at its first finding;
- ``conformance``: the rows of a default conformance run (3 examples, seed 0) that
  exercise the bug's class (``conformance_rows``: catalog kernels that alias for class 1,
  under vmap for class 2, with masked loads or stores for class 3, then the planted-bug rows of sanitizer
  conformance whose verdicts name one of the bug's interpreters), one row after another
  on those interpreters, to the first row that fails (a kill).

A kill counts only once its reproducer is checked: the finding's case re-run fails with
the bug planted and passes without it (smith: ``recheck`` of the finding's case; a missing
expected finding: ``sanitizer.recheck``, the same search again). The table prints, per
class, each bug's first kill and its time from the start of that campaign.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "conformance_kills.json"
_BUGS = Path(__file__).resolve().parent.parent / "tests" / "campaigns" / "smith" / "_classes.py"
BACKENDS = ("interpret", "tpu_interpret")


def _bugs() -> Any:
    """The planted bugs' module (a test helper, loaded as a package so its relative import works)."""
    root = _BUGS.parents[3]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("tests.campaigns.smith._classes")


def smith_kill(name: str, budget_s: float, out: Path) -> dict[str, Any]:
    """A smith campaign with bug ``name`` planted, to its first finding, reproducer-checked."""
    from pallas_verify.campaigns.smith.campaign import SmithOptions, smith
    from pallas_verify.campaigns.smith.recheck import recheck
    from pallas_verify.campaigns.smith.spec import campaign_spec
    from pallas_verify.findings import FINDING_KINDS

    bugs, spec = _bugs(), campaign_spec(list(BACKENDS))
    started = time.monotonic()
    with bugs.planted(name):
        run = smith(SmithOptions(backends=BACKENDS, budget_s=budget_s, out_dir=out / "smith" / name, seed=0,
                                 isolate="never", stop_on=FINDING_KINDS), stream=io.StringIO())
    found = sorted((f for f in run.report.findings if f.evidence.get("recheck") == "reproduces"),
                   key=lambda f: f.elapsed_s)
    first = found[0] if found else None
    clean = first is not None and recheck(first, spec, isolate="never").evidence.get("recheck") != "reproduces"
    return {"killed": bool(first and clean), "kill": f"{first.kind} on {first.backend}" if first else None,
            "first_s": round(first.elapsed_s, 1) if first else None, "programs": run.programs,
            "reproducer": "fails with the bug, passes without" if clean else
            ("passes without the bug too" if first else None), "seconds": round(time.monotonic() - started, 1)}


def conformance_rows(cls: int) -> list[Any]:
    """The rows of a default conformance run that exercise class ``cls``, in catalog order:
    catalog kernels that alias (1), run under vmap (2: a vmap transform or a kernel that
    vmaps itself), with masked loads or stores (3), then the planted-bug rows (sanitizer
    conformance)."""
    from pallas_verify.campaigns.sanitizer import planted_rows
    from reference_kernels import catalog

    if cls == 1:
        specs = [s for s in catalog() if "aliasing" in s.features]
    elif cls == 2:
        specs = [s for s in catalog() if "vmap" in s.transforms or "vmap" in s.features]
    elif cls == 3:
        specs = [s for s in catalog() if {"masked_load", "masked_store"} & set(s.features)]
    else:
        specs = []
    return [*specs, *planted_rows()]


def conformance_kill(name: str, out: Path) -> dict[str, Any]:
    """The rows of a default conformance run (seed 0, 3 examples) that exercise the bug's
    class, one after another on the interpreters the bug lives in, with bug ``name``
    planted, to the first row that fails."""
    from pallas_verify.campaigns.conformance import run_conformance
    from pallas_verify.campaigns.sanitizer import Planted

    bugs = _bugs()
    backends = BACKENDS if bugs.BUGS[name].backend == "both" else (bugs.BUGS[name].backend,)
    rows = [r for r in conformance_rows(bugs.BUGS[name].cls)
            if not isinstance(r, Planted) or set(r.verdicts) & set(backends)]
    started, ran = time.monotonic(), 0
    for row in rows:
        ran += 1
        planted = [row] if isinstance(row, Planted) else []
        with bugs.planted(name):
            report = run_conformance([] if planted else [row], backends=backends, out_dir=out / "conformance" / name,
                                     seed=0, progress=lambda _: None, planted=planted, isolate="never")
        failed = [r for r in report.results if r.status == "fail"]
        if not failed:
            continue
        first_s, cell = time.monotonic() - started, failed[0]
        checked = _checked(bugs, name, row, cell.backend)
        return {"killed": checked, "kill": f"{cell.kernel} on {cell.backend}: {cell.reason}",
                "first_s": round(first_s, 1), "rows": ran, "backends": list(backends),
                "reproducer": "fails with the bug, passes without" if checked else "passes without the bug too",
                "seconds": round(time.monotonic() - started, 1)}
    return {"killed": False, "kill": None, "first_s": None, "rows": ran, "backends": list(backends),
            "seconds": round(time.monotonic() - started, 1)}


def _checked(bugs: Any, name: str, row: Any, backend: str) -> bool:
    """The failed row's reproducer, run in this process: the same search again (seed 0, 3
    examples) fails with the bug planted and passes without it. A planted-bug row's is
    ``sanitizer.recheck`` (exit 1 while the expected finding is missing, 0 once it shows);
    a correct kernel's, its search finding something."""
    from pallas_verify.campaigns.sanitizer import Planted, recheck
    from pallas_verify.exits import EXIT_FIXED, EXIT_REPRODUCES
    from pallas_verify.loader import spec_ref

    def fails() -> bool:
        if isinstance(row, Planted):
            want = row.verdicts.get(backend, ())
            if not want:  # a finding where none is expected: the row fails while it shows
                return not _clean(row.spec, backend)
            status = recheck(spec_ref(row.spec), backend, want, seed=0, max_examples=3, profile="ci",
                             isolate="never")
            assert status in (EXIT_REPRODUCES, EXIT_FIXED), status
            return status == EXIT_REPRODUCES
        return not _clean(row, backend)

    with bugs.planted(name):
        with_bug = fails()
    return with_bug and not fails()


def _clean(spec: Any, backend: str) -> bool:
    import tempfile

    from pallas_verify.engine import verify

    with tempfile.TemporaryDirectory(prefix="pv-bench-kill-") as out:
        report = verify(spec, [backend], 3, 0, profile="ci", out_dir=out, isolate="never")
    return not [f for f in report.findings if f.backend == backend]


def kills(budget_s: float, out: Path, only: tuple[str, ...] = (), campaigns: tuple[str, ...] = ("smith",
                                                                                              "conformance")) -> dict:
    bugs, rows = _bugs(), {}
    for name, bug in bugs.BUGS.items():
        if only and name not in only:
            continue
        row: dict[str, Any] = {"class": bug.cls, "backend": bug.backend, "where": bug.where}
        if "conformance" in campaigns:
            row["conformance"] = conformance_kill(name, out)
        if "smith" in campaigns:
            row["smith"] = smith_kill(name, budget_s, out)
        rows[name] = row
    return {"smith_budget_s": budget_s, "bugs": rows}


def render(results: dict[str, Any]) -> str:
    """The kill table, per class: each bug's first kill by each campaign and its time."""
    lines = [f"planted interpreter bugs by class (smith: at most {results['smith_budget_s']:.0f} s on "
             f"{', '.join(BACKENDS)}; conformance: the rows of its class, 3 examples; seed 0)"]
    for cls in sorted({row["class"] for row in results["bugs"].values()}):
        lines.append(f"class {cls}:")
        for name, row in results["bugs"].items():
            if row["class"] != cls:
                continue
            cells = []
            for campaign in ("smith", "conformance"):
                got = row.get(campaign)
                if got is None:
                    continue
                cells.append(f"{campaign} " + (f"{got['first_s']:.1f} s ({got['kill']})" if got["killed"]
                                               else "missed"))
            lines.append(f"  {name:<30} {row['backend']:<14} " + "; ".join(cells))
    killed = sum(any((row.get(c) or {}).get("killed") for c in ("smith", "conformance"))
                 for row in results["bugs"].values())
    lines.append(f"killed: {killed}/{len(results['bugs'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conformance_kills", description=__doc__)
    parser.add_argument("--smith-budget", type=float, default=180.0, help="seconds per smith campaign, at most")
    parser.add_argument("--bugs", default="", help="comma-separated planted bugs (default: all)")
    parser.add_argument("--campaigns", default="smith,conformance")
    parser.add_argument("--out", default="pv-bench-kills")
    args = parser.parse_args(argv)
    from pallas_verify._env import configure

    configure()
    results = kills(args.smith_budget, Path(args.out), tuple(b for b in args.bugs.split(",") if b),
                    tuple(args.campaigns.split(",")))
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"bugs": {}}
    bugs = {name: {**old.get("bugs", {}).get(name, {}), **row} for name, row in results["bugs"].items()}
    merged = {**old, **results, "bugs": {**old.get("bugs", {}), **bugs}}  # a bug's other campaign is kept
    RESULTS.write_text(json.dumps(merged, indent=2) + "\n")
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
