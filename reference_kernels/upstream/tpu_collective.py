"""KernelSpec wrapping jax's TPU all-gather (``ops.tpu.all_gather``): a bidirectional ring
of remote DMAs with a barrier semaphore, inside ``shard_map`` over a 1-D mesh of
``REQUIRED_DEVICES`` devices, with the shards in VMEM or in HBM.

On a CPU host the devices exist only with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set before jax is imported (the
conformance command sets it); with fewer the wrapper raises ``NotEnoughDevices`` and
``all_gather.required_devices`` lets a runner skip the spec with that reason.

The reference is the identity: gathering every shard back along the sharded axis
rebuilds the global array.
"""

from __future__ import annotations

import functools

import jax
from hypothesis import strategies as st
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import all_gather as upstream_all_gather

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without
from reference_kernels.collective import REQUIRED_DEVICES, NotEnoughDevices

__all__ = ["TPU_ALL_GATHER"]

_AXIS = "x"
_MEMORY_SPACES = {"vmem": pltpu.VMEM, "hbm": pltpu.HBM}


@functools.cache
def _mesh() -> jax.sharding.Mesh:
    return jax.make_mesh((REQUIRED_DEVICES,), (_AXIS,), devices=jax.devices()[:REQUIRED_DEVICES],
                         axis_types=(jax.sharding.AxisType.Auto,))


def all_gather(x, *, memory_space):
    """Gather the row shards of ``x`` (split over the mesh) on every device."""
    if jax.device_count() < REQUIRED_DEVICES:
        raise NotEnoughDevices(
            f"all_gather needs {REQUIRED_DEVICES} devices, found {jax.device_count()}; on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={REQUIRED_DEVICES} before jax is imported")
    return upstream_all_gather.all_gather(x, mesh=_mesh(), axis_name=_AXIS,
                                          memory_space=_MEMORY_SPACES[memory_space])


all_gather.required_devices = REQUIRED_DEVICES  # type: ignore[attr-defined]


def all_gather_reference(x, **_config):
    return x


@st.composite
def _configs(draw):
    """Rows per device: whole sublane tiles, an even count (the ring sends each half one
    way); one or two lane tiles of columns."""
    return {"rows_per_device": draw(pvs.ragged_sizes(block=8, max_blocks=2, kinds=("exact",))),
            "cols": draw(pvs.ragged_sizes(block=pvs.TPU_LANES, max_blocks=2, kinds=("exact",))),
            "dtype": draw(st.sampled_from(["float32", "bfloat16"])),
            "memory_space": draw(st.sampled_from(sorted(_MEMORY_SPACES)))}


TPU_ALL_GATHER = pv.KernelSpec(
    name="upstream_tpu_all_gather",
    kernel=without(all_gather, "rows_per_device", "cols", "dtype"),
    reference=all_gather_reference,
    configs=_configs(),
    inputs=lambda c: array_tuples((REQUIRED_DEVICES * c["rows_per_device"], c["cols"]), dtype=c["dtype"]),
    features=("remote_dma", "multi_device", "shard_map", "semaphores", "barrier", "upstream"),
    unsupported={"interpret": "the HLO interpreter cannot run remote DMAs or barrier semaphores "
                 "(TypeError: No ir_type_handler for aval type: AbstractRef, jax 0.12.0.1)",
                 "tpu_interpret": "jax's all_gather is wrong: every ring hop signals one receive semaphore, so "
                 "a device can forward a half-shard it has not received yet (a race at all_gather.py:85 and :99; "
                 "NaN rows with late DMAs). docs/upstream-findings.md section 3 has the plain-jax reproducer and "
                 "the four-line fix; declared here so a conformance run judges TPU interpret mode, not this "
                 "known bug of jax 0.12.0.1"},
)
