"""The conformance suite: every catalog and upstream kernel on every backend.

The result is the feature x backend matrix: one cell per (kernel, backend[, transform]),
each pass, fail (with the finding), unsupported (with the reason) or skipped (backend not
available here, or not for the kernel's platforms, with the reason).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import time
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.execution import Done, Executor, Work
from pallas_verify.findings import Finding
from pallas_verify.reports.matrix import tally
from pallas_verify.reports.report import BackendResult, Report, cell_key, kernel_entry
from pallas_verify.spec import KernelSpec

__all__ = ["DEMO_KERNELS", "HOST_DEVICES", "bundled_specs", "ensure_host_devices", "run_conformance", "run_unit"]

# What `make demo` verifies: a ragged elementwise kernel, a tiled matmul with an
# accumulator, a row softmax, a portable kernel (TPU and GPU backends) and a plgpu.kernel
# with barriers (GPU interpret mode, Mosaic GPU): a few seconds per backend each.
DEMO_KERNELS = ("ragged_add", "matmul_f32", "softmax", "scale_shift", "gpu_barrier_affine")


# Host CPU devices the conformance run asks for: the catalog's multi-device kernels (a
# ring permute with remote DMAs under shard_map) need 4.
HOST_DEVICES = 4


def ensure_host_devices(environ: MutableMapping[str, str] = os.environ) -> None:
    """Ask XLA for HOST_DEVICES CPU devices unless the user chose a count; call before jax
    is imported. Worker processes inherit it."""
    flags = environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={HOST_DEVICES}".strip()


def bundled_specs(pattern: str = "*") -> list[KernelSpec]:
    """Catalog and upstream specs whose names match ``pattern`` (fnmatch; ``a,b`` for several)."""
    from reference_kernels import catalog
    from reference_kernels.upstream import upstream

    patterns = [p for p in pattern.split(",") if p]
    specs = [s for s in [*catalog(), *upstream()] if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]
    if not specs:
        raise InvalidArgument(f"--kernels {pattern!r} matches no bundled kernel; try '*' or e.g. 'matmul*'.")
    return specs


def _device_shortfall(spec: KernelSpec) -> str | None:
    """Why the kernel cannot run with this process's device count, if it cannot."""
    import jax

    needed = getattr(spec.kernel, "required_devices", 1)
    if needed > jax.device_count():
        return (f"needs {needed} devices, this process has {jax.device_count()}: set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={needed} before starting")
    return None


def run_conformance(
    specs: Sequence[KernelSpec],
    *,
    backends: Sequence[str] | str | None = None,
    max_examples: int = 3,
    profile: str = "ci",
    out_dir: str | Path = "pv-out/conformance",
    progress: Callable[[str], Any] = print,
    executor: Executor | None = None,
    generated_s: float = 0.0,
) -> Report:
    """Verify each spec on each backend; the Report's results are the matrix.

    With ``executor`` each spec is one unit of work run there (the report records each
    cell's node); without, the specs run one after another in this process. With
    ``generated_s`` > 0, a smith campaign of that many seconds adds the "generated
    programs" row (programs run, pass, divergences per TPU-capable backend).
    """
    from pallas_verify.backends import registry

    names = [b.name for b in registry.resolve(backends)]
    report = Report(backends=names, profile=profile)
    started = time.perf_counter()
    if executor is not None:
        report.executor = executor.name
        _run_units(specs, names, max_examples, profile, Path(out_dir) / "repro", executor, report, progress)
    else:
        _run_here(specs, names, max_examples, profile, Path(out_dir) / "repro", report, progress)
    if generated_s > 0:
        report.merge(_generated_row(names, generated_s, Path(out_dir) / "generated", progress))
    report.seconds = time.perf_counter() - started
    return report


def _run_here(specs: Sequence[KernelSpec], names: list[str], max_examples: int, profile: str, repro: Path,
              report: Report, progress: Callable[[str], Any]) -> None:
    """Every spec in this process, one after another."""
    from pallas_verify.engine import verify

    for done, spec in enumerate(specs, 1):
        shortfall = _device_shortfall(spec)
        if shortfall:
            part = _skipped(spec, names, shortfall)
        else:
            part = verify(spec, names, max_examples, profile=profile, out_dir=repro)
        report.merge(part)
        progress(f"[{done}/{len(specs)}] {spec.name}: {tally(part.results)}")


