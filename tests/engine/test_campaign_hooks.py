"""verify's hooks for campaigns: ``stop`` ends a search after its current example, keeping
its findings; ``aligned`` makes every backend's search run the same examples."""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

from pallas_verify.engine import verify
from pallas_verify.spec import KernelSpec


def _kernel(x: jax.Array, *, plus: float) -> jax.Array:
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + plus

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _spec(plus: float) -> KernelSpec:
    return KernelSpec(name="add", kernel=lambda x, n: _kernel(x, plus=plus), reference=lambda x, n: x,
                      configs=st.fixed_dictionaries({"n": st.integers(1, 64)}),
                      inputs=lambda c: st.just((np.arange(c["n"] * 8, dtype=np.float32).reshape(8, c["n"]),)))


def test_a_stopped_search_runs_one_example_and_keeps_its_finding(tmp_path: Path) -> None:
    started = time.monotonic()
    report = verify(_spec(1.0), ["interpret"], 200, 0, isolate="never", static=False, out_dir=tmp_path,
                    stop=lambda: True)
    assert time.monotonic() - started < 30  # no shrinking: the budget is spent
    assert [f.kind for f in report.findings] == ["mismatch"]
    assert report.results[0].examples == 1


def test_a_clean_search_stops_after_its_first_example(tmp_path: Path) -> None:
    report = verify(_spec(0.0), ["interpret"], 200, 0, isolate="never", static=False, out_dir=tmp_path,
                    stop=lambda: True)
    assert report.findings == []
    assert report.results[0].examples == 1


def test_aligned_searches_run_the_same_examples_on_every_backend(tmp_path: Path, monkeypatch) -> None:
    from pallas_verify import runner
    from pallas_verify.keys import example_key

    seen: dict[str, list[str]] = {}
    judge = runner.Runner.judge

    def spy(self, config, inputs, backend, mode, transform=None, **kw):  # type: ignore[no-untyped-def]
        seen.setdefault(backend.name, []).append(example_key(config, inputs))
        return judge(self, config, inputs, backend, mode, transform, **kw)

    monkeypatch.setattr(runner.Runner, "judge", spy)
    verify(_spec(0.0), ["interpret", "tpu_interpret"], 5, 3, isolate="never", static=False, out_dir=tmp_path,
           metamorphic=False, aligned=True)
    assert seen["interpret"] == seen["tpu_interpret"] and len(seen["interpret"]) == 5
