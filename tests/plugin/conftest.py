"""Plugin tests run pytest in a subprocess (``pytester``) on small generated spec modules.

In-process runs would share this process's jax with the inner session, and pytester
restores ``sys.modules`` afterwards, so jax modules imported inside would be imported
again later: duplicated lowering registries then break other tests in this process.
"""

from __future__ import annotations

import textwrap

import pytest

# A kernel doubling a (2 * block, 128) array block by block; SHIFT moves the input block
# map by one block (the classic off-by-one index_map bug). Inputs are fixed, so a
# failure shrinks at once.
SPEC_MODULE = textwrap.dedent('''
    from __future__ import annotations

    import jax
    import numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl

    import pallas_verify as pv


    def _body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0


    def _make(shift):
        def kernel(x, *, block):
            nb = x.shape[0] // block
            return pl.pallas_call(
                _body, grid=(nb,),
                in_specs=[pl.BlockSpec((block, 128), lambda i: ((i + shift) % nb, 0))],
                out_specs=pl.BlockSpec((block, 128), lambda i: (i, 0)),
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        return kernel


    def reference(x, *, block):
        return x * 2.0


    def inputs(config):
        x = np.arange(config["block"] * 2 * 128, dtype=np.float32).reshape(-1, 128)
        return st.just((x,))


    CONFIGS = st.fixed_dictionaries({"block": st.sampled_from([8, 16])})
''')


def _spec_line(var: str, name: str, *, shift: int = 0, platforms: tuple[str, ...] = ("tpu", "gpu")) -> str:
    return (f"{var} = pv.KernelSpec(name={name!r}, kernel=_make({shift}), reference=reference, "
            f"configs=CONFIGS, inputs=inputs, platforms={platforms!r})\n")


@pytest.fixture
def spec_file(pytester: pytest.Pytester):
    """Write ``test_<stem>.py`` holding the spec module plus the given spec lines."""

    def write(*lines: str, stem: str = "kernels", extra: str = "") -> None:
        pytester.makepyfile(**{f"test_{stem}": SPEC_MODULE + "".join(lines) + extra})

    return write


@pytest.fixture
def spec_line():
    """``spec_line(VAR, name, shift=0, platforms=...)``: the source of one module-level spec."""
    return _spec_line
