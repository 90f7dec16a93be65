"""Every smith finding re-run once and classified before it is reported.

A finding of a search is one example among many drawn at random; before a campaign
reports it, the very case (the program, its inputs and the backend's mode, loaded from
the engine's reproducer) runs once more with nothing drawn, on fresh caches, on every
backend the finding names. The verdict goes to ``evidence["recheck"]``:

- ``reproduces``: the same kind of finding again, and the reference is not in doubt;
- ``flaky``: the re-run shows nothing (a backend that depends on something other than
  the case: reported, marked);
- ``reference-dependent``: the whole-array reference gives other outputs when run op by
  op (``jax.disable_jit``: no constant folding, no fusion) than compiled, and the
  backend agrees with the op-by-op outputs. The program's exact result then depends on
  how XLA compiles the reference (e.g. a constant-folded transcendental), not on the
  backend: generator noise, kept out of the findings and counted under ``noise``;
- ``not re-run``: a timeout (a re-run would cost the whole time limit again) or a
  finding without a recorded case.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from pallas_verify.findings import OUTPUT_KINDS, Finding
from pallas_verify.oracles.divergence import DivergenceEvidence
from pallas_verify.spec import KernelSpec

__all__ = ["NOISE", "recheck"]

NOISE = "reference-dependent"


def _backends(finding: Finding) -> list[str]:
    """The backends a finding involves, the finding's own last (a divergence compares it
    with the backends that ran the same example before it)."""
    evidence = DivergenceEvidence.of(finding)
    named = [] if evidence is None else [evidence.other_backend, *evidence.backends]
    others = [b for b in dict.fromkeys(named) if isinstance(b, str) and b != finding.backend]
    return [*others, finding.backend]


def _mode(backend: str, finding: Finding) -> dict[str, Any]:
    """The finding's mode on its own backend; the simplest mode (nothing drawn) on another."""
    if backend == finding.backend:
        return dict(finding.mode)
    from hypothesis import find

    from pallas_verify.backends import registry

    return dict(find(registry.get(backend).modes(), lambda _: True))


def _eager_reference(spec: KernelSpec, config: dict[str, Any], inputs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    import jax

    with jax.disable_jit():
        result = spec.reference(*inputs, **config)
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(result)]


def recheck(finding: Finding, spec: KernelSpec, *, isolate: str = "auto", timeout_s: float = 60.0) -> Finding:
    """``finding`` with ``evidence["recheck"]`` (and ``recheck_why``) set: see the module
    docstring. The case comes from the ``.npz`` beside ``finding.reproducer``."""
    from pallas_verify.backends import registry
    from pallas_verify.case import Case
    from pallas_verify.keys import example_key
    from pallas_verify.oracles.base import bitwise_equal
    from pallas_verify.oracles.differential import compare_outputs
    from pallas_verify.reports.casefile import load_case
    from pallas_verify.runner import InternalError, Runner, Unsupported

    npz = Path(finding.reproducer).with_suffix(".npz") if finding.reproducer else None
    if finding.kind == "timeout" or npz is None or not npz.is_file() or finding.backend in ("static", "reference"):
        why = "a timeout: a re-run would take the whole time limit again" if finding.kind == "timeout" else \
            "the finding has no recorded case to re-run"
        return _verdict(finding, "not re-run", why)
    inputs, saved = load_case(npz)
    config = dict(finding.config) or dict(saved or {})
    with Runner(spec, timeout_s=timeout_s, isolate=isolate, metamorphic=False) as runner:
        found: list[Finding] = []
        try:
            for name in _backends(finding):
                found = runner.check(config, inputs, registry.get(name), _mode(name, finding))
        except (Unsupported, InternalError) as exc:
            return _verdict(finding, "flaky", f"the re-run could not run the case: {exc}")
        if not any(f.kind == finding.kind for f in found):
            seen = ", ".join(sorted({f.kind for f in found})) or "nothing"
            return _verdict(finding, "flaky", f"the same case re-run once showed {seen}")
        if finding.kind not in OUTPUT_KINDS:
            return _verdict(finding, "reproduces", "the same case re-run once fails the same way")
        compiled, paths, truth = runner.expected(config, inputs, example_key(config, inputs))
        eager = _eager_reference(spec, config, inputs)
        if len(eager) == len(compiled) and all(bitwise_equal(a, b).all() for a, b in zip(compiled, eager, strict=True)):
            return _verdict(finding, "reproduces", "the same case re-run once fails the same way; the reference "
                            "gives the same bits compiled and op by op")
        outcome = runner.run(Case(spec=spec, config=config, inputs=inputs, backend=finding.backend,
                                  mode=_mode(finding.backend, finding)))
    if outcome.outputs is not None and all(c.ok for c in compare_outputs(paths, outcome.outputs, eager,
                                                                         spec.tolerance, truth)):
        return _verdict(finding, NOISE, "the reference gives other outputs compiled than op by op, and the "
                        "backend agrees with the op-by-op ones: the program's exact result depends on how XLA "
                        "compiles the reference, not on the backend")
    return _verdict(finding, "reproduces", "the same case re-run once fails the same way, against the reference "
                    "compiled and run op by op")


def _verdict(finding: Finding, verdict: str, why: str) -> Finding:
    return dataclasses.replace(finding, evidence={**finding.evidence, "recheck": verdict, "recheck_why": why})
