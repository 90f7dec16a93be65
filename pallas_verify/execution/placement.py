"""Where a unit of work may run: the hardware a backend needs, and what Ray is asked for.

Interpreters and compile-only backends need only a CPU. A compile backend
(``mosaic_tpu:<chip>``, ``triton:<gpu>``, ``mosaic_gpu:<gpu>``) runs the kernel on real
hardware when its task lands on a host with that chip; the ``--hardware`` policy says
whether the campaign asks for it. On Ray a TPU task asks for the ``TPU`` resource and the
chip's ``accelerator_type:...`` resource, a GPU task for ``num_gpus=1`` and the GPU's
accelerator type (the names Ray's own accelerator managers advertise).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pallas_verify.backends import families
from pallas_verify.errors import InvalidArgument

__all__ = ["HARDWARE_POLICIES", "RAY_ACCELERATOR_TYPES", "RayRequest", "choose_hardware", "hardware_for", "ray_request"]

#: --hardware choices -> what they mean (the CLI help is built from this table).
HARDWARE_POLICIES: Mapping[str, str] = {
    "auto": "run compile backends on a real chip where a worker has one, else compile only on a CPU",
    "require": "run compile backends only on a real chip; skip them (with the reason) where none is offered",
    "never": "compile only, on any CPU, even where a real chip is offered",
}

#: Our target name -> the accelerator type Ray advertises for it (from families' tables).
RAY_ACCELERATOR_TYPES: Mapping[str, str] = {t.name: t.ray_type for t in (*families.TPU_CHIPS, *families.GPU_TARGETS)}

_PLATFORM = {f.name: f.platform for f in families.FAMILIES}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RayRequest:
    """The resources of one Ray task."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    resources: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"CPU={self.num_cpus:g}"] + ([f"GPU={self.num_gpus:g}"] if self.num_gpus else [])
        return ", ".join(parts + [f"{k}={v:g}" for k, v in self.resources.items()])

    def fits(self, offered: Mapping[str, float]) -> bool:
        """Whether one node offering ``offered`` (its total resources) can run the task."""
        wanted = {"CPU": self.num_cpus, "GPU": self.num_gpus, **self.resources}
        return all(offered.get(k, 0.0) >= v for k, v in wanted.items() if v)


def hardware_for(backend: str) -> str | None:
    """``"tpu:<chip>"`` / ``"gpu:<gpu>"`` for a compile backend's target, None otherwise."""
    family, _, target = backend.partition(":")
    platform = _PLATFORM.get(family)
    return f"{platform}:{target}" if platform and target else None


def ray_request(hardware: str | None) -> RayRequest:
    """What a Ray task asks for to run on ``hardware`` (None: one CPU)."""
    if hardware is None:
        return RayRequest()
    platform, _, target = hardware.partition(":")
    if target not in RAY_ACCELERATOR_TYPES:
        raise ValueError(f"hardware={hardware!r} names no known chip; known: {sorted(RAY_ACCELERATOR_TYPES)}.")
    kind = {f"accelerator_type:{RAY_ACCELERATOR_TYPES[target]}": 0.001}
    if platform == "tpu":
        return RayRequest(resources={"TPU": 1.0, **kind})
    return RayRequest(num_gpus=1.0, resources=kind)


def choose_hardware(backend: str, policy: str, offers: Any) -> tuple[str | None, str | None]:
    """(hardware the backend's units ask for, or None; the skip reason, or None).

    ``policy`` is a HARDWARE_POLICIES key; ``offers(hardware)`` is the executor's answer
    (None when offered, else why not).
    """
    if policy not in HARDWARE_POLICIES:
        raise InvalidArgument(f"hardware={policy!r} is not a policy; choose from {', '.join(HARDWARE_POLICIES)}.")
    hardware = hardware_for(backend)
    if hardware is None or policy == "never":
        return None, None
    missing = offers(hardware)
    if missing is None:
        return hardware, None
    if policy == "require":
        return None, f"--hardware require: {backend} needs a real {hardware}; {missing}"
    return None, None
