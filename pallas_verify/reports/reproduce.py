"""Standalone reproducers: a ``.py`` plus an ``.npz`` of the inputs per finding.

A reproducer (and ``reproduce``, which it calls) exits with one of three statuses:
EXIT_REPRODUCES (1) while the finding (or another finding) shows on the recorded case,
EXIT_FIXED (0) once the case runs clean, and EXIT_CANNOT_RUN (3) when the case cannot be
run here at all: the spec or the inputs do not load, the reference raises, the backend is
not available or cannot run the kernel. A case that could not run is never "fixed".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pallas_verify.errors import PallasVerifyError
from pallas_verify.findings import Finding
from pallas_verify.reports.casefile import save_case

__all__ = ["EXIT_CANNOT_RUN", "EXIT_FIXED", "EXIT_REPRODUCES", "CannotRun", "file_stem", "reproduce", "write_reproducer"]

EXIT_FIXED, EXIT_REPRODUCES, EXIT_CANNOT_RUN = 0, 1, 3

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")  # characters a file name may not carry


class CannotRun(PallasVerifyError):
    """A recorded case cannot be re-run here; the message says why."""


_TEMPLATE = '''#!/usr/bin/env python
"""pallas-verify reproducer: {kind} in kernel {kernel!r} on backend {backend}.

{summary}

Run `python {script}`. Exit status:
  1  the finding still reproduces (or the case now fails in another way);
  0  the case ran and showed no finding: fixed;
  3  the case could not be run here (the spec or the inputs do not load, the reference
     raises, the backend is not available): nothing is known about the finding.
