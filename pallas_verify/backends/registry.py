"""The backend registry: one table of every backend, by name, and why a kernel does not run on one."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from pallas_verify.backends.base import Backend
from pallas_verify.backends.interpreters import interpreter_backends
from pallas_verify.errors import InvalidArgument, closest

if TYPE_CHECKING:
    from pallas_verify.spec import KernelSpec

__all__ = ["Skip", "all_backends", "get", "resolve", "skip_reason"]


class Skip(NamedTuple):
    """Why a kernel does not run on a backend: the cell's status and its reason."""

    status: Literal["skipped", "unsupported"]
    reason: str


@functools.cache
def all_backends() -> dict[str, Backend]:
    """Every backend pallas-verify knows, available here or not, in cost order."""
    backends: list[Backend] = list(interpreter_backends())
    from pallas_verify.backends.compiled import compile_backends

    backends.extend(compile_backends())
    return {b.name: b for b in backends}


def get(name: str) -> Backend:
    """The backend called ``name``; InvalidArgument naming valid choices otherwise."""
    table = all_backends()
    if name not in table:
        raise InvalidArgument(
            f"backend={name!r} is not a known backend; choose from {', '.join(table)}."
            + closest(name, table)
        )
    return table[name]


def resolve(names: Sequence[str] | None) -> list[Backend]:
    """The named backends (all when None), de-duplicated, in the registry's order."""
    if names is None:
        return list(all_backends().values())
    if isinstance(names, str):
        names = [n for n in names.split(",") if n]
    wanted = {get(n).name for n in names}
    return [b for b in all_backends().values() if b.name in wanted]


def skip_reason(spec: KernelSpec, backend: Backend) -> Skip | None:
    """Why ``spec`` does not run on ``backend`` here, or None when it runs.

    ``skipped``: the kernel cannot run here at all (its function says why:
    ``kernel.unavailable``, e.g. the library it wraps is not installed), the backend is
    not available on this machine, serves platforms the
    kernel does not target, compiles for one device a kernel that needs several, compiles
    in a worker that could not load the spec, or the kernel needs more devices than this
    process has (a kernel function says how many it needs: ``kernel.required_devices``).
    ``unsupported``: the spec declares the backend unsupported.
    """
    missing = getattr(spec.kernel, "unavailable", None)
    reason = (missing if isinstance(missing, str) and missing else None) or backend.available()
    if reason is None and not backend.platforms & set(spec.platforms):
        reason = f"{backend.name} serves {sorted(backend.platforms)}; the kernel targets {list(spec.platforms)}"
    devices = getattr(spec.kernel, "required_devices", 1)
    if reason is None and devices > 1 and not backend.executes:
        reason = (f"{backend.name} compiles for one chip without devices; the kernel runs on a mesh of {devices} "
                  "devices it builds itself (from jax.devices()), which a compile-only target cannot give it: "
                  "it is checked on the interpreters, over host devices")
    if reason is None and getattr(backend, "isolate", False) and _no_reference(spec):
        reason = (f"{backend.name} compiles in a worker process, which loads the KernelSpec by reference; define "
                  "the spec at module level (FILE.py::NAME) to compile it")
    if reason is None:
        reason = _device_shortfall(devices)
    if reason is not None:
        return Skip("skipped", reason)
    declared = spec.unsupported_reason(backend.name)
    return Skip("unsupported", declared) if declared else None


def _no_reference(spec: KernelSpec) -> bool:
    """A spec built inside a function (``kernel_test``) has no reference a worker could load."""
    from pallas_verify.loader import spec_ref

    return spec_ref(spec) is None


def _device_shortfall(needed: int) -> str | None:
    """Why a kernel that needs ``needed`` devices cannot run with this process's, if it cannot."""
    if needed <= 1:
        return None
    import jax

    if needed > jax.device_count():
        return (f"needs {needed} devices, this process has {jax.device_count()}: set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={needed} before starting")
    return None
