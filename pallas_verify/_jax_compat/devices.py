"""Abstract devices for lowering without the hardware (JAX 0.12 internals)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

__all__ = ["abstract_mesh_of", "backends_started"]


def abstract_mesh_of(mesh: Any, device: Any) -> Any:
    """The abstract mesh to lower ``mesh`` under; for a GPU, with the compute capability
    Mosaic GPU reads.

    Mosaic GPU takes the architecture from the abstract device's ``compute_capability``
    and falls back to sm_90 when it has none, which would compile every GPU as H100;
    jax's ``AbstractDevice`` has no such field, so a subclass carries it.
    """
    import jax

    abstract = mesh.abstract_mesh
    capability = getattr(device, "compute_capability", None)
    if capability is None:
        return abstract
    base = abstract.abstract_device
    with_cc = _gpu_abstract_device_class()(
        device_kind=base.device_kind, num_cores=base.num_cores, platform=base.platform,
        compute_capability=capability,
    )
    return jax.sharding.AbstractMesh(
        abstract.axis_sizes, abstract.axis_names, axis_types=abstract.axis_types, abstract_device=with_cc
    )


@functools.cache
def _gpu_abstract_device_class() -> type:
    from jax.sharding import AbstractDevice

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class GpuAbstractDevice(AbstractDevice):
        compute_capability: str

    return GpuAbstractDevice


def backends_started() -> bool:
    """Whether JAX has started a backend in this process (its client threads run from then
    on, so a fork of this process is no longer safe; ``execution.process``)."""
    from jax._src import xla_bridge

    return bool(xla_bridge._backends)
