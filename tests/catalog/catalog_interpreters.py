"""Run a catalog kernel under each interpreter this machine has, by forcing the mode
from outside (the kernels never pass ``interpret=``)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from pallas_verify import _jax_compat
from pallas_verify.causes import simplest
from pallas_verify.oracles.differential import compare_outputs
from pallas_verify.reference import Truth, reference_outputs, reference_truth


@dataclasses.dataclass(frozen=True, kw_only=True)
class Interpreter:
    """One way to run a kernel: a name, the platform it serves and the forced mode.

    TPU modes with ``detect_races`` keep the default ``on_race="raise"``: a race fails
    the run with ``RuntimeError: RACE DETECTED``.
    """

    name: str
    backend: str
    platform: str
    mode: Callable[[], Any]


def _tpu(**params: Any) -> Callable[[], Any]:
    return lambda: pltpu.InterpretParams(**params)


_RACES = {"detect_races": True, "num_cores_or_threads": 2}
INTERPRETERS: tuple[Interpreter, ...] = (
    Interpreter(name="interpret", backend="interpret", platform="any", mode=lambda: True),
    Interpreter(name="tpu", backend="tpu_interpret", platform="tpu", mode=_tpu()),
    Interpreter(name="tpu_races_eager_nan", backend="tpu_interpret", platform="tpu",
                mode=_tpu(**_RACES, dma_execution_mode="eager", uninitialized_memory="nan")),
    Interpreter(name="tpu_races_onwait_zero", backend="tpu_interpret", platform="tpu",
                mode=_tpu(**_RACES, dma_execution_mode="on_wait", uninitialized_memory="zero",
                          random_seed=7)),
    Interpreter(name="gpu", backend="gpu_interpret", platform="gpu", mode=lambda: plgpu.InterpretGPUParams()),
    Interpreter(name="gpu_races", backend="gpu_interpret", platform="gpu",
                mode=lambda: plgpu.InterpretGPUParams(detect_races=True)),
)


def applicable(spec: pv.KernelSpec) -> list[Interpreter]:
    """The interpreters that serve one of the spec's platforms (supported or not)."""
    return [i for i in INTERPRETERS if i.platform == "any" or i.platform in spec.platforms]


def missing_devices(spec: pv.KernelSpec) -> str | None:
    """Why this process lacks the devices the kernel declares it needs, if it does."""
    needed = getattr(spec.kernel, "required_devices", 1)
    if jax.device_count() >= needed:
        return None
    return f"{spec.name} needs {needed} devices, this process has {jax.device_count()}"


def minimal_example(spec: pv.KernelSpec) -> tuple[dict, tuple]:
    """The simplest config and its simplest inputs (deterministic: ``causes.simplest``)."""
    config = simplest(spec.configs)
    return config, simplest(spec.inputs(config))


@contextlib.contextmanager
def forced(interpreter: Interpreter) -> Iterator[None]:
    """Force ``interpreter`` for every pallas_call traced inside; clean up after errors."""
    # A GPU kernel may size its grid by the SM count: the CPU devices report 2 SMs, the
    # cheapest count GPU interpret mode draws.
    try:
        with pltpu.force_tpu_interpret_mode(interpreter.mode()), _jax_compat.gpu_device_facts(core_count=2):
            yield
    except BaseException:
        _jax_compat.reset_interpreters()  # TPU and GPU interpret mode: a stale GPU state hangs the next run
        raise


def run(spec: pv.KernelSpec, interpreter: Interpreter, config: dict, inputs: tuple) -> list[np.ndarray]:
    """The kernel's outputs as numpy arrays, run under ``interpreter``."""
    with forced(interpreter):
        out = spec.kernel(*inputs, **config)
        leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(out)]
        jax.effects_barrier()
    return leaves


def reference(spec: pv.KernelSpec, config: dict, inputs: tuple) -> list[np.ndarray]:
    """The reference's outputs as numpy arrays (jit on CPU), compiled once per config as
    ``verify`` compiles it: the tests of each interpreter of a spec draw the same examples."""
    return reference_outputs(spec.reference, config, inputs)[0]


def ground_truth(spec: pv.KernelSpec, config: dict, inputs: tuple) -> Truth:
    """The reference evaluated in float64 (what the default oracle judges against)."""
    return reference_truth(spec.reference, config, inputs)


def assert_matches(spec: pv.KernelSpec, got: list[np.ndarray], want: list[np.ndarray], truth: Truth | None = None) -> None:
    """Every output leaf matches the reference's in shape, dtype and value, judged as
    ``verify`` judges: the spec's tolerance if it has one, else the precision oracle."""
    assert len(got) == len(want), f"{spec.name}: {len(got)} outputs, reference has {len(want)}"
    paths = [f"{spec.name} output {i}" for i in range(len(want))]
    table = compare_outputs(paths, got, want, spec.tolerance, truth if spec.tolerance is None else None)
    bad = [c.describe() for c in table if not c.ok]
    assert not bad, "\n".join(bad)