def _generated_row(names: Sequence[str], budget_s: float, out_dir: Path, progress: Callable[[str], Any]) -> Report:
    from pallas_verify.backends import registry
    from pallas_verify.campaigns.smith.campaign import (
        GENERATED,
        SmithOptions,
        conformance_rows,
        smith,
    )

    tpu = tuple(n for n in names if "tpu" in registry.get(n).platforms and registry.get(n).available() is None)
    # One batch at a time from this process: its interpreters' worker is already warm.
    part = conformance_rows(smith(SmithOptions(backends=tpu, budget_s=budget_s, out_dir=out_dir, workers=1)))
    progress(f"{GENERATED}: " + ", ".join(f"{cell_key(r)}={r.status} ({r.reason})" for r in part.results))
    return part


def run_unit(work: Work) -> dict[str, Any]:
    """One spec of the matrix, in a worker: its cells and the bytes of its reproducers."""
    import tempfile

    from pallas_verify.engine import verify
    from pallas_verify.execution.units import ship_reproducers
    from pallas_verify.loader import load_spec

    spec = load_spec(work.spec_ref)
    shortfall = _device_shortfall(spec)
    if shortfall:
        return {"skipped": shortfall}
    out = Path(tempfile.mkdtemp(prefix="pv-conformance-"))
    return ship_reproducers(verify(spec, list(work.backends), work.max_examples, profile=work.params["profile"],
                                   out_dir=out), out)


def _run_units(specs: Sequence[KernelSpec], names: list[str], max_examples: int, profile: str, repro: Path,
               executor: Executor, report: Report, progress: Callable[[str], Any]) -> None:
    """Every spec as a unit on ``executor``; parts merged in spec order as they come back."""
    from pallas_verify.execution.units import receive_reproducers
    from pallas_verify.loader import spec_ref

    env = {k: os.environ[k] for k in ("XLA_FLAGS",) if k in os.environ}
    waiting = []
    for spec in specs:
        ref = spec_ref(spec)
        if ref is None:
            raise InvalidArgument(f"spec {spec.name!r} cannot be loaded by reference; define it at module level.")
        waiting.append(Work(entry="pallas_verify.campaigns.conformance:run_unit", kind="verify", spec_ref=ref, tag=spec.name,
                            backends=tuple(names), max_examples=max_examples, params={"profile": profile},
                            env=env, limit_s=3600.0))
    parts: dict[str, Report] = {}
    try:
        while waiting or executor.running():
            while waiting and executor.free() > 0:
                executor.submit(waiting.pop(0))
            for done in executor.poll(0.5):
                spec = next(s for s in specs if s.name == done.work.tag)
                parts[spec.name] = _part(spec, names, done, receive_reproducers, repro)
                progress(f"[{len(parts)}/{len(specs)}] {spec.name}: {tally(parts[spec.name].results)}"
                         + (f" (on {done.node})" if done.node and executor.name != "local" else ""))
    except KeyboardInterrupt:
        executor.cancel()
        report.interrupted = True
    for spec in specs:
        part = parts.get(spec.name) or _skipped(spec, names, "interrupted before it ran")
        report.merge(part)


def _part(spec: KernelSpec, names: list[str], done: Done, receive: Callable[..., Report], repro: Path) -> Report:
    result = done.result
    if "skipped" in result:
        return _skipped(spec, names, result["skipped"])
    if "error" in result:
        finding = Finding(kind=result["kind"], kernel=spec.name, backend=names[0] if len(names) == 1 else "all",
                          message=result["error"], evidence={"traceback": result["traceback"], "node": done.node})
        part = _skipped(spec, names, f"{result['kind']}: {result['error'].splitlines()[0]}")
        part.findings.append(finding)
        return part
    part = receive(result, repro)
    part.results = [dataclasses.replace(r, node=done.node) for r in part.results]
    return part


def _skipped(spec: KernelSpec, names: list[str], reason: str) -> Report:
    return Report(backends=names, kernels=[kernel_entry(spec)],
                  results=[BackendResult(kernel=spec.name, backend=b, status="skipped", reason=reason) for b in names])
