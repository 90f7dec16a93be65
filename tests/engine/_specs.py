"""Small specs for the engine's own tests (loaded by file reference)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def _scale_add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + y_ref[...]


def _elementwise(x, y, *, block, n, shift):
    blocks = pl.cdiv(n, block)
    spec = pl.BlockSpec((block,), lambda i: ((i + shift) % blocks,))
    return pl.pallas_call(
        _scale_add,
        grid=(blocks,),
        in_specs=[spec, pl.BlockSpec((block,), lambda i: (i,))],
        out_specs=pl.BlockSpec((block,), lambda i: (i,)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def scale_add(x, y, *, block, n):
    return _elementwise(x, y, block=block, n=n, shift=0)


def scale_add_off_by_one(x, y, *, block, n):
    """Reads x one block ahead: wrong whenever the grid has more than one block."""
    return _elementwise(x, y, block=block, n=n, shift=1)


def scale_add_ref(x, y, *, block, n):
    return x * 2 + y


configs = st.fixed_dictionaries({"block": st.sampled_from([128, 256]), "n": st.integers(1, 700)})


def inputs(config):
    n = config["n"]
    return st.integers(0, 2**32 - 1).map(
        lambda seed: tuple(np.random.default_rng(seed).standard_normal(n).astype(np.float32) for _ in range(2))
    )


good = pv.KernelSpec(name="scale_add", kernel=scale_add, reference=scale_add_ref, configs=configs,
                     inputs=inputs, platforms=("tpu", "gpu"))
off_by_one = pv.KernelSpec(name="scale_add_off_by_one", kernel=scale_add_off_by_one,
                           reference=scale_add_ref, configs=configs, inputs=inputs)


def _host(fn, x):
    """Call ``fn`` on the host when the computation runs (not when it is traced)."""
    return jax.pure_callback(lambda v: (fn(), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _sleeps(x, y, *, block, n):
    return scale_add(_host(lambda: time.sleep(600), x), y, block=block, n=n)


def _aborts(x, y, *, block, n):
    return scale_add(_host(os.abort, x), y, block=block, n=n)


hangs = pv.KernelSpec(name="hangs", kernel=_sleeps, reference=scale_add_ref, configs=configs, inputs=inputs)
aborts = pv.KernelSpec(name="aborts", kernel=_aborts, reference=scale_add_ref, configs=configs, inputs=inputs)


def _reference_raises(x, y, *, block, n):
    raise ValueError("reference cannot take this")


bad_reference = pv.KernelSpec(name="bad_reference", kernel=scale_add, reference=_reference_raises,
                              configs=configs, inputs=inputs)
wrong_shape_reference = pv.KernelSpec(name="wrong_shape_reference", kernel=scale_add,
                                     reference=lambda x, y, *, block, n: (x * 2 + y)[:-1], configs=configs,
                                     inputs=inputs)
bad_inputs = pv.KernelSpec(name="bad_inputs", kernel=scale_add, reference=scale_add_ref, configs=configs,
                           inputs=lambda config: st.just([np.zeros(config["n"], np.float32)] * 2))


def _raises_while_traced(x, y, *, block, n):
    raise ValueError("this kernel cannot be traced")


def _hangs_while_traced(x, y, *, block, n):
    time.sleep(600)


def _aborts_while_traced(x, y, *, block, n):
    os.abort()


def rendezvous_dir(group: int) -> Path:
    """Where the case workers of a test process meet (see ``meets_a_twin``): they join its
    process group, whoever forked them."""
    return Path(tempfile.gettempdir()) / f"pv-rendezvous-{group}"


def _meets_a_twin(x, y, *, block, n):
    """While traced, waits until another process traces it too (or raises after 30 s):
    it passes only when two processes trace it at the same time."""
    here = rendezvous_dir(os.getpgrp())
    here.mkdir(exist_ok=True)
    (here / str(os.getpid())).touch()
    deadline = time.monotonic() + 30.0
    while not any(p.name != str(os.getpid()) for p in here.iterdir()):
        if time.monotonic() > deadline:
            raise RuntimeError("traced alone for 30 s: no other process traced this kernel meanwhile")
        time.sleep(0.01)
    return scale_add(x, y, block=block, n=n)


meets_a_twin = pv.KernelSpec(name="meets_a_twin", kernel=_meets_a_twin, reference=scale_add_ref, configs=configs,
                             inputs=inputs)
trace_raises = pv.KernelSpec(name="trace_raises", kernel=_raises_while_traced, reference=scale_add_ref,
                             configs=configs, inputs=inputs)
trace_hangs = pv.KernelSpec(name="trace_hangs", kernel=_hangs_while_traced, reference=scale_add_ref,
                            configs=configs, inputs=inputs)
trace_aborts = pv.KernelSpec(name="trace_aborts", kernel=_aborts_while_traced, reference=scale_add_ref,
                             configs=configs, inputs=inputs)


def _gridless_copy(x, y, *, block, n):
    from jax.experimental.pallas import tpu as pltpu

    @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=pltpu.TensorCoreMesh(axis_name="c", num_cores=1))
    def copy(x_ref, o_ref):
        pltpu.sync_copy(x_ref, o_ref)

    return copy(x) * 2 + y


gridless = pv.KernelSpec(name="gridless", kernel=_gridless_copy, reference=scale_add_ref, configs=configs,
                         inputs=inputs, platforms=("tpu",))


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _vmapped_inside(x, y, *, block, n):
    """Vmaps a whole-array pallas_call inside the kernel, as jax's GPU decode attention does."""
    one = lambda row: pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(row.shape, row.dtype))(row)  # noqa: E731
    return jax.vmap(one)(x.reshape(1, -1)).reshape(-1) + y


vmapped_inside = pv.KernelSpec(name="vmapped_inside", kernel=_vmapped_inside, reference=scale_add_ref,
                               configs=configs, inputs=inputs, platforms=("gpu",))
