"""The cost of a verdict, cold and warm, against a hand-written test of the same examples.

For each correct kernel (a few from the catalog, a few from jax's own tests and ops) and
each interpreter (``interpret``, ``tpu_interpret``), with the ``ci`` profile's examples:

- **whole commands**, each a fresh process, process start included:
  ``pallas-verify verify FILE::SPEC --backends B --profile ci`` (``cli``) and ``pytest``
  on a module holding the spec, through the plugin (``plugin``), against ``pytest`` on a
  hand-written Hypothesis test of the same examples (``benchmarks.handwritten``: the
  kernel jitted under the interpreter, the reference jitted, ``assert_allclose``). *Cold*:
  an empty persistent compilation cache and no kept pass (folders of their own per
  kernel, backend and front end); *warm*: the same command again, which reuses the pass
  the cold run kept (``pallas_verify.passes``: the same seeded run of the same files);
  *warm, searched*: the same command once more with kept passes off, searching again
  on the compiles the cold run kept.
- **in process**: ``engine.verify`` in this process (its workers started and warmed on
  another kernel first, as ``clean_pass`` does), against the same hand-written steps in
  this process (``clean_pass``'s bare run, the persistent cache paused for it). *Cold*:
  this kernel's compiles not yet kept; *warm*: kept. Before each timed run the compiled
  references of this process are dropped, jax's in-memory caches cleared and the
  workers restarted and warmed again, so a warm run has only the persistent cache.

The hand-written side never has a persistent cache. Figures per backend: the median
ratio over kernels and the worst kernel's ratio. The specs run without transforms (the
hand-written test runs the bare kernel only), as in ``clean_pass``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.clean_pass import _WARM_UP, _bare, _recorded, _specs_file
from benchmarks.handwritten import command as hand_command
from benchmarks.handwritten import write_test

__all__ = ["BACKENDS", "KERNELS", "cold_warm"]

BACKENDS = ("interpret", "tpu_interpret")
#: Correct kernels (module, name): the catalog's, then jax's tests' and ops' (upstream).
KERNELS: tuple[tuple[str, str], ...] = (
    ("reference_kernels.elementwise", "RAGGED_ADD"), ("reference_kernels.reductions", "ROW_SUM"),
    ("reference_kernels.norms", "SOFTMAX"), ("reference_kernels.matmul", "MATMUL_F32"),
    ("reference_kernels.upstream.tests_tpu_ops", "JT_ROLL"),
    ("reference_kernels.upstream.tests_tpu_ops", "JT_SWITCH"),
)
#: The commands' results: (front end, temperature) -> ratio key.
RUNS = (("cli", "cold"), ("cli", "warm"), ("cli", "warm_searched"),
        ("plugin", "cold"), ("plugin", "warm"), ("plugin", "warm_searched"))
#: The temperatures in the order each front end's commands run, and whether passes are kept.
_TEMPERATURES = (("cold", True), ("warm", True), ("warm_searched", False))
_PLUGIN_TEST = "from {module} import {name} as SPEC  # noqa: F401\n"


def _environment(pythonpath: str | None) -> dict[str, str]:
    from pallas_verify.execution.process import import_path

    return {**os.environ, "PYTHONPATH": pythonpath or import_path()}


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str], folder: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it started and reaped)."""
    cpu, started = _cpu_of_children(), time.perf_counter()
    run = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode} on a correct kernel:\n"
                           f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return seconds, _cpu_of_children() - cpu


def _commands(folder: Path, specs: Path, index: int, backend: str, examples: int) -> dict[str, list[str]]:
    """The pallas-verify commands of one cell: the CLI's, and pytest through the plugin."""
    (folder / f"test_pv_{index}_{backend}.py").write_text(_PLUGIN_TEST.format(module=specs.stem, name=f"S{index}"))
    return {
        "cli": [sys.executable, "-m", "pallas_verify.cli", "verify", f"{specs}::S{index}", "--backends", backend,
                "--profile", "ci", "--max-examples", str(examples), "--out", str(folder / "out")],
        "plugin": [sys.executable, "-m", "pytest", f"test_pv_{index}_{backend}.py", "-q", "-p", "no:cacheprovider",
                   "--pv-backends", backend, "--pv-profile", "ci", "--pv-max-examples", str(examples)],
    }


