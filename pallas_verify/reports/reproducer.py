"""Standalone reproducers: a ``.py`` plus an ``.npz`` of the inputs per finding, written
from one template (``reproducer_source``); ``campaigns.replay`` runs them.

A reproducer exits with one of three statuses (``exits``): EXIT_REPRODUCES (1) while the
finding (or another finding) shows on the recorded case, EXIT_FIXED (0) once the case runs
clean, and EXIT_CANNOT_RUN (3) when the case cannot be run here at all. It names neither
itself nor its inputs' file (the ``.npz`` of the same name beside it), so a copy under
another name needs no rewriting.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pallas_verify.exits import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES
from pallas_verify.findings import Finding
from pallas_verify.oracles.divergence import DivergenceEvidence
from pallas_verify.reports.casefile import save_case
from pallas_verify.reports.grid_picture import grid_picture, grid_png
from pallas_verify.reports.picture import pictures, png

__all__ = ["EXIT_CANNOT_RUN", "EXIT_FIXED", "EXIT_REPRODUCES", "file_stem", "reproducer_source", "write_pictures",
           "write_reproducer"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")  # characters a file name may not carry

_TEMPLATE = '''#!/usr/bin/env python
"""pallas-verify reproducer: {headline}.

{summary}

Run this file with python. Exit status:
  1  the finding still reproduces (or the case now fails in another way);
  0  the case ran and showed no finding: fixed;
  3  the case could not be run here (the spec or the inputs do not load, the reference
     raises, the backend is not available): nothing is known about the finding.
The inputs are in the .npz file of the same name beside this one (every dtype, bfloat16
and float8 included, bit for bit).{note}
"""
import sys
from pathlib import Path

from pallas_verify._env import configure

configure()  # before jax is imported: CPU-first, so no GPU/TPU plugin start-up noise

import numpy as np  # noqa: E402,F401  (configs may hold numpy values)
{body}
from pallas_verify.campaigns.replay import reproduce  # noqa: E402

SPEC = {spec}
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


def reproducer_source(finding: Finding, *, spec: str, config: str, headline: str | None = None, body: str = "",
                      note: str = "") -> str:
    """The source of ``finding``'s reproducer script: ``spec`` and ``config`` are Python
    expressions (the spec's reference, the config); ``body`` is source run before the case
    (e.g. a generated kernel and its spec), ``note`` a line for its docstring."""
    return _TEMPLATE.format(
        headline=headline or f"{finding.kind} in kernel {finding.kernel!r} on backend {finding.backend}",
        summary=_docstring_safe(finding.message.splitlines()[0][:300] if finding.message else ""),
        note=f"\n{_docstring_safe(note)}" if note else "", body=f"\n{body.strip()}\n" if body.strip() else "",
        spec=spec, backend=finding.backend, kind=finding.kind, config=config, mode=dict(finding.mode),
        transform=finding.transform, others=_others(finding))


def _literal(config: Mapping[str, Any]) -> str | None:
    """``repr(config)`` when it evaluates back to an equal config, else None."""
    text = repr(dict(config))
    try:
        same = eval(text, {"np": np}) == dict(config)
    except Exception:
        return None
    return text if same else None


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


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
    script.write_text(reproducer_source(finding, spec=repr(spec_ref), config=config_src))
    return str(script.resolve())


def _others(finding: Finding) -> dict[str, dict[str, Any]]:
    """The other backends of a divergence, each with its mode, in the order they ran."""
    evidence = DivergenceEvidence.of(finding)
    return {} if evidence is None else evidence.others(finding.backend)


def write_reproducer(finding: Finding, example: Mapping[str, Any], spec_ref: str | None, out_dir: Path) -> Finding:
    """The finding with ``reproducer`` set to the path of a freshly written script, and the
    pictures of its bad outputs written beside it as PNG (``evidence["pictures"]``)."""
    script = _write_one(finding, example, spec_ref, out_dir)
    drawn = write_pictures(finding, Path(script).with_suffix(""))
    evidence = {**finding.evidence, "pictures": drawn} if drawn else finding.evidence
    return dataclasses.replace(finding, reproducer=script, evidence=evidence)


def write_pictures(finding: Finding, stem: Path) -> list[str]:
    """Each bad output's picture (``reports.picture``) as ``STEM.png`` (the first output)
    and ``STEM-<path>.png`` (the others), and a static finding's grid and blocks
    (``reports.grid_picture``) as ``STEM.png`` (``STEM-grid.png`` after an output's);
    returns the paths written."""
    paths = []
    for i, drawn in enumerate(pictures(finding.evidence)):
        path = stem.with_name(stem.name + ("" if i == 0 else "-" + file_stem(drawn.path)) + ".png")
        path.write_bytes(png(drawn))
        paths.append(str(path))
    grid = grid_picture(finding.evidence)
    if grid is not None:
        path = stem.with_name(stem.name + ("-grid" if paths else "") + ".png")
        path.write_bytes(grid_png(grid))
        paths.append(str(path))
    return paths
