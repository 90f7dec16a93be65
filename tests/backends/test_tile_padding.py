"""TPU interpret mode runs with the chip's bounds: a DMA that copies a whole tile past the
logical end of an array reads the padded allocation (legal); only reads past the padding
are out of bounds; padding that leaks into an output still shows (NaN vs zero fill)."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import textwrap

import numpy as np

from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.case import Case
from reference_kernels.mutants import tiles

X = np.random.default_rng(0).standard_normal((tiles.GROUPS * tiles.TM, 129)).astype(np.float32)
EXPECTED = np.asarray(tiles._tile_sum_ref(X, n=129))


def run(spec, **mode):
    return TpuInterpret().run(Case(spec=spec, config={"n": 129}, inputs=(X,), backend="tpu_interpret", mode=mode))


def test_masked_tile_padded_read_is_legal_and_correct():
    outcome = run(tiles.tile_sum_masked_spec, out_of_bounds_reads="raise")
    assert outcome.error is None, outcome.error
    np.testing.assert_allclose(outcome.outputs[0], EXPECTED, rtol=1e-6, atol=1e-6)


def test_the_same_read_under_logical_bounds_is_out_of_bounds():
    outcome = run(tiles.tile_sum_masked_spec, out_of_bounds_reads="raise", buffer_bounds="logical")
    assert outcome.error is not None and outcome.error.type == "IndexError"
    assert "Out-of-bounds read" in outcome.error.message and "shape (16, 129)" in outcome.error.message


def test_padding_that_leaks_into_the_output_differs_between_nan_and_zero_fill():
    nan_fill = run(tiles.tile_padding_leak_spec, uninitialized_memory="nan").outputs[0]
    zero_fill = run(tiles.tile_padding_leak_spec, uninitialized_memory="zero").outputs[0]
    assert np.isnan(nan_fill[:, 1:]).all() and not np.isnan(nan_fill[:, 0]).any()
    np.testing.assert_allclose(zero_fill, EXPECTED, rtol=1e-6, atol=1e-6)


def test_a_read_past_the_padded_allocation_is_still_out_of_bounds():
    # One tile too many: columns 256..383 lie past the (16, 256) tiled allocation.
    too_far = functools.partial(tiles.tile_sum, n=129 + 2 * tiles.TN, mask=True)
    spec = dataclasses.replace(tiles.tile_sum_masked_spec, name="tile_sum_too_far", kernel=lambda x, *, n: too_far(x))
    outcome = run(spec, out_of_bounds_reads="raise")
    assert outcome.error is not None and "Out-of-bounds read" in outcome.error.message


def test_padded_bounds_work_inside_shard_map_over_host_devices(tmp_path):
    """The abstract-mesh route to a TPU device kind breaks shard_map kernels; ours does not."""
    script = tmp_path / "sharded.py"
    script.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        from jax.experimental import pallas as pl
        from jax.sharding import NamedSharding, PartitionSpec as P
        import pallas_verify as pv
        from pallas_verify.backends.interpreters import TpuInterpret
        from pallas_verify.case import Case
        from hypothesis import strategies as st

        mesh = jax.make_mesh((4,), ("x",))

        def double(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2

        def kernel(x):
            inner = lambda a: pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype))(a)
            x = jax.device_put(x, NamedSharding(mesh, P("x")))
            return jax.shard_map(inner, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False)(x)

        spec = pv.KernelSpec(name="sharded", kernel=kernel, reference=lambda x: 2 * x,
                             configs=st.just({}), inputs=lambda c: st.just((np.ones((32, 128), np.float32),)))
        out = TpuInterpret().run(Case(spec=spec, config={}, inputs=(np.ones((32, 128), np.float32),),
                                      backend="tpu_interpret"))
        assert out.error is None, out.error
        print("sum", float(out.outputs[0].sum()))
    """))
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run_ = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert "sum 8192.0" in run_.stdout, run_.stderr[-3000:]
