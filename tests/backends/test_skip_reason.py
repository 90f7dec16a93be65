"""Why a kernel does not run on a backend: the one policy engine, fuzz and plugin ask."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify.backends.registry import Skip, skip_reason


@dataclasses.dataclass
class _Backend:
    name: str = "tpu_interpret"
    platforms: frozenset[str] = frozenset({"tpu"})
    missing: str | None = None
    isolate: bool = False
    executes: bool = True

    def available(self) -> str | None:
        return self.missing


def _spec(**extra):
    return pv.KernelSpec(name="k", kernel=lambda x: x, reference=lambda x: x,
                         configs=st.just({}), inputs=lambda c: st.just((np.zeros(4, np.float32),)), **extra)


@pytest.mark.parametrize(
    ("backend", "spec", "expected"),
    [
        (_Backend(), _spec(platforms=("tpu",)), None),
        (_Backend(missing="libtpu is not installed"), _spec(platforms=("tpu",)),
         Skip("skipped", "libtpu is not installed")),
        (_Backend(), _spec(platforms=("gpu",)),
         Skip("skipped", "tpu_interpret serves ['tpu']; the kernel targets ['gpu']")),
        (_Backend(), _spec(platforms=("tpu",), unsupported={"tpu_*": "no remote DMAs there"}),
         Skip("unsupported", "no remote DMAs there")),
        # not available wins over declared unsupported: the declaration is about a backend that runs
        (_Backend(missing="absent"), _spec(platforms=("tpu",), unsupported={"tpu_*": "declared"}),
         Skip("skipped", "absent")),
        # a compiler's worker loads the spec by reference: one built here has none
        (_Backend(name="mosaic_tpu:v5e", isolate=True), _spec(platforms=("tpu",)),
         Skip("skipped", "mosaic_tpu:v5e compiles in a worker process, which loads the KernelSpec by reference; "
                         "define the spec at module level (FILE.py::NAME) to compile it")),
    ],
)
def test_skip_reason(backend, spec, expected):
    assert skip_reason(spec, backend) == expected


def test_a_kernel_needing_more_devices_than_this_process_has_is_skipped_on_every_backend():
    import jax

    def kernel(x):
        return x

    kernel.required_devices = jax.device_count() + 1  # as the catalog's collectives declare it
    spec = pv.KernelSpec(name="k", kernel=kernel, reference=lambda x: x, configs=st.just({}),
                         inputs=lambda c: st.just((np.zeros(4, np.float32),)))
    skip = skip_reason(spec, _Backend())
    assert skip is not None and skip.status == "skipped"
    assert skip.reason.startswith(f"needs {jax.device_count() + 1} devices, this process has {jax.device_count()}")
    kernel.required_devices = jax.device_count()
    assert skip_reason(spec, _Backend()) is None
