"""A compiler's worker process serves every spec of a run in turn: handed on from one spec
to the next, and a Mosaic GPU worker kept across GPU targets until it compiles for one
(Mosaic GPU keeps the architecture of its first compile for the process's life)."""

from __future__ import annotations

import pytest

from pallas_verify import verify
from pallas_verify._env import COMPILE_CACHE_ENV
from pallas_verify.backends import registry
from pallas_verify.execution import isolation
from reference_kernels import elementwise, gpu_barrier

# (the specs' modules, not the specs: a KernelSpec imported here would be collected as a test)
pytestmark = [pytest.mark.compile, pytest.mark.slow]

GPUS = ["mosaic_gpu:a100", "mosaic_gpu:h100", "mosaic_gpu:b200"]


@pytest.fixture
def compiler_starts(monkeypatch):
    """The compiler worker processes started (the interpreters' and tracer's are not counted)."""
    starts: list[str] = []
    real = isolation.Child

    def child(*args, env=None, **kwargs):
        if env and COMPILE_CACHE_ENV in env:  # a compiler's worker: no compile read back from a cache
            starts.append("started")
        return real(*args, env=env, **kwargs)

    monkeypatch.setattr(isolation, "Child", child)
    isolation._close_handed()
    yield starts
    isolation._close_handed()


def _statuses(report) -> dict[str, str]:
    return {r.backend: r.status for r in report.results if r.transform is None}


def _needs(*backends: str) -> None:
    for name in backends:
        if (why := registry.get(name).available()) is not None:
            pytest.skip(why)


def test_two_specs_compile_for_two_chips_in_one_worker(compiler_starts, tmp_path):
    _needs("mosaic_tpu:v5e")
    for spec in (elementwise.RAGGED_ADD, elementwise.SCALE_SHIFT):
        report = verify(spec, backends=["mosaic_tpu:v5e", "mosaic_tpu:v6e"], max_examples=1, static=False,
                        out_dir=tmp_path / spec.name)
        assert _statuses(report) == {"mosaic_tpu:v5e": "pass", "mosaic_tpu:v6e": "pass"}, report.results
    assert len(compiler_starts) == 1


def test_a_mosaic_gpu_worker_serves_every_gpu_until_it_compiles_for_one(compiler_starts, tmp_path):
    _needs(*GPUS)
    # A pallas_call with the default lowering: unsupported on Mosaic GPU, which compiles nothing.
    report = verify(elementwise.SCALE_SHIFT, backends=GPUS, max_examples=1, static=False, out_dir=tmp_path / "default")
    assert set(_statuses(report).values()) == {"unsupported"}, report.results
    assert len(compiler_starts) == 1
    # A plgpu.kernel (declared unsupported on A100: nothing runs there) compiles for H100 in
    # the worker handed on from the run before, which then cannot compile for B200: a new one.
    report = verify(gpu_barrier.GPU_BARRIER_AFFINE, backends=GPUS, max_examples=1, static=False, out_dir=tmp_path / "plgpu")
    statuses = _statuses(report)
    assert statuses == {"mosaic_gpu:a100": "unsupported", "mosaic_gpu:h100": "pass", "mosaic_gpu:b200": "pass"}, (
        report.results)
    assert len(compiler_starts) == 2
