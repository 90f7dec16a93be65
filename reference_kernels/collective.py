"""Multi-device ring permute: each device sends its shard to its right neighbour with a
remote DMA, inside ``jax.shard_map`` over a 1-D mesh of ``REQUIRED_DEVICES`` devices.

On a CPU host the devices exist only when ``XLA_FLAGS`` contains
``--xla_force_host_platform_device_count=4`` before jax is imported. With fewer devices
the kernel raises :class:`NotEnoughDevices` (a ``RuntimeError``) naming the count and the
fix; ``REQUIRED_DEVICES`` (also ``ring_permute.required_devices``) lets a runner check
first and report the spec as unsupported instead of failing it.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import PartitionSpec as P

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["REQUIRED_DEVICES", "RING_PERMUTE", "NotEnoughDevices", "missing_devices"]

#: Devices the ring needs; on CPU set XLA_FLAGS=--xla_force_host_platform_device_count=4.
REQUIRED_DEVICES = 4
_AXIS = "x"


class NotEnoughDevices(pv.PallasVerifyError, RuntimeError):
    """The kernel needs more devices than this process has."""


def missing_devices() -> str | None:
    """None when ``REQUIRED_DEVICES`` devices exist, else the reason and the fix."""
    count = jax.device_count()
    if count >= REQUIRED_DEVICES:
        return None
    return (f"ring_permute needs {REQUIRED_DEVICES} devices, found {count}; on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={REQUIRED_DEVICES} "
            "before jax is imported")


def _ring_body(x_ref, o_ref, send_sem, recv_sem):
    me = jax.lax.axis_index(_AXIS)
    right = jax.lax.rem(me + 1, REQUIRED_DEVICES)
    copy = pltpu.make_async_remote_copy(
        src_ref=x_ref, dst_ref=o_ref, send_sem=send_sem, recv_sem=recv_sem,
        device_id=(right,), device_id_type=pl.DeviceIdType.MESH)
    copy.start()
    copy.wait()


def _ring_shard(x: jax.Array) -> jax.Array:
    return pl.pallas_call(
        _ring_body,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.SemaphoreType.DMA(()), pltpu.SemaphoreType.DMA(())],
    )(x)


def ring_permute(x: jax.Array) -> jax.Array:
    """Rotate the row shards of ``x`` one device to the right around the ring."""
    reason = missing_devices()
    if reason is not None:
        raise NotEnoughDevices(reason)
    mesh = jax.make_mesh((REQUIRED_DEVICES,), (_AXIS,), devices=jax.devices()[:REQUIRED_DEVICES],
                         axis_types=(jax.sharding.AxisType.Auto,))
    return _ring_jit(mesh)(x)


ring_permute.required_devices = REQUIRED_DEVICES  # type: ignore[attr-defined]


@functools.cache
def _ring_jit(mesh: jax.sharding.Mesh):
    return jax.jit(jax.shard_map(_ring_shard, mesh=mesh, in_specs=P(_AXIS), out_specs=P(_AXIS),
                                 check_vma=False))


def ring_permute_reference(x):
    shards = np.split(np.arange(x.shape[0]), REQUIRED_DEVICES)
    order = np.concatenate([shards[-1], *shards[:-1]])
    return x[order]


@st.composite
def _configs(draw):
    """Whole sublane tiles of rows per device and one or two lane tiles of columns."""
    return {"rows_per_device": draw(pvs.ragged_sizes(block=8, max_blocks=2, kinds=("exact",))),
            "cols": draw(pvs.ragged_sizes(block=pvs.TPU_LANES, max_blocks=2, kinds=("exact",)))}


RING_PERMUTE = pv.KernelSpec(
    name="ring_permute",
    kernel=without(ring_permute, "rows_per_device", "cols"),
    reference=without(ring_permute_reference, "rows_per_device", "cols"),
    configs=_configs(),
    inputs=lambda c: array_tuples((REQUIRED_DEVICES * c["rows_per_device"], c["cols"])),
    features=("remote_dma", "multi_device", "shard_map", "semaphores"),
)
