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
from pallas_verify.report import BackendResult, Report
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
) -> Report:
    """Verify each spec on each backend; the Report's results are the matrix."""
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
    report.seconds = time.perf_counter() - started
    return report


def _kernel_entry(spec: KernelSpec) -> dict[str, Any]:
    return {"name": spec.name, "features": list(spec.features), "platforms": list(spec.platforms)}
