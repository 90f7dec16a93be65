"""A clean PASS against the bare interpreter: what a kernel author pays on every CI run.

For each correct kernel (the catalog's single-device kernels and a few upstream wrappers)
and each interpreter (``interpret``, ``tpu_interpret``):

- ``pallas-verify``: ``verify(spec, [backend], N)`` with the ``ci`` profile on its
  default path (cases in the interpreters' worker, the static check, the reference and its
  float64 truth, TPU interpret mode's metamorphic reruns); the examples it ran are
  recorded. Transforms are left out (``transforms=()``): the bare side runs the bare
  kernel only.
- ``bare``: for the same examples, in the same process, what a hand-written test does:
  jit the kernel on that interpreter (the HLO interpreter, or TPU interpret mode with its
  default params), run it and the reference once per example, allclose (``bare.py``).

The figure is the median over kernels of pallas-verify's seconds over bare's, per backend.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.bare import allclose_failure, bare_run, reference_run

__all__ = ["BACKENDS", "CATALOG", "UPSTREAM", "clean_pass"]

BACKENDS = ("interpret", "tpu_interpret")
#: Catalog kernels of one device, both interpreters (module, name).
CATALOG: tuple[tuple[str, str], ...] = (
    ("reference_kernels.elementwise", "RAGGED_ADD"), ("reference_kernels.reductions", "ROW_SUM"),
    ("reference_kernels.reductions", "COL_SUM"), ("reference_kernels.matmul", "MATMUL_F32"),
    ("reference_kernels.matmul", "MATMUL_BF16"), ("reference_kernels.norms", "SOFTMAX"),
    ("reference_kernels.norms", "LAYER_NORM"), ("reference_kernels.scan", "CUMSUM"),
    ("reference_kernels.transpose", "TRANSPOSE"), ("reference_kernels.gather", "GATHER_BLOCKS"),
    ("reference_kernels.control", "BRANCH_LOOP"), ("reference_kernels.control", "AXPY_INPLACE"),
    ("reference_kernels.dma", "DOUBLE_BUFFER"), ("reference_kernels.dma", "RUN_SCOPED_COPY"),
    ("reference_kernels.attention", "FLASH_ATTENTION"),
)
#: Kernels shipped in jax (module, name).
UPSTREAM: tuple[tuple[str, str], ...] = (
    ("reference_kernels.upstream.tpu_ops", "TPU_FLASH_ATTENTION"), ("reference_kernels.upstream.tpu_ops", "TPU_MATMUL"),
    ("reference_kernels.upstream.tpu_ops", "TPU_GMM"), ("reference_kernels.upstream.tpu_ops", "TPU_PAGED_ATTENTION"),
    ("reference_kernels.upstream.tpu_splash", "TPU_SPLASH_MHA"), ("reference_kernels.upstream.gpu_ops", "GPU_LAYER_NORM"),
)


#: Run once per backend before the timed cells (not one of them).
_WARM_UP = ("reference_kernels.elementwise", "SCALE_SHIFT")


@contextlib.contextmanager
def _recorded() -> Iterator[list[tuple[dict[str, Any], tuple[Any, ...]]]]:
    """The (config, inputs) of every example ``Runner.judge`` runs meanwhile."""
    from pallas_verify.runner import Runner

    seen: list[tuple[dict[str, Any], tuple[Any, ...]]] = []
    original = Runner.judge

    def judge(self: Any, config: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append((dict(config), tuple(inputs)))
        return original(self, config, inputs, *args, **kwargs)

    Runner.judge = judge  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Runner.judge = original  # type: ignore[method-assign]


def _specs_file(folder: Path, chosen: tuple[tuple[str, str], ...]) -> Path:
    """A module of the chosen specs without transforms, loadable by reference (so the
    cases run in the worker, as they do for a kernel author)."""
    lines = ["import dataclasses", "import importlib", ""]
    for i, (module, name) in enumerate(chosen):
        lines.append(f"S{i} = dataclasses.replace(getattr(importlib.import_module({module!r}), {name!r}), "
                     "transforms=())")
    path = folder / "pv_clean_pass_specs.py"
    path.write_text(textwrap.dedent("\n".join(lines)) + "\n")
    return path


def _bare(spec: Any, backend: str, examples: list[tuple[dict[str, Any], tuple[Any, ...]]]) -> float:
    from jax.experimental.pallas import tpu as pltpu

    from pallas_verify import _jax_compat

    params = True if backend == "interpret" else pltpu.InterpretParams()
    started = time.perf_counter()
    with _jax_compat.tpu_target():  # as the backend: kernels that pipeline by hand trace only for a TPU kind
        for config, inputs in examples:
            failure = allclose_failure(spec, bare_run(spec, config, inputs, params), reference_run(spec, config, inputs))
            del failure  # a test would assert; the float64 oracle judges these kernels clean
    return time.perf_counter() - started


def _cell(ref: str, backend: str, examples: int, out: str) -> dict[str, Any] | None:
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    spec = load_spec(ref)
    with _recorded() as seen:
        started = time.perf_counter()
        report = verify(spec, [backend], examples, 0, profile="ci", out_dir=out)
        pv = time.perf_counter() - started
    [result] = [r for r in report.results if r.transform is None]
    if result.status != "pass":
        return {"kernel": spec.name, "backend": backend, "status": result.status, "reason": result.reason}
    bare = _bare(spec, backend, seen)
    return {"kernel": spec.name, "backend": backend, "status": "pass", "examples": len(seen), "pv_s": pv,
            "bare_s": bare, "ratio": pv / max(bare, 1e-9),
            "notes": report.kernels[0].get("notes", [])}


def clean_pass(*, examples: int = 5, specs: tuple[tuple[str, str], ...] = CATALOG + UPSTREAM,
               backends: tuple[str, ...] = BACKENDS) -> dict[str, Any]:
    """pallas-verify's wall time for ``examples`` examples of each correct kernel over the
    bare time of the same examples; the median ratio per backend."""
    with tempfile.TemporaryDirectory(prefix="pv-clean-") as folder:
        path = _specs_file(Path(folder), (*specs, _WARM_UP))
        for backend in backends:  # start the worker processes and import jax there: a session's cost, once
            _cell(f"{path}::S{len(specs)}", backend, 1, folder)
        cells = [_cell(f"{path}::S{i}", b, examples, folder) for i in range(len(specs)) for b in backends]
    timed = [c for c in cells if c and c["status"] == "pass"]
    medians = {b: statistics.median([c["ratio"] for c in timed if c["backend"] == b])
               for b in backends if any(c["backend"] == b for c in timed)}
    return {"clean_pass_ratio": medians, "examples": examples, "cells": cells,
            **{f"clean_pass_ratio_{b}": medians.get(b) for b in backends}}
