"""A smith finding as a standalone, readable reproducer: the program's kernel and
reference as source, the inputs in an ``.npz`` beside it, and the check that re-runs it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pallas_verify.campaigns.smith.source import program_source
from pallas_verify.findings import Finding
from pallas_verify.reports.reproduce import file_stem

__all__ = ["write_smith_reproducer"]

_TAIL = '''

# -- how pallas-verify checks it -----------------------------------------------------------
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pallas_verify as pv  # noqa: E402

INPUTS = Path(__file__).with_suffix(".npz")


def _inputs(config):
    with np.load(INPUTS) as data:
        return st.just(tuple(data[f"arg{{i}}"] for i in range(len(data.files))))


SPEC = pv.KernelSpec(name={name!r}, kernel=kernel, reference=reference, configs=st.just({{}}), inputs=_inputs,
                     platforms=("tpu",), bitwise_stable=False)
BACKEND = {backend!r}
KIND = {kind!r}
MODE = {mode!r}

if __name__ == "__main__":
    from pallas_verify.reports.reproduce import reproduce

    sys.exit(reproduce(f"{{Path(__file__).resolve()}}::SPEC", backend=BACKEND, kind=KIND, config={{}},
                       mode=MODE, inputs=INPUTS))
'''


def write_smith_reproducer(finding: Finding, out_dir: Path, stem: str) -> Finding:
    """Write ``stem.py`` (+ ``.npz``) for a finding of the generated-programs spec."""
    program = finding.config["program"]
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / f"{stem}.py"
    if finding.reproducer and Path(finding.reproducer).with_suffix(".npz").is_file():
        shutil.copyfile(Path(finding.reproducer).with_suffix(".npz"), script.with_suffix(".npz"))
    summary = finding.message.splitlines()[0][:300]
    head = (f'#!/usr/bin/env python\n"""pallas-verify smith reproducer: {finding.kind} on backend {finding.backend}.\n\n'
            f"{_docstring_safe(summary)}\n\nRun `python {script.name}`: exits 1 while the finding reproduces, 0 once "
            f'it is fixed.\nThe kernel and its reference are plain source below; the inputs are in {stem}.npz.\n"""\n'
            "from pallas_verify._env import configure\n\nconfigure()  # before jax loads: no accelerator plugin noise\n\n")
    tail = _TAIL.format(name=file_stem(stem), backend=finding.backend, kind=finding.kind,
                        mode=dict(finding.mode))
    script.write_text(head + program_source(program) + tail)
    return _with_path(finding, script)


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _with_path(finding: Finding, script: Path) -> Finding:
    import dataclasses

    evidence: dict[str, Any] = {**finding.evidence, "engine_reproducer": finding.reproducer}
    return dataclasses.replace(finding, reproducer=str(script.resolve()), evidence=evidence)
