"""Standalone reproducers: a ``.py`` plus an ``.npz`` of the inputs per finding."""

from __future__ import annotations

import dataclasses
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pallas_verify.findings import Finding

__all__ = ["reproduce", "write_reproducer"]

_TEMPLATE = '''#!/usr/bin/env python
"""pallas-verify reproducer: {kind} in kernel {kernel!r} on backend {backend}.

{summary}

Run `python {script}`: exits 1 while the finding reproduces, 0 once it is fixed.
The inputs are in {npz}.
"""
import sys
from pathlib import Path

import numpy as np  # noqa: F401  (configs may hold numpy values)

from pallas_verify.reproduce import reproduce

SPEC = {spec!r}
BACKEND = {backend!r}
KIND = {kind!r}
CONFIG = {config}
MODE = {mode!r}
TRANSFORM = {transform!r}
INPUTS = Path(__file__).with_suffix(".npz")

if __name__ == "__main__":
    sys.exit(reproduce(SPEC, backend=BACKEND, kind=KIND, config=CONFIG, mode=MODE,
                       inputs=INPUTS, transform=TRANSFORM))
'''


def _literal(config: Mapping[str, Any]) -> str | None:
    """``repr(config)`` when it evaluates back to an equal config, else None."""
    text = repr(dict(config))
    try:
        same = eval(text, {"np": np}) == dict(config)
    except Exception:
        return None
    return text if same else None


def _write_one(finding: Finding, example: Mapping[str, Any], spec_ref: str | None, out_dir: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{finding.kernel}-{finding.kind}-{finding.backend}")
    if finding.transform:
        stem += f"-{finding.transform}"
    out_dir.mkdir(parents=True, exist_ok=True)
    script, npz = out_dir / f"{stem}.py", out_dir / f"{stem}.npz"
    arrays = {f"arg{i}": x for i, x in enumerate(example["inputs"])}
    config_src = _literal(finding.config)
    if config_src is None:
        arrays["__config__"] = np.frombuffer(pickle.dumps(dict(finding.config)), dtype=np.uint8)
        config_src = "None  # not a Python literal: loaded from the .npz"
    np.savez(npz, **arrays)
    script.write_text(_TEMPLATE.format(
        kind=finding.kind, kernel=finding.kernel, backend=finding.backend, script=script.name, npz=npz.name,
        summary=finding.message.splitlines()[0][:300], spec=spec_ref, config=config_src,
        mode=dict(finding.mode), transform=finding.transform,
    ))
    return str(script.resolve())


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
) -> int:
    """Re-run one recorded case; print what it shows; 1 if ``kind`` reproduces, else 0."""
    from pallas_verify.backends import registry
    from pallas_verify.errors import InvalidArgument
    from pallas_verify.loader import load_spec
    from pallas_verify.runner import Runner

    if spec is None:
        raise InvalidArgument("this reproducer has no spec reference: the KernelSpec was not defined at "
                              "module level; define it at module level and run pallas-verify again.")
    loaded = load_spec(spec)
    with np.load(inputs) as data:
        args = tuple(data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data.files)))
        if config is None:
            config = pickle.loads(data["__config__"].tobytes())
    with Runner(loaded) as runner:
        if backend == "static":
            findings = runner.static_findings(dict(config), args)
        else:
            target = registry.get("interpret") if backend == "reference" else registry.get(backend)
            findings = runner.check(dict(config), args, target, dict(mode), transform=transform)
    for f in findings:
        print(f"[{f.kind}] {f.kernel} on {f.backend}: {f.message}")
    if any(f.kind == kind for f in findings):
        return 1
    print(f"{kind} no longer reproduces for {loaded.name!r} on {backend}.")
    return 0