The inputs are in {npz} (every dtype, bfloat16 and float8 included, bit for bit).
"""
import sys
from pathlib import Path

from pallas_verify._env import configure

configure()  # before jax is imported: CPU-first, so no GPU/TPU plugin start-up noise

import numpy as np  # noqa: E402,F401  (configs may hold numpy values)

from pallas_verify.reports.reproduce import reproduce  # noqa: E402

SPEC = {spec!r}
BACKEND = {backend!r}
KIND = {kind!r}
CONFIG = {config}
MODE = {mode!r}
TRANSFORM = {transform!r}
OTHERS = {others!r}  # other backends the case runs on first (and their modes): a divergence needs them
INPUTS = Path(__file__).with_suffix(".npz")

if __name__ == "__main__":
    sys.exit(reproduce(SPEC, backend=BACKEND, kind=KIND, config=CONFIG, mode=MODE,
                       inputs=INPUTS, transform=TRANSFORM, others=OTHERS))
'''


def _literal(config: Mapping[str, Any]) -> str | None:
    """``repr(config)`` when it evaluates back to an equal config, else None."""
    text = repr(dict(config))
    try:
        same = eval(text, {"np": np}) == dict(config)
    except Exception:
        return None
    return text if same else None


def file_stem(*parts: object) -> str:
    """``parts`` joined by ``-`` as a file name that is safe everywhere: each character other
    than letters, digits, ``_``, ``.`` and ``-`` becomes ``_``."""
    return _UNSAFE.sub("_", "-".join(str(p) for p in parts))


def _write_one(finding: Finding, example: Mapping[str, Any], spec_ref: str | None, out_dir: Path) -> str:
    stem = file_stem(finding.kernel, finding.kind, finding.backend, *filter(None, [finding.transform]))
    out_dir.mkdir(parents=True, exist_ok=True)
    script, npz = out_dir / f"{stem}.py", out_dir / f"{stem}.npz"
    config_src = _literal(finding.config)
    save_case(npz, example["inputs"], None if config_src is not None else finding.config)
    if config_src is None:
        config_src = "None  # not a Python literal: loaded from the .npz"
    script.write_text(_TEMPLATE.format(
        kind=finding.kind, kernel=finding.kernel, backend=finding.backend, script=script.name, npz=npz.name,
        summary=finding.message.splitlines()[0][:300], spec=spec_ref, config=config_src,
        mode=dict(finding.mode), transform=finding.transform, others=_others(finding),
    ))
    return str(script.resolve())


def _others(finding: Finding) -> dict[str, dict[str, Any]]:
    """The other backends of a divergence, each with its mode, in the order they ran."""
    modes = finding.evidence.get("modes", {}) if finding.kind == "backend_divergence" else {}
    return {b: dict(modes[b]) for b in finding.evidence.get("backends", []) if b != finding.backend and b in modes}


def write_reproducer(finding: Finding, example: Mapping[str, Any], spec_ref: str | None, out_dir: Path) -> Finding:
    """The finding with ``reproducer`` set to the path of a freshly written script."""
    return dataclasses.replace(finding, reproducer=_write_one(finding, example, spec_ref, out_dir))


def reproduce(
    spec: str | None,
    *,
    backend: str,
    kind: str,
    config: Mapping[str, Any] | None,
    mode: Mapping[str, Any],
    inputs: str | Path,
    transform: str | None = None,
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> int:
    """Re-run one recorded case, print what it shows, and say so in the exit status.

    ``others``: backends (with their modes) that run the case before ``backend``, so a
    ``backend_divergence`` between them is judged again.

    EXIT_REPRODUCES (1): the case still shows a ``kind`` finding on ``backend`` or one of
    ``others`` (or, with it gone, some other finding: the case still fails). EXIT_FIXED (0): the case ran and
    showed nothing. EXIT_CANNOT_RUN (3): the case could not be run here (the spec or the
    inputs do not load, the reference raises: a reference failure's own reproducer exits 3
    until the reference is fixed; the backend is not available or cannot run the kernel),
    so nothing is known about the kernel.
    """
    try:
        findings, name = _rerun(spec, {**(others or {}), backend: mode}, config, inputs, transform)
    except CannotRun as exc:
        print(f"cannot run this case: {exc}")
        return EXIT_CANNOT_RUN
    for f in findings:
        print(f"[{f.kind}] {f.kernel} on {f.backend}: {f.message}")
    if any(f.backend == "reference" for f in findings):  # the kernel cannot be judged on this case
        what = "" if backend == "reference" else f", so {kind} on {backend} cannot be judged"
        print(f"cannot run this case: the reference fails on it{what}; fix the reference or narrow the "
              "spec's configs/inputs.")
        return EXIT_CANNOT_RUN
    if any(f.kind == kind and f.backend in (backend, "static", *(others or {})) for f in findings):
        return EXIT_REPRODUCES
    if findings:
        print(f"{kind} no longer reproduces for {name!r} on {backend}, but the case still fails "
              f"({', '.join(sorted({f.kind for f in findings}))}).")
        return EXIT_REPRODUCES
    print(f"{kind} no longer reproduces for {name!r} on {backend}.")
    return EXIT_FIXED


def _rerun(spec: str | None, runs: Mapping[str, Mapping[str, Any]], config: Mapping[str, Any] | None,
           inputs: str | Path, transform: str | None) -> tuple[list[Finding], str]:
    """The findings of the recorded case on each backend of ``runs`` (backend -> mode, in
    order) and the spec's name; CannotRun when it cannot run."""
    from pallas_verify.loader import load_spec
    from pallas_verify.reports.casefile import load_case
    from pallas_verify.runner import Runner, Unsupported

    if spec is None:
        raise CannotRun("this reproducer has no spec reference: the KernelSpec was not defined at module "
                        "level; define it at module level and run pallas-verify again.")
    try:
        loaded = load_spec(spec)
        args, saved_config = load_case(inputs)
    except Exception as exc:
        raise CannotRun(f"{type(exc).__name__}: {exc}") from None
    config = saved_config if config is None else config
    if config is None:
        raise CannotRun(f"neither the script nor {str(inputs)!r} holds the config of the case.")
    targets = {name: _target(name) for name in runs}
    findings: list[Finding] = []
    try:
        with Runner(loaded) as runner:
            for name, target in targets.items():
                if target is None:
                    findings += runner.static_findings(dict(config), args)
                else:
                    findings += runner.check(dict(config), args, target, dict(runs[name]), transform=transform)
    except Unsupported as exc:
        raise CannotRun(f"backend {name} cannot run kernel {loaded.name!r}: {exc}") from None
    except Exception as exc:
        raise CannotRun(f"running the case raised {type(exc).__name__}: {exc}") from None
    return findings, loaded.name


def _target(backend: str) -> Any:
    """The Backend that re-runs a case of ``backend`` (None: the static check), available here."""
    from pallas_verify.backends import registry

    if backend == "static":
        return None
    try:
        target = registry.get("interpret" if backend == "reference" else backend)
    except Exception as exc:
        raise CannotRun(f"{type(exc).__name__}: {exc}") from None
    reason = target.available()
    if reason is not None:
        raise CannotRun(f"backend {target.name} is not available here: {reason}")
    return target
