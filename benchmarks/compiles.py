"""Compile reuse: XLA compilations per 100 examples, in the search, in shrinking, per rerun.

Compiles are counted with jax's public monitoring events: every XLA compilation records
a ``/jax/core/compile/backend_compile_duration`` event
(``jax.monitoring.register_event_duration_secs_listener``). Everything runs in this
process (``isolate="never"``) so that the listener sees every compile; the reference's
compiles (once per config) are counted too.

- ``search``: ``verify`` on correct catalog specs, one backend at a time, no findings, so
  every example is a search example.
- ``shrink``: ``verify`` with a shrink budget on specs with a planted bug; compiles after
  the first failure are shrinking's, over the examples run after it.
- ``metamorphic``: the grid order and the core count are applied at trace time (the first
  rerun of a (config, mode) changing them compiles, a repeat with new inputs must not);
  the fill, the DMA timing and race detection are given to the run compiled for the base
  mode (a rerun changing only them compiles nothing, even the first time). Counted per
  rerun kind too (``by_kind``).
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import tempfile
import threading
import time
from typing import Any

from benchmarks.sampling import draw_examples

__all__ = ["COMPILE_EVENT", "CompileCounter", "compile_reuse", "counter"]

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
SEARCH_SPECS: tuple[tuple[str, str], ...] = (
    ("reference_kernels.elementwise", "RAGGED_ADD"),
    ("reference_kernels.reductions", "ROW_SUM"),
)


@dataclasses.dataclass
class CompileCounter:
    """Times (perf_counter) and names (``jit(f)``) of every XLA compile seen in this process."""

    times: list[float] = dataclasses.field(default_factory=list)
    names: list[str] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def __call__(self, event: str, duration: float, **kwargs: Any) -> None:
        if event == COMPILE_EVENT:
            with self.lock:
                self.times.append(time.perf_counter())
                self.names.append(str(kwargs.get("fun_name", "?")))

    def since(self, start: float, end: float | None = None) -> int:
        return len(self.named_since(start, end))

    def named_since(self, start: float, end: float | None = None) -> list[str]:
        """The names of the compiles from ``start`` (to ``end``)."""
        with self.lock:
            return [n for t, n in zip(self.times, self.names, strict=True) if t >= start and (end is None or t < end)]


_COUNTER: list[CompileCounter] = []


def counter() -> CompileCounter:
    """The process's compile counter (registered with jax once)."""
    if not _COUNTER:
        import jax

        _COUNTER.append(CompileCounter())
        jax.monitoring.register_event_duration_secs_listener(_COUNTER[0])
    return _COUNTER[0]


