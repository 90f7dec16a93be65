"""A hand-written Hypothesis test of one kernel: what a kernel author writes without pallas-verify.

``write_test`` writes a pytest module (and the examples it runs, pickled beside it) that
tests a spec's kernel as such a test would: one ``@given`` test over the examples given
(each an ``@example``, run in Hypothesis's explicit phase: the same examples pallas-verify
ran, no others), the kernel jitted per config under the forced interpreter (the HLO
interpreter, or TPU interpret mode with its default params), the reference jitted, and
``np.testing.assert_allclose`` with the tolerance such a test sets (``bare.baseline_tolerance``,
written into the pickle). It imports the spec's module for its kernel and reference (a
kernel's own module), neither pallas-verify's engine nor its oracles.

Run it as an author would: ``python -m pytest FILE -q -p no:pallas_verify`` (the plugin
is pallas-verify's, which such a test does not have).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["command", "write_test"]

_TEMPLATE = '''"""A hand-written Hypothesis test of {name} on {backend} (benchmarks.handwritten)."""

import functools
import pickle
from pathlib import Path

import jax
import numpy as np
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from jax.experimental.pallas import tpu as pltpu

from {module} import {attr} as SPEC

EXAMPLES = pickle.loads(Path(__file__).with_suffix(".pkl").read_bytes())
PARAMS = {params}


JITTED = {{}}


def run(fn, config, inputs):
    key = (fn, repr(sorted(config.items())))
    if key not in JITTED:
        JITTED[key] = jax.jit(functools.partial(fn, **config))
    return [np.asarray(leaf) for leaf in jax.tree.leaves(JITTED[key](*inputs))]


{examples}@settings(max_examples=len(EXAMPLES), deadline=None, database=None, phases=[Phase.explicit])
@given(st.integers(0, len(EXAMPLES) - 1))
def test_kernel(i):
    config, inputs, tolerances = EXAMPLES[i]
    with pltpu.force_tpu_interpret_mode(PARAMS):
        outputs = run(SPEC.kernel, config, inputs)
    expected = run(SPEC.reference, config, inputs)
    assert len(outputs) == len(expected)
    for out, exp, (rtol, atol) in zip(outputs, expected, tolerances):
        np.testing.assert_allclose(out.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol)
'''


def write_test(folder: Path, stem: str, *, module: str, attr: str, spec: Any, backend: str,
               examples: list[tuple[dict[str, Any], tuple[Any, ...]]]) -> Path:
    """Write ``folder/test_<stem>.py`` (and its ``.pkl``) testing ``spec`` (``module.attr``)
    on ``backend`` (``interpret`` or ``tpu_interpret``) over ``examples``; its path."""
    from benchmarks.bare import baseline_tolerance, reference_run

    rows = []
    for config, inputs in examples:
        expected = reference_run(spec, config, inputs)  # the tolerance a test sets per output dtype
        tolerances = [(baseline_tolerance(spec, e.dtype).rtol, baseline_tolerance(spec, e.dtype).atol)
                      for e in expected]
        rows.append((dict(config), tuple(np.asarray(x) for x in inputs), tolerances))
    path = folder / f"test_{stem}.py"
    path.with_suffix(".pkl").write_bytes(pickle.dumps(rows))
    params = "True" if backend == "interpret" else "pltpu.InterpretParams()"
    decorators = "".join(f"@example({i})\n" for i in range(len(rows)))
    path.write_text(_TEMPLATE.format(name=spec.name, backend=backend, module=module, attr=attr, params=params,
                                     examples=decorators))
    return path


def command(test: Path) -> list[str]:
    """The command that runs ``test`` as its author would (pytest, without pallas-verify's plugin)."""
    import sys

    return [sys.executable, "-m", "pytest", str(test), "-q", "-p", "no:pallas_verify", "-p", "no:cacheprovider",
            "-p", "no:randomly", "--no-header"]