def whole_commands(folder: Path, specs: Path, index: int, backend: str, examples: int, hand: Path, *,
                   repeats: int = 1, pythonpath: str | None = None) -> dict[str, Any]:
    """Wall and CPU seconds of each whole command of one cell (medians of ``repeats``,
    taken in turn so that a change in the machine's load falls on every command alike),
    and their ratios to the hand-written test's (``ratios``: wall; ``cpu_ratios``: the
    CPU time of the command and of every process it started). ``pythonpath``: where the
    pallas-verify commands import it from (default ours)."""
    from pallas_verify._env import COMPILE_CACHE_ENV
    from pallas_verify.passes import PASS_CACHE_ENV

    env = _environment(pythonpath)
    commands = _commands(folder, specs, index, backend, examples)
    samples: dict[str, list[tuple[float, float]]] = {"hand": [], **{f"{f}_{t}": [] for f, t in RUNS}}
    for r in range(repeats):
        samples["hand"].append(_timed(hand_command(hand), folder, _environment(None)))
        for front in ("cli", "plugin"):
            cache = folder / f"cache-{index}-{backend}-{front}-{r}"
            for temperature, kept in _TEMPERATURES:
                samples[f"{front}_{temperature}"].append(
                    _timed(commands[front], folder, {**env, COMPILE_CACHE_ENV: str(cache),
                                                     PASS_CACHE_ENV: str(cache / "passes") if kept else "off"}))
    seconds = {k: statistics.median(w for w, _ in v) for k, v in samples.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in samples.items()}
    return {"seconds": seconds, "cpu_seconds": cpu,
            "ratios": {f"{f}_{t}": seconds[f"{f}_{t}"] / seconds["hand"] for f, t in RUNS},
            "cpu_ratios": {f"{f}_{t}": cpu[f"{f}_{t}"] / cpu["hand"] for f, t in RUNS}}


def _fresh_start(warm_up: str, backend: str, folder: Path) -> None:
    """This process and its workers as a new session finds them: no compiled reference,
    jax's caches empty, the workers restarted and warmed on another kernel."""
    import jax

    from pallas_verify.engine import verify
    from pallas_verify.execution.isolation import shared_worker
    from pallas_verify.loader import load_spec
    from pallas_verify.reference import forget_compiled

    for slot in ("interpreters", "tracer"):
        shared_worker(slot).close()
    forget_compiled()
    jax.clear_caches()
    verify(load_spec(warm_up), [backend], 1, 0, profile="ci", out_dir=str(folder / "out"))
    forget_compiled()
    jax.clear_caches()


def _verified(ref: str, backend: str, examples: int, folder: Path) -> tuple[float, list[Any]]:
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    spec = load_spec(ref)
    with _recorded() as seen:
        started = time.perf_counter()
        report = verify(spec, [backend], examples, 0, profile="ci", out_dir=str(folder / "out"))
        seconds = time.perf_counter() - started
    [result] = [r for r in report.results if r.transform is None]
    if result.status != "pass":
        raise RuntimeError(f"{spec.name} on {backend}: {result.status} ({result.reason}) on a correct kernel")
    return seconds, list(seen)


def in_process(folder: Path, specs: Path, index: int, backend: str, examples: int) -> dict[str, Any]:
    """Seconds of ``verify`` cold and warm in this process, the hand-written steps' on the
    same examples, their ratios, and the examples (for the hand-written test file)."""
    import jax

    from benchmarks.bare import _jitted
    from pallas_verify._jax_compat import compile_cache
    from pallas_verify.loader import load_spec

    warm_up = f"{specs}::S_WARM_UP"
    _fresh_start(warm_up, backend, folder)
    cold, seen = _verified(f"{specs}::S{index}", backend, examples, folder)
    _fresh_start(warm_up, backend, folder)
    warm, again = _verified(f"{specs}::S{index}", backend, examples, folder)
    if len(again) != len(seen):
        raise RuntimeError(f"S{index} on {backend}: the warm run drew {len(again)} examples, the cold {len(seen)}")
    jax.clear_caches()
    _jitted.cache_clear()
    with compile_cache.paused():
        bare = _bare(load_spec(f"{specs}::S{index}"), backend, seen)
    return {"seconds": {"bare": bare, "pv_cold": cold, "pv_warm": warm},
            "ratios": {"cold": cold / bare, "warm": warm / bare}, "examples": seen}


def _summary(cells: list[dict[str, Any]], where: str, keys: tuple[str, ...], of: str = "ratios") -> dict[str, Any]:
    """Per backend and key: the median ratio (``of``) over kernels and the worst kernel."""
    out: dict[str, Any] = {}
    for backend in BACKENDS:
        mine = [c for c in cells if c["backend"] == backend and where in c]
        for key in keys:
            ratios = [(c[where][of][key], c["kernel"]) for c in mine]
            if ratios:
                worst, kernel = max(ratios)
                out[f"{backend}_{key}"] = {"median": statistics.median(r for r, _ in ratios), "worst": worst,
                                           "worst_kernel": kernel}
    return out


