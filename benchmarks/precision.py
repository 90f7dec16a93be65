"""The precision oracle's margins: how far correct kernels stay below its line, and
precision mutants above it.

Every correct kernel of the catalog and the upstream wrappers runs with its float32 inputs
cast to bf16 and to f16 (a spec that draws its dtype is pinned to it instead) on its
cheapest interpreter; the precision mutants' twins and the cancellation cases of
``mutants.cancellation.CANCELLATION`` run on every interpreter they run on. Each runs the first examples its own
strategies draw, and each output is judged as ``verify`` judges it (no tolerance). Where the
spec never draws the narrow dtype (its inputs had to be cast), or its kernel or reference
does not keep it (the outputs had to be cast), the subject is reported apart (``cast``): the
kernel was not written for that dtype, and above 1 it rounds where its reference does not. Each judgement's margin is its largest (kernel
error / bound) over the elements: ``correct_margin`` is the largest over the correct
kernels' narrow outputs (the target: at most 0.5), ``mutant_ratio`` the smallest over the
precision mutants of the margin of their mildest example (the target: at least 2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["CORRECT_TARGET", "MUTANT_TARGET", "NARROW", "narrowed", "precision"]

NARROW = ("bfloat16", "float16")
CORRECT_TARGET = 0.5
MUTANT_TARGET = 2.0
BACKENDS = ("interpret", "tpu_interpret", "gpu_interpret")
#: Per narrowed subject, what ``narrowed`` had to cast: "input float32" (the spec never draws
#: the narrow dtype), "kernel float32" or "reference float32" (an output that does not keep
#: it). Only subjects with nothing cast count as correct kernels in that dtype.
CASTS: dict[str, set[str]] = {}


def narrowed(spec: Any, dtype: str) -> Any:
    """``spec`` with its float32 inputs cast to ``dtype`` (a drawn ``dtype`` config pinned)
    and every float output of kernel and reference cast to ``dtype``, as a spec wrapping a
    kernel that returns float32 for narrow inputs would; judged by the oracle even where
    the spec sets a tolerance."""
    import functools

    import jax
    import jax.numpy as jnp
    import ml_dtypes

    target = np.dtype(getattr(ml_dtypes, dtype, dtype))
    name = f"{spec.name}.{dtype}"

    def cast(x: np.ndarray) -> np.ndarray:
        if np.asarray(x).dtype != np.float32:
            return x
        CASTS.setdefault(name, set()).add("input float32")
        with np.errstate(over="ignore"):  # edge values past the narrow range become inf, as a user's cast would
            return x.astype(target)

    def outputs_cast(fn: Any, who: str) -> Any:
        def cast_one(out: Any) -> Any:
            if not jnp.issubdtype(out.dtype, jnp.floating) or out.dtype == target:
                return out
            CASTS.setdefault(name, set()).add(f"{who} {out.dtype}")
            return out.astype(target)

        @functools.wraps(fn)
        def call(*args: Any, **config: Any) -> Any:
            return jax.tree.map(cast_one, fn(*args, **config))
        return call

    def configs_pinned(config: dict) -> dict:
        return {**config, "dtype": dtype} if "dtype" in config else config

    def inputs(config: dict) -> Any:
        return spec.inputs(config).map(lambda xs: tuple(cast(np.asarray(x)) for x in xs))

    return dataclasses.replace(spec, name=name, kernel=outputs_cast(spec.kernel, "kernel"),
                               reference=outputs_cast(spec.reference, "reference"),
                               configs=spec.configs.map(configs_pinned), inputs=inputs, tolerance=None)


def _backends(spec: Any, first_only: bool) -> list[Any]:
    """The interpreters ``spec`` runs on here (only the cheapest with ``first_only``)."""
    from pallas_verify.backends.registry import get, skip_reason

    runs = [get(name) for name in BACKENDS if skip_reason(spec, get(name)) is None]
    return runs[:1] if first_only else runs


def _judge(spec: Any, examples: int, seed: int, *, first_only: bool = False) -> Iterator[dict[str, Any]]:
    """One row per (example, backend, float output): its rule, margin and judgement, or
    one row per (example, backend) that could not run."""
    from benchmarks.sampling import draw_examples
    from pallas_verify.case import Case
    from pallas_verify.keys import example_key
    from pallas_verify.oracles.differential import compare_outputs
    from pallas_verify.runner import Runner

    try:
        drawn = draw_examples(spec, count=examples, seed=seed)
    except Exception as exc:
        yield {"subject": spec.name, "error": f"draw: {type(exc).__name__}: {str(exc)[:200]}"}
        return
    with Runner(spec, isolate="never") as runner:
        for i, example in enumerate(drawn):
            for backend in _backends(spec, first_only):
                row = {"subject": spec.name, "backend": backend.name, "example": i}
                try:
                    expected, paths, truth = runner.expected(example.config, example.inputs,
                                                             example_key(example.config, example.inputs))
                    outcome = runner.run(Case(spec=spec, config=example.config, inputs=example.inputs,
                                              backend=backend.name))
                except Exception as exc:
                    yield {**row, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                    continue
                if outcome.outputs is None:
                    why = outcome.error.summary() if outcome.error else outcome.crashed or "no outputs"
                    yield {**row, "error": str(why).splitlines()[0][:300]}
                    continue
                case = Case(spec=spec, config=example.config, inputs=example.inputs, backend=backend.name)
                table = compare_outputs(paths, outcome.outputs, expected, None,
                                        runner.truth_for(case, truth, mismatched=False))
                if not all(c.ok for c in table):  # as the runner judges: the kernel's own dot roundings allowed
                    table = compare_outputs(paths, outcome.outputs, expected, None,
                                            runner.truth_for(case, truth, mismatched=True))
                for c in table:
                    if c.problem or not c.rule.startswith("ground truth"):
                        yield {**row, "output": c.path, "error": c.problem or f"judged by {c.rule}"}
                    else:
                        yield {**row, "output": c.path, "dtype": c.dtype, "rule": c.rule, "margin": c.margin,
                               "ok": c.ok, "cast": sorted(CASTS.get(spec.name, ())),
                               "judgement": c.judgement().strip("; ")}


def _subjects(only: tuple[str, ...]) -> list[tuple[Any, bool]]:
    """(spec, first backend only): the narrowed catalog and upstream wrappers on their
    cheapest interpreter, the precision twins and cancellation cases on every one."""
    from reference_kernels import catalog
    from reference_kernels.mutants.cancellation import CANCELLATION
    from reference_kernels.mutants.precision import MUTANTS
    from reference_kernels.upstream import upstream

    plain = [s for s in (*catalog(), *upstream()) if getattr(s.kernel, "required_devices", 1) == 1]
    chosen = [(narrowed(s, d), True) for s in plain for d in NARROW]
    chosen += [(m.twin, False) for m in MUTANTS] + [(s, False) for s in CANCELLATION]
    return [(s, first) for s, first in chosen if not only or any(o in s.name for o in only)]


def precision(*, examples: int = 2, mutant_examples: int = 3, seed: int = 0,
              only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Margins of the correct kernels (per subject, backend and rule) and of the mutants.

    ``only``: run the subjects and mutants whose names contain one of these strings."""
    from reference_kernels.mutants.precision import MUTANTS

    rows = [r for s, first in _subjects(only) for r in _judge(s, examples, seed, first_only=first)]
    mutants = [r for m in MUTANTS if not only or any(o in m.name for o in only)
               for r in _judge(m.spec, mutant_examples, seed)]
    judged = [r for r in rows if "margin" in r]
    native = [r for r in judged if not r["cast"]]
    narrow = [r for r in native if r["rule"] == "ground truth in steps"]
    per_mutant: dict[str, dict[str, Any]] = {}
    for r in mutants:
        if "margin" in r:
            entry = per_mutant.setdefault(r["subject"], {"rule": r["rule"], "dtype": r["dtype"], "margins": []})
            entry["margins"].append(round(r["margin"], 4))
    for entry in per_mutant.values():
        entry["mildest"] = min(entry["margins"])
    worst = max(narrow, key=lambda r: r["margin"], default=None)
    return {
        "correct_margin": worst["margin"] if worst else None,
        "correct_margin_float32": max((r["margin"] for r in native if r["rule"] == "ground truth"), default=None),
        "correct_worst": worst,
        "correct_false_fails": [r for r in native if not r["ok"]],
        "mutant_ratio": min((e["mildest"] for e in per_mutant.values()), default=None),
        "per_mutant": per_mutant,
        "per_subject": _per_subject(native),
        "cast": _per_subject([r for r in judged if r["cast"]]),
        "not_run": sorted({f"{r['subject']} on {r.get('backend', '-')}: {r['error']}" for r in rows if "error" in r}),
        "targets": {"correct_margin": CORRECT_TARGET, "mutant_ratio": MUTANT_TARGET},
    }


def _per_subject(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per subject and backend: judgements, the largest margin and its judgement, dtypes, casts."""
    table: dict[str, dict[str, Any]] = {}
    for r in rows:
        cell = table.setdefault(f"{r['subject']} on {r['backend']}",
                                {"judged": 0, "margin": -1.0, "dtypes": [], "cast": r["cast"]})
        cell["judged"] += 1
        if r["margin"] > cell["margin"]:
            cell["margin"], cell["worst"] = r["margin"], r["judgement"]
        if r["dtype"] not in cell["dtypes"]:
            cell["dtypes"].append(r["dtype"])
    return table
