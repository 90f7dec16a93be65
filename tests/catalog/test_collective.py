"""The multi-device ring permute: correct on 4 host devices (in a subprocess, because
XLA_FLAGS must be set before jax is imported), and a clear error with fewer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from reference_kernels import collective

_SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import sys
    sys.path.insert(0, {tests!r})
    from hypothesis import find
    from catalog_interpreters import applicable, assert_matches, ground_truth, reference, run
    from reference_kernels.collective import RING_PERMUTE as spec

    for interp in applicable(spec):
        for rows in (8, 16):
            config = {{"rows_per_device": rows, "cols": 128}}
            # Nonzero rows (the simplest draw is all zeros, which any permutation keeps).
            inputs = find(spec.inputs(config), lambda xs: bool((xs[0] != 0).all()))
            assert_matches(spec, run(spec, interp, config, inputs),
                           reference(spec, config, inputs), ground_truth(spec, config, inputs))
            print("ok", interp.name, rows)
""")


@pytest.mark.slow
def test_ring_permute_on_four_host_devices():
    script = _SCRIPT.format(tests=os.path.dirname(__file__))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("ok ") == 8, done.stdout


def test_ring_permute_names_the_missing_devices():
    import jax

    if jax.device_count() >= collective.REQUIRED_DEVICES:
        pytest.skip("this process has enough devices")
    assert collective.RING_PERMUTE.kernel.required_devices == collective.REQUIRED_DEVICES
    with pytest.raises(collective.NotEnoughDevices, match="xla_force_host_platform_device_count=4"):
        collective.ring_permute(np.zeros((32, 128), np.float32))