def cold_warm(*, examples: int = 10, kernels: tuple[tuple[str, str], ...] = KERNELS,
              backends: tuple[str, ...] = BACKENDS, repeats: int = 1, commands: bool = True) -> dict[str, Any]:
    """Cold and warm ratios per interpreter, whole commands and in process (module doc),
    measured in a process of its own (``main``): JAX's persistent cache, once turned on,
    stays on in a process, and the caller's must not change."""
    with tempfile.TemporaryDirectory(prefix="pv-cold-warm-out-") as tmp:
        out = Path(tmp) / "cold_warm.json"
        argv = [sys.executable, "-m", "benchmarks.cold_warm", "--out", str(out), "--examples", str(examples),
                "--repeats", str(repeats), "--backends", ",".join(backends),
                "--kernels", ",".join(f"{m}:{n}" for m, n in kernels), *([] if commands else ["--no-commands"])]
        run = subprocess.run(argv, env=_environment(None), capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"the cold/warm measurement failed (exit {run.returncode}):\n{run.stderr[-5000:]}")
        return json.loads(out.read_text())


def measure(*, examples: int, kernels: tuple[tuple[str, str], ...], backends: tuple[str, ...], repeats: int,
            commands: bool) -> dict[str, Any]:
    """``cold_warm``'s figures, measured in this process (which keeps the cache on after)."""
    from pallas_verify._env import COMPILE_CACHE_ENV
    from pallas_verify._jax_compat import compile_cache
    from pallas_verify.loader import load_spec

    folder = Path(tempfile.mkdtemp(prefix="pv-cold-warm-"))
    specs = _specs_file(folder, kernels)
    with specs.open("a") as f:  # the warm-up kernel, not one of the timed ones
        f.write(f"S_WARM_UP = dataclasses.replace(getattr(importlib.import_module({_WARM_UP[0]!r}), "
                f"{_WARM_UP[1]!r}), transforms=())\n")
    previous = os.environ.get(COMPILE_CACHE_ENV)
    os.environ[COMPILE_CACHE_ENV] = str(folder / "cache-in-process")  # this process's workers inherit it
    if compile_cache.enable() is None:
        raise RuntimeError("the persistent compilation cache could not be turned on in this process (it was "
                           "turned off or set up before): run this section in a process of its own")
    cells = []
    try:
        for i, (module, name) in enumerate(kernels):
            for backend in backends:
                cell: dict[str, Any] = {"kernel": load_spec(f"{specs}::S{i}").name, "backend": backend}
                cell["in_process"] = in_process(folder, specs, i, backend, examples)
                seen = cell["in_process"].pop("examples")
                cell["examples"] = len(seen)
                if commands:
                    hand = write_test(folder, f"{name.lower()}_{backend}", module=module, attr=name,
                                      spec=load_spec(f"{specs}::S{i}"), backend=backend, examples=seen)
                    cell["commands"] = whole_commands(folder, specs, i, backend, examples, hand, repeats=repeats)
                cells.append(cell)
    finally:
        if previous is None:
            os.environ.pop(COMPILE_CACHE_ENV, None)
        else:
            os.environ[COMPILE_CACHE_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)
    commands_summary = _summary(cells, "commands", tuple(f"{f}_{t}" for f, t in RUNS))
    process_summary = _summary(cells, "in_process", ("cold", "warm"))
    out: dict[str, Any] = {"examples": examples, "repeats": repeats, "cells": cells, "commands": commands_summary,
                           "commands_cpu": _summary(cells, "commands", tuple(f"{f}_{t}" for f, t in RUNS), "cpu_ratios"),
                           "in_process": process_summary}
    for backend in backends:
        for key in (f"{f}_{t}" for f, t in RUNS):
            figure = commands_summary.get(f"{backend}_{key}")
            out[f"{key}_ratio_{backend}"] = figure["median"] if figure else None
            out[f"{key}_ratio_{backend}_worst"] = figure["worst"] if figure else None
        for key in ("cold", "warm"):
            figure = process_summary.get(f"{backend}_{key}")
            out[f"in_process_{key}_ratio_{backend}"] = figure["median"] if figure else None
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.cold_warm --out FILE``: ``measure`` in this process, to FILE."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cold_warm", description=main.__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--kernels", default=",".join(f"{m}:{n}" for m, n in KERNELS), help="MODULE:NAME,...")
    parser.add_argument("--no-commands", action="store_true", help="in process only")
    args = parser.parse_args(argv)
    from pallas_verify._env import configure

    configure()
    kernels = tuple(tuple(k.rsplit(":", 1)) for k in args.kernels.split(",") if k)
    result = measure(examples=args.examples, kernels=kernels, backends=tuple(args.backends.split(",")),  # type: ignore[arg-type]
                     repeats=args.repeats, commands=not args.no_commands)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