def _spec(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def planted_ragged_add() -> Any:
    """RAGGED_ADD whose reference is off by one for more than 8 rows: a bug whose config
    must shrink (to rows=9), so shrinking compiles what it must."""
    import dataclasses as dc

    spec = _spec("reference_kernels.elementwise", "RAGGED_ADD")

    def reference(x: Any, y: Any, **config: Any) -> Any:
        return spec.reference(x, y, **config) + (1.0 if x.shape[0] > 8 else 0.0)

    return dc.replace(spec, name="ragged_add_planted_bug", reference=reference)


def _search(spec: Any, backend: str, max_examples: int, out_dir: str) -> dict[str, Any]:
    from pallas_verify.engine import verify

    count = counter()
    start = time.perf_counter()
    report = verify(spec, [backend], max_examples=max_examples, profile="ci", isolate="never", static=False,
                    out_dir=out_dir)
    examples = sum(r.examples for r in report.results)
    compiles = count.since(start)
    if report.findings:
        raise RuntimeError(f"correct catalog spec {spec.name} showed findings on {backend}: {report.findings[0].message}")
    return {"kernel": spec.name, "backend": backend, "examples": examples, "compiles": compiles}


def _shrink(spec: Any, backend: str, budget_s: float, out_dir: str) -> dict[str, Any]:
    from pallas_verify.engine import verify

    count = counter()
    start = time.perf_counter()
    report = verify(spec, [backend], profile="ci", isolate="never", static=False, shrink_budget_s=budget_s,
                    out_dir=out_dir)
    if not report.findings:
        raise RuntimeError(f"the planted bug of {spec.name} was not found on {backend}; nothing to shrink")
    first = min(report.findings, key=lambda f: f.elapsed_s)
    detected = first.evidence.get("examples_to_detect") or 0
    total = sum(r.examples for r in report.results)
    return {"kernel": spec.name, "backend": backend, "search_examples": detected,
            "search_compiles": count.since(start, start + first.elapsed_s),
            "shrink_examples": total - detected, "shrink_compiles": count.since(start + first.elapsed_s)}


def _metamorphic(examples: int, seed: int) -> dict[str, Any]:
    """Compiles of TPU interpret reruns: first sight of a (config, mode), then a repeat.
    ``repeat_compiled`` names what a repeat compiled: the kernel's ``jit`` should never be
    there; jax's interpreter iterates device arrays in its callbacks (``jit(unstack)``), and
    jax sometimes compiles that helper again."""
    from pallas_verify.backends import registry
    from pallas_verify.case import Case

    backend, count = registry.get("tpu_interpret"), counter()
    spec = _spec("reference_kernels.elementwise", "RAGGED_ADD")
    mode = {"detect_races": True, "num_cores_or_threads": 2}
    drawn = draw_examples(spec, count=examples, seed=seed)
    out: dict[str, Any] = {"first_reruns": 0, "first_compiles": 0, "repeat_reruns": 0, "repeat_compiles": 0,
                           "repeat_compiled": collections.Counter(), "by_kind": {}}
    for example in drawn:
        for phase in ("first", "repeat"):
            inputs = example.inputs if phase == "first" else tuple(x[::-1].copy() for x in example.inputs)
            base = Case(spec=spec, config=example.config, inputs=inputs, backend=backend.name, mode=mode)
            backend.run(base)
            for kind, variant in backend.variants(mode):
                start = time.perf_counter()
                backend.run(Case(spec=spec, config=example.config, inputs=inputs, backend=backend.name, mode=variant))
                compiled = count.named_since(start)
                compiles = len(compiled)
                if phase == "repeat":
                    out["repeat_compiled"].update(compiled)
                out[f"{phase}_reruns"] += 1
                out[f"{phase}_compiles"] += compiles
                tally = out["by_kind"].setdefault(kind, {"first": 0, "repeat": 0, "reruns": 0})
                tally[phase] += compiles
                tally["reruns"] += phase == "first"
    out["repeat_compiled"] = dict(out["repeat_compiled"])
    return out


def _ratio(meta: dict[str, int], phase: str) -> float | None:
    return meta[f"{phase}_compiles"] / meta[f"{phase}_reruns"] if meta.get(f"{phase}_reruns") else None


def _per_100(compiles: int, examples: int) -> float | None:
    return 100.0 * compiles / examples if examples else None


def compile_reuse(*, max_examples: int = 10, shrink_budget_s: float = 10.0, metamorphic_examples: int = 2,
                  seed: int = 0, search_specs: tuple[tuple[str, str], ...] = SEARCH_SPECS,
                  backends: tuple[str, ...] = ("interpret", "tpu_interpret")) -> dict[str, Any]:
    """Compiles per 100 examples for the search and for shrinking; compiles per rerun."""
    counter()
    with tempfile.TemporaryDirectory(prefix="pv-bench-") as out_dir:
        search = [_search(_spec(m, n), b, max_examples, out_dir) for m, n in search_specs for b in backends]
        shrink = [_shrink(planted_ragged_add(), b, shrink_budget_s, out_dir) for b in backends]
    meta = _metamorphic(metamorphic_examples, seed) if metamorphic_examples else {}
    by_backend = {b: _per_100(sum(s["compiles"] for s in search if s["backend"] == b),
                              sum(s["examples"] for s in search if s["backend"] == b))
                  for b in backends}
    return {
        "compiles_per_100_search_examples": _per_100(sum(s["compiles"] for s in search),
                                                     sum(s["examples"] for s in search)),
        "compiles_per_100_search_examples_by_backend": by_backend,
        "compiles_per_100_shrink_examples": _per_100(sum(s["shrink_compiles"] for s in shrink),
                                                     sum(s["shrink_examples"] for s in shrink)),
        "compiles_per_metamorphic_rerun_first": _ratio(meta, "first"),
        "compiles_per_metamorphic_rerun_repeat": _ratio(meta, "repeat"),
        "search": search, "shrink": shrink, "metamorphic": meta,
    }
