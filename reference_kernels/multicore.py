"""Multi-core: ``pl.kernel`` over a TensorCore mesh; each core moves its own row range
HBM -> VMEM -> HBM and squares it."""

from __future__ import annotations

import functools
from typing import Any

import jax
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["MULTICORE_SQUARE"]


def _per_core(x_hbm, o_hbm, *, rows_per_core):
    core = jax.lax.axis_index("core")
    rows = pl.ds(pl.multiple_of(core * rows_per_core, rows_per_core), rows_per_core)

    def scoped(buf):
        pltpu.sync_copy(x_hbm.at[rows], buf)
        buf[...] = buf[...] * buf[...]
        pltpu.sync_copy(buf, o_hbm.at[rows])

    pl.run_scoped(scoped, pltpu.VMEM((rows_per_core, x_hbm.shape[1]), x_hbm.dtype))


def _core_mesh(num_cores: int) -> Any:
    """A mesh of ``num_cores`` TensorCores: ``pltpu.TensorCoreMesh`` (JAX 0.11 on; 0.12
    deprecates the factory), else ``pltpu.create_tensorcore_mesh`` (JAX 0.10)."""
    if hasattr(pltpu, "TensorCoreMesh"):
        return pltpu.TensorCoreMesh(axis_name="core", num_cores=num_cores)
    return pltpu.create_tensorcore_mesh("core", num_cores=num_cores)


@functools.partial(jax.jit, static_argnames=("num_cores",))
def multicore_square(x: jax.Array, *, num_cores: int) -> jax.Array:
    """``x * x`` split by rows over ``num_cores`` TensorCores."""
    rows, _ = x.shape
    mesh = _core_mesh(num_cores)
    body = functools.partial(_per_core, rows_per_core=rows // num_cores)
    return pl.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)(x)


@st.composite
def _configs(draw):
    """Whole sublane tiles of rows per core (each core copies its row range) and a ragged
    width (every copy moves whole rows)."""
    num_cores = draw(st.sampled_from([1, 2]))
    tile = pvs.preferred_sublane_tile("float32")
    per_core = draw(pvs.ragged_sizes(block=tile, max_blocks=3, kinds=("exact",)))
    return {"rows": num_cores * per_core, "cols": draw(pvs.ragged_sizes(block=pvs.TPU_LANES, max_blocks=2)),
            "num_cores": num_cores}


MULTICORE_SQUARE = pv.KernelSpec(
    name="multicore_square",
    kernel=without(multicore_square, "rows", "cols"),
    reference=without(lambda x: x * x, "rows", "cols", "num_cores"),
    configs=_configs(),
    inputs=lambda c: array_tuples((c["rows"], c["cols"])),
    features=("multicore", "core_mesh", "run_scoped", "manual_dma"),
    unsupported={"interpret": "the HLO interpreter cannot run pl.kernel over a TensorCoreMesh"},
)
