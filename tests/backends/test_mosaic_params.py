"""The mosaic_tpu backends' compiler params: drawn overrides of a kernel's own, whose fault each
outcome is, and the side-effect count (``backends.mosaic_params``).

Real deviceless compiles for v5e (marker ``compile``), except the figure and the
classification of a compiler's refusal, which need none.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from pallas_verify.backends import mosaic_params
from pallas_verify.backends.compiled import CompiledBackend
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.oracles.differential import outcome_findings

MIB = 1 << 20
ROWS = 8192  # a (8192, 128) float32 block is 4 MiB: in and out, double-buffered, need 16 MiB


def _scale(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def big_blocks(x, *, vmem_limit_bytes=None):
    spec = pl.BlockSpec((ROWS, 128), lambda i: (i, 0))
    return pl.pallas_call(_scale, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[spec], out_specs=spec,
                          compiler_params=pltpu.CompilerParams(vmem_limit_bytes=vmem_limit_bytes))(x)


def _profiled(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2
    pltpu.trace_value("total", jnp.sum(x_ref[...]))


def profiled(x, *, has_side_effects=False):
    return pl.pallas_call(_profiled, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pltpu.CompilerParams(has_side_effects=has_side_effects))(x)


def doubled(x, *, has_side_effects=False):
    return pl.pallas_call(_scale, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pltpu.CompilerParams(has_side_effects=has_side_effects))(x)


jitted_doubled = jax.jit(doubled, static_argnames="has_side_effects")


def _run(kernel, x, mode=None, **config) -> tuple[Case, Outcome]:
    spec = pv.KernelSpec(name=getattr(kernel, "__name__", "kernel"), kernel=kernel, reference=kernel,
                         configs=st.just(config), inputs=lambda c: st.just((x,)))
    case = Case(spec=spec, config=config, inputs=(x,), backend="mosaic_tpu:v5e", mode=mode or {})
    return case, CompiledBackend(family="mosaic_tpu", target="v5e").run(case)


def _records(outcome: Outcome) -> list[dict]:
    return list((outcome.compiler_params or {}).get("records", []))


SMALL = np.ones((8, 128), np.float32)


@pytest.mark.compile
def test_a_drawn_vmem_limit_below_the_kernel_s_need_is_no_failure_and_brackets_it():
    x = np.ones((2 * ROWS, 128), np.float32)
    coverage = mosaic_params.ParamsCoverage()
    for limit, result in ((8 * MIB, "vmem_exceeded"), (64 * MIB, "compiled")):
        _, outcome = _run(big_blocks, x, {"compiler_params": {"vmem_limit_bytes": limit}})
        assert outcome.ok and outcome.compiled_only
        [record] = _records(outcome)
        assert record["result"] == result and "fault" not in record
        coverage.add(outcome.compiler_params)
    assert coverage.figure()["vmem"] == {"exceeds": 8 * MIB, "fits": 64 * MIB}


@pytest.mark.compile
def test_a_declared_limit_the_kernel_does_not_fit_in_is_its_compile_error():
    case, outcome = _run(big_blocks, np.ones((2 * ROWS, 128), np.float32), vmem_limit_bytes=8 * MIB)
    [finding] = outcome_findings(case, outcome, None, ["out"])
    assert finding.kind == "compile_error"
    assert "the kernel declares vmem_limit_bytes=8388608; v5e has 128 MiB of VMEM per core" in finding.message
    assert "CompileTimeScopedVmemOom" in finding.message


@pytest.mark.compile
def test_an_effect_xla_cannot_see_without_has_side_effects_is_the_kernel_s_side_effect():
    case, outcome = _run(profiled, SMALL)
    [finding] = outcome_findings(case, outcome, None, ["out"])
    assert finding.kind == "side_effect"
    assert "pltpu.trace_value (trace_value) at " in finding.message
    assert "runs it 1 time(s) where 3 are needed: XLA merged the two calls" in finding.message
    _, clean = _run(profiled, SMALL, has_side_effects=True)
    assert clean.ok and clean.compiler_params is None


@pytest.mark.compile
def test_jax_dropping_a_declared_kernel_inside_a_jit_is_recorded_as_jax_s():
    _, outcome = _run(jitted_doubled, SMALL, has_side_effects=True)
    assert outcome.ok  # not the kernel's
    [record] = _records(outcome)
    assert (record["result"], record["fault"]) == ("dropped", "jax")
    assert "sits inside a jax.jit" in record["error"]
    _, bare = _run(doubled, SMALL, {"compiler_params": {"has_side_effects": "side_effecting"}})
    assert _records(bare) == [{"override": {"has_side_effects": "side_effecting"}, "result": "compiled"}]


def test_a_compiler_refusal_of_a_drawn_value_is_jax_s_and_a_vmem_overflow_information(monkeypatch):
    failures = {"RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom": "vmem_exceeded",
                "Mosaic failed to compile TPU kernel: unsupported": "rejected"}
    for text, result in failures.items():
        failed = (Outcome(error=ErrorInfo(type="JaxRuntimeError", message=text)), None)
        monkeypatch.setattr(mosaic_params._Compiler, "compile", lambda *_a, failed=failed: failed)
        record = mosaic_params._overridden(mosaic_params._Compiler(case=None, target="v5e", key=None),
                                           {"allow_input_fusion": True}, [])
        assert record["result"] == result
        assert record.get("fault") == ("jax" if result == "rejected" else None)


def test_the_figure_counts_results_and_keeps_jax_s_failures():
    coverage = mosaic_params.ParamsCoverage()
    coverage.add({"records": [{"override": {"vmem_limit_bytes": 4 * MIB}, "result": "vmem_exceeded", "error": "e"}]})
    coverage.add({"records": [{"override": {"vmem_limit_bytes": 16 * MIB, "disable_bounds_checks": True},
                               "result": "compiled"}]})
    coverage.add({"records": [{"override": {"has_side_effects": True}, "result": "dropped", "fault": "jax",
                               "error": "why"}]})
    coverage.add(None)
    figure = coverage.figure()
    assert figure["examples"] == 3
    assert figure["results"] == {"compiled": 1, "dropped": 1, "vmem_exceeded": 1}
    assert figure["fields"] == ["disable_bounds_checks", "has_side_effects", "vmem_limit_bytes"]
    assert figure["vmem"] == {"exceeds": 4 * MIB, "fits": 16 * MIB}
    assert [r["result"] for r in figure["jax"]] == ["dropped"]


def test_modes_draw_around_the_chip_s_vmem():
    from hypothesis import find

    backend = CompiledBackend(family="mosaic_tpu", target="v4")
    assert find(backend.modes(), lambda _: True) == {}
    drawn = find(backend.modes(), lambda m: "vmem_limit_bytes" in m.get("compiler_params", {}))
    assert drawn == {"compiler_params": {"vmem_limit_bytes": 16 * MIB}}  # v4: 16 MiB per core, drawn first
