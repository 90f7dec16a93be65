"""The conformance suite: every catalog and upstream kernel on every backend.

The result is the feature x backend matrix: one cell per (kernel, backend[, transform]),
each pass, fail (with the finding), unsupported (with the reason) or skipped (backend not
available here, or not for the kernel's platforms, with the reason).
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.matrix import tally
from pallas_verify.report import BackendResult, Report, cell_key
from pallas_verify.spec import KernelSpec

__all__ = ["DEMO_KERNELS", "HOST_DEVICES", "bundled_specs", "ensure_host_devices", "run_conformance"]

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
    generated_s: float = 0.0,
) -> Report:
    """Verify each spec on each backend; the Report's results are the matrix. With
    ``generated_s`` > 0, a smith campaign of that many seconds adds the "generated
    programs" row (programs run, pass, divergences per TPU-capable backend)."""
    from pallas_verify.backends import registry
    from pallas_verify.engine import verify

    names = [b.name for b in registry.resolve(backends)]
    report = Report(backends=names, profile=profile)
    started = time.perf_counter()
    for done, spec in enumerate(specs, 1):
        shortfall = _device_shortfall(spec)
        if shortfall:
            part = Report(backends=names, kernels=[_kernel_entry(spec)],
                          results=[BackendResult(kernel=spec.name, backend=b, status="skipped", reason=shortfall)
                                   for b in names])
        else:
            part = verify(spec, names, max_examples, profile=profile, out_dir=Path(out_dir) / "repro")
        report.merge(part)
        progress(f"[{done}/{len(specs)}] {spec.name}: {tally(part.results)}")
    if generated_s > 0:
        report.merge(_generated_row(names, generated_s, Path(out_dir) / "generated", progress))
    report.seconds = time.perf_counter() - started
    return report


def _generated_row(names: Sequence[str], budget_s: float, out_dir: Path, progress: Callable[[str], Any]) -> Report:
    from pallas_verify.backends import registry
    from pallas_verify.smith.campaign import GENERATED, SmithOptions, conformance_rows, smith

    tpu = tuple(n for n in names if "tpu" in registry.get(n).platforms and registry.get(n).available() is None)
    part = conformance_rows(smith(SmithOptions(backends=tpu, budget_s=budget_s, out_dir=out_dir)))
    progress(f"{GENERATED}: " + ", ".join(f"{cell_key(r)}={r.status} ({r.reason})" for r in part.results))
    return part


def _kernel_entry(spec: KernelSpec) -> dict[str, Any]:
    return {"name": spec.name, "features": list(spec.features), "platforms": list(spec.platforms)}
