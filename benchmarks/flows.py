"""``python -m benchmarks.flows``: the modules a value passes through, in call order, and
the calls that cross the seam to JAX.

Two flows and the seam, each run in this process:

- ``verify``: the spec given to ``engine.verify`` (``elementwise.SCALE_SHIFT``, 2
  examples, ``interpret``, ``isolate="never"`` so the cases run here too);
- ``fuzz``: the options given to ``campaigns.fuzz`` and the units of work
  (``execution.Work``) made from them, over two nights with the same options: one slice
  of 2 examples of ``mutants.grid:rotated_index_map_spec`` on ``interpret`` (it finds the
  mismatch and keeps it in the failure database), then a night that replays it. An
  executor that runs each unit in this process (``Inline``) shows the unit's side (its
  entry) as well as the driver's; its frames count as ``execution.local``'s, the module
  it stands in for;
- ``seam``: the calls that cross into ``pallas_verify._jax_compat``, the one package that
  reads JAX's internals, during ``engine.verify`` of the same spec on ``interpret`` and
  ``tpu_interpret`` (2 examples each, in this process): per module of the package, the
  functions of the seam it calls directly, and the functions of the seam JAX calls back
  while a kernel runs (hooks, the grid point recorder). No other module reads JAX's
  internals (``tests/quality/test_layers.py``), so these calls are all of the package's
  reliance on them. Run alone (``--flows seam``) for the whole list: what an earlier flow
  of the same process left in a cache is not asked again.

What is counted, under ``sys.setprofile``: a Python call *carries* the value when the value
is one of the called function's arguments (in a tuple, list or dict argument too), or,
unless ``--direct``, an attribute (``__dict__`` entry) of one of them (a ``Case`` holding
the spec, a run state holding the options, a ``Done`` holding its unit); ``self`` counts,
except when ``self`` is the value itself (the value's own methods, ``spec.inputs``, are
not the value passing through a module). A carrying call *enters* a module when the
nearest ``pallas_verify`` frame below it (its caller, or the one that called the library
that calls it) is in a different ``pallas_verify`` module, or there is none (the first
call). Each call site (calling code and line, called function) counts once, the first
time it runs: the flow is the path the value takes, not how often a loop takes it (every
example, every backend). Printed per flow: the modules in order of entry, the number of
distinct modules, entries, and returns (entries into a module the flow had already
entered: entries minus distinct modules), the entries per module, and every entry (from
module -> to module: function).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["Flow", "Inline", "Seam", "fuzz_flow", "seam_flow", "trace", "verify_flow"]

SPEC_REF = "reference_kernels.elementwise:SCALE_SHIFT"
SEAM = "pallas_verify._jax_compat"
MUTANT_REF = "reference_kernels.mutants.grid:rotated_index_map_spec"
_VARARGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _module(frame: FrameType | None) -> str | None:
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    if name == __name__ and frame is not None and frame.f_code.co_qualname.startswith("Inline."):
        return "pallas_verify.execution.local"  # the executor it stands in for
    return name if name == "pallas_verify" or name.startswith("pallas_verify.") else None


class Flow:
    """The module entries of the calls that carry a value ``carries`` says is the one
    followed (module docstring)."""

    def __init__(self, carries: Callable[[Any], bool], *, held: bool = True) -> None:
        self.value, self.held = carries, held
        self.sites: set[tuple[Any, int, Any]] = set()
        self.entries: list[tuple[str, str, str]] = []  # (from module or "-", to module, function)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if callee is None:
            return
        below = frame.f_back
        while below is not None and _module(below) is None:
            below = below.f_back
        caller = _module(below)
        if caller == callee or not self._carries(frame):
            return
        site = (below.f_code if below is not None else None, below.f_lineno if below is not None else 0, frame.f_code)
        if site in self.sites:
            return
        self.sites.add(site)
        self.entries.append((caller or "-", callee, frame.f_code.co_qualname))

    def _carries(self, frame: FrameType) -> bool:
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount + bin(code.co_flags & _VARARGS).count("1")
        values = frame.f_locals
        for name in code.co_varnames[:count]:
            arg = values.get(name)
            if name == "self" and self.value(arg):
                return False
            items = (arg.values() if isinstance(arg, dict) else arg if isinstance(arg, tuple | list) else (arg,))
            if any(self.value(item) or (self.held and self._holds(item)) for item in items):
                return True
        return False

    def _holds(self, obj: Any) -> bool:
        try:
            attrs = object.__getattribute__(obj, "__dict__")
        except (AttributeError, TypeError):
            return False
        return isinstance(attrs, dict) and any(self.value(v) for v in list(attrs.values()))

    def summary(self) -> dict[str, Any]:
        modules = [to for _, to, _ in self.entries]
        counts = collections.Counter(modules)
        return {"modules": list(dict.fromkeys(modules)), "distinct": len(counts), "entries": len(modules),
                "returns": len(modules) - len(counts), "entries_per_module": dict(counts.most_common()),
                "path": [f"{a} -> {b}: {fn}" for a, b, fn in self.entries]}


def trace(carries: Callable[[Any], bool], call: Callable[[], Any], *, held: bool = True) -> Flow:
    """Run ``call`` with the calls carrying a value ``carries`` accepts recorded (``held``:
    also as an attribute of an argument)."""
    return _profiled(Flow(carries, held=held), call)


def _profiled(profiler: Any, call: Callable[[], Any]) -> Any:
    """Run ``call`` with ``profiler.profile`` as the profile function; ``profiler``."""
    sys.setprofile(profiler.profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return profiler


def verify_flow(out: Path, held: bool = True) -> Flow:
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    spec = load_spec(SPEC_REF)
    return trace(lambda value: value is spec, lambda: verify(spec, ["interpret"], max_examples=2, seed=1, isolate="never",
                                      out_dir=out / "verify", shrink_budget_s=5.0), held=held)


class Seam:
    """The calls into ``SEAM`` from outside it: made by another module of the package
    (directly, or through the standard library: a context manager's generator), or by
    JAX calling back into it (a ``jax`` or ``jaxlib`` frame between the call and the
    package)."""

    def __init__(self) -> None:
        self.asked: dict[str, set[str]] = {}  # caller module -> the seam's functions it calls
        self.called_back: set[str] = set()  # the seam's functions JAX calls

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if callee is None or not (callee == SEAM or callee.startswith(SEAM + ".")):
            return
        below, by_jax = frame.f_back, False
        while below is not None and _module(below) is None:
            by_jax |= str(below.f_globals.get("__name__", "")).split(".")[0] in ("jax", "jaxlib")
            below = below.f_back
        caller = _module(below)
        function = f"{callee.removeprefix(SEAM + '.')}.{frame.f_code.co_qualname}"
        if by_jax or caller is None:
            self.called_back.add(function)
        elif not (caller == SEAM or caller.startswith(SEAM + ".")):
            self.asked.setdefault(caller, set()).add(function)

    def summary(self) -> dict[str, Any]:
        functions = set().union(self.called_back, *self.asked.values())
        return {"modules": len(self.asked), "functions": len(functions),
                "asked": {m: sorted(f) for m, f in sorted(self.asked.items())},
                "called_back": sorted(self.called_back)}


def seam_flow(out: Path, held: bool = True) -> Seam:
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    spec = load_spec(SPEC_REF)
    return _profiled(Seam(), lambda: verify(spec, ["interpret", "tpu_interpret"], max_examples=2, seed=1,
                                            isolate="never", out_dir=out / "seam", shrink_budget_s=5.0))


class Inline:
    """An executor that runs each unit in this process when it is submitted."""

    name = "inline"

    def __init__(self) -> None:
        self._ends: list[Any] = []

    def __enter__(self) -> Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def slots(self) -> int:
        return 1

    def free(self) -> int:
        return 0 if self._ends else 1

    def accepts(self, hardware: str | None) -> bool:
        return self.free() > 0

    def offers(self, hardware: str) -> str | None:
        return None

    def submit(self, work: Any) -> None:
        from pallas_verify.execution import Done, Update, run_entry

        updates: list[Any] = []
        value, failure = run_entry(work, sink=updates.append)
        self._ends += [Update(work=work, value=u) for u in updates] + [Done(work=work, value=value, failure=failure)]

    def poll(self, timeout_s: float) -> list[Any]:
        ends, self._ends = self._ends, []
        return ends

    def running(self) -> list[Any]:
        return [end.work for end in self._ends[-1:]]

    def cancel(self) -> list[Any]:
        return []

    def close(self) -> None:
        self._ends = []


def fuzz_flow(out: Path, held: bool = True) -> Flow:
    import io

    from pallas_verify import execution
    from pallas_verify.campaigns.fuzz import FuzzOptions, fuzz

    options = FuzzOptions(targets=(MUTANT_REF,), backends=("interpret",), budget_s=120.0, out_dir=out / "fuzz",
                          workers=1, seed=1, slice_examples=2, max_slices=1, timeout_s=60.0, shrink_budget_s=5.0)

    def nights() -> None:
        for night in (1, 2):
            report = fuzz(options, stream=io.StringIO())
            if not report.findings:
                raise RuntimeError(f"night {night} of the fuzz flow found nothing in {MUTANT_REF}")

    make = execution.make
    execution.make = lambda *args, **kwargs: Inline()  # type: ignore[assignment]
    try:
        return trace(lambda value: value is options or isinstance(value, execution.Work), nights, held=held)
    finally:
        execution.make = make


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.flows", description=__doc__.splitlines()[0])
    parser.add_argument("--flows", default="verify,fuzz,seam", help="comma-separated: verify, fuzz, seam")
    parser.add_argument("--direct", action="store_true",
                        help="count only calls that take the value itself, not an object holding it")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    flows = {"verify": verify_flow, "fuzz": fuzz_flow, "seam": seam_flow}
    results = {}
    with tempfile.TemporaryDirectory(prefix="pv-flows-") as tmp:
        for name in args.flows.split(","):
            results[name] = flows[name](Path(tmp), held=not args.direct).summary()
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for name, got in results.items():
        if name == "seam":
            _print_seam(got)
            continue
        print(f"{name}: {got['distinct']} modules, {got['entries']} entries, {got['returns']} returns")
        print("  modules: " + " -> ".join(m.removeprefix("pallas_verify.") for m in got["modules"]))
        print("  entries per module: " + ", ".join(f"{m.removeprefix('pallas_verify.')} {n}"
                                                   for m, n in got["entries_per_module"].items()))
        for step in got["path"]:
            print(f"    {step.replace('pallas_verify.', '')}")


def _print_seam(got: dict[str, Any]) -> None:
    short = SEAM.removeprefix("pallas_verify.")
    print(f"seam: {got['modules']} modules call {got['functions']} functions of {short}")
    for module, functions in got["asked"].items():
        print(f"  {module.removeprefix('pallas_verify.')} -> {short}: {', '.join(functions)}")
    print(f"  jax -> {short} (called back): {', '.join(got['called_back']) or 'none'}")


if __name__ == "__main__":
    main()
