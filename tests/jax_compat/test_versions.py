"""What the installed JAX has (``_jax_compat.versions``), and whose fault an error of the
tool's own code is (``attribution.internal_error``): the seam that lets one pallas-verify
run on JAX 0.10, 0.11 and 0.12 without charging a version gap to a kernel."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify import attribution
from pallas_verify._jax_compat import frames, versions
from pallas_verify.backends.interpreters import GpuInterpret
from pallas_verify.case import ErrorInfo
from pallas_verify.engine import verify


def test_a_field_the_release_lacks_is_left_out_where_it_would_change_nothing(monkeypatch):
    fields = versions.interpret_fields("tpu")
    monkeypatch.setattr(versions, "interpret_fields", lambda platform: fields - {"on_race"})  # JAX 0.11
    params = versions.interpret_params("tpu", on_race="warn", detect_races=True)
    assert params.detect_races is True
    assert "on_race" not in versions.interpret_params_source("tpu", {"on_race": "warn", "detect_races": True})
    with pytest.raises(versions.MissingFeature, match=r"has no field 'on_race' \(asked for on_race='raise'\)"):
        versions.interpret_params("tpu", on_race="raise")


def test_a_field_no_release_has_names_the_field_and_the_fields_there_are():
    with pytest.raises(versions.MissingFeature, match=r"no field 'race_mode'.*'detect_races'"):
        versions.interpret_params("tpu", race_mode="warn")


def test_a_release_without_gpu_interpret_mode_says_so_once_and_the_backend_is_unavailable(monkeypatch):
    real = versions.interpret_params_class
    monkeypatch.setattr(versions, "interpret_params_class", lambda p: None if p == "gpu" else real(p))  # JAX 0.10
    monkeypatch.setattr(versions, "_reexported", lambda module, name: False)
    (gap,) = [g for g in versions.gaps() if "GPU interpret mode" in g.feature]
    assert "not checked" in gap.unchecked
    assert "lacks GPU interpret mode" in GpuInterpret().available()
    with pytest.raises(versions.MissingFeature, match="has no GPU interpret mode"):
        versions.interpret_params("gpu", detect_races=True)


def test_the_gpu_gap_read_without_importing_mosaic_gpu_is_what_the_import_says():
    """The gap a run states first is read from plgpu's source where it re-exports the
    params (0.11 on), else from the import (0.10); either way it is the import's answer."""
    import subprocess
    import sys

    probe = ("import sys, jax.experimental.pallas\n"
             "from pallas_verify._jax_compat import versions\n"
             "said = versions.gpu_interpret_gap() is None\n"
             "imported = 'jax.experimental.pallas.mosaic_gpu' in sys.modules\n"
             "print(said, imported, versions.interpret_params_class('gpu') is not None)\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    said, imported, has = run.stdout.split()
    assert said == has  # no gap exactly when plgpu.InterpretGPUParams exists
    assert imported == ("False" if has == "True" else "True")  # Mosaic GPU imported only to say no


def test_the_installed_release_has_what_its_own_backends_use():
    assert versions.tpu_info_modules() and versions.tensorcore_mesh_class().__name__ == "TensorCoreMesh"
    assert {"detect_races", "num_cores_or_threads", "uninitialized_memory"} <= versions.interpret_fields("tpu")


_TOOL = ("/site-packages/pallas_verify/backends/interpreters.py", 179, "_execute")
_COMPAT = ("/site-packages/pallas_verify/_jax_compat/tracing.py", 283, "index_map_function")
_BOUNDS = ("/site-packages/pallas_verify/_jax_compat/bounds.py", 108, "checked")
_JAX = ("/site-packages/jax/_src/state/discharge.py", 519, "_index_array")
_HLO = ("/site-packages/jax/_src/pallas/hlo_interpreter.py", 400, "pallas_call_hlo_interpret")
_KERNEL = ("/home/me/kernels.py", 12, "body")


def _traceback(*stack):
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "{path}", line {line}, in {function}' for path, line, function in stack]
    return "\n".join([*lines, "TypeError: boom"])


@pytest.mark.parametrize(("stack", "tool"), [
    ((_HLO, _TOOL), True),  # the tool's own line raised
    ((_TOOL, _COMPAT, _JAX), True),  # JAX's code, called by the tool's reading of JAX internals
    ((_TOOL, _JAX), False),  # JAX's code called by the tool's other code: running the kernel
    ((_TOOL, _HLO, _BOUNDS, _JAX), False),  # through the bounds wrapper into JAX's machinery: JAX's
    ((_TOOL, _HLO, _BOUNDS), True),  # the bounds wrapper itself raised (a rule's signature it misread)
    ((_TOOL, _HLO, _KERNEL), False),  # the kernel's line raised
    ((_TOOL, _KERNEL, _COMPAT, _JAX), True),
])
def test_the_tool_frame_is_the_tools_own_raise_or_its_reading_of_jax(stack, tool, monkeypatch):
    monkeypatch.setattr(frames, "_tool_root", lambda: "/site-packages/pallas_verify/")
    monkeypatch.setattr(frames, "_site_package", lambda path: path.split("/site-packages/")[1].split("/")[0]
                        if "/site-packages/" in path else None)
    assert (frames.tool_frame(_traceback(*stack)) is not None) is tool


def test_a_sanitizer_signal_or_a_deliberate_error_is_never_internal():
    here = frames._tool_root() + "backends/interpreters.py"
    tb = _traceback((here, 1, "run"))
    assert attribution.internal_error(ErrorInfo(type="AttributeError", message="x", traceback=tb)) is not None
    assert attribution.internal_error(ErrorInfo(type="MissingFeature", message="x", traceback=tb)) is None
    assert attribution.internal_error(ErrorInfo(type="InvalidSpec", message="x", traceback=tb)) is None
    race = ErrorInfo(type="RuntimeError", message="RACE DETECTED", traceback=tb)
    assert attribution.internal_error(race) is None


def _double(x):
    import jax
    from jax.experimental import pallas as pl

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _spec():
    import numpy as np

    return pv.KernelSpec(name="double", kernel=_double, reference=lambda x: x * 2, configs=st.just({}),
                         inputs=lambda config: st.just((np.ones((8, 128), np.float32),)), platforms=("tpu",))


def test_the_tools_own_failure_is_an_error_cell_with_no_finding_and_the_other_backend_still_judges(
        monkeypatch, tmp_path):
    from pallas_verify._jax_compat import interpret

    # The tool's own code fails on TPU interpret mode (a params class it looks up is not there).
    monkeypatch.setattr(interpret, "interpret_params", lambda platform, **kw: versions.interpret_params("sc", **kw))
    report = verify(_spec(), ["interpret", "tpu_interpret"], max_examples=2, profile="ci", out_dir=tmp_path,
                    isolate="never", static=False)
    cells = {r.backend: r for r in report.results if r.transform is None}
    assert report.findings == []
    assert cells["interpret"].status == "pass"
    assert cells["tpu_interpret"].status == "error"
    reason = cells["tpu_interpret"].reason
    assert reason.startswith("internal error: pallas-verify's own code failed (KeyError: 'sc'")
    assert "_jax_compat/versions.py" in reason and "no finding against the kernel" in reason
    assert dataclasses.asdict(cells["tpu_interpret"])["status"] == "error"


class _FailedToken:
    """A runtime token whose computation failed, as a run that failed after dispatch leaves it."""

    def block_until_ready(self):
        import jax

        raise jax.errors.JaxRuntimeError("INTERNAL: an earlier run's callback failed")


def test_an_error_left_in_jaxs_runtime_token_is_not_charged_to_the_next_kernel(tmp_path):
    """JAX 0.10 and 0.11 keep a failed run's error in the runtime token that orders TPU
    interpret mode's callbacks, and ``effects_barrier`` raises it without forgetting it:
    without the reset after a failure, every later TPU interpret run in the process failed
    with the first one's error (seen after jax's ragged paged attention, n/a by design)."""
    from jax._src import dispatch

    from pallas_verify import _jax_compat

    def tpu_cell():
        report = verify(_spec(), ["tpu_interpret"], max_examples=1, profile="ci", out_dir=tmp_path,
                        isolate="never", static=False)
        return next(r for r in report.results if r.transform is None)

    assert tpu_cell().status == "pass"  # the run leaves its token, which orders the next one
    tokens = dispatch.runtime_tokens.current_tokens
    assert tokens
    for effect in tokens:
        tokens[effect] = _FailedToken()
    _jax_compat.reset_interpreters()  # what a failed run does before the next case
    cell = tpu_cell()
    assert cell.status == "pass", cell.reason


def test_a_dma_source_that_only_a_mislabelled_send_wait_writes_is_not_written(monkeypatch):
    """JAX 0.10 declares a write to the source of a remote copy's send wait: the kernel's
    input is not mutated (a false input_mutation). A wait's write of a ref no DMA of the
    jaxpr reads (a copy started by another call) is counted."""
    import types

    from jax._src.state import types as state_types
    from jax.experimental.pallas import tpu as pltpu

    from pallas_verify._jax_compat import tracing
    from pallas_verify._jax_compat.tracing import written_refs

    monkeypatch.setattr(tracing, "swapped_waits_mislabelled", lambda: True)  # as on JAX 0.10

    class Ref:  # a ref var: hashable, with its aval's dtype
        def __init__(self, dtype):
            self.aval = types.SimpleNamespace(dtype=dtype)

    ref = Ref

    x, out, sem = ref(np.dtype("float32")), ref(np.dtype("float32")), ref(pltpu.SemaphoreType.DMA(()).dtype)
    write, read = state_types.WriteEffect, state_types.ReadEffect

    def eqn(name, *effects):
        return types.SimpleNamespace(primitive=types.SimpleNamespace(name=name), effects=set(effects))

    eqns = [eqn("dma_start", read(x), write(out), write(sem)), eqn("dma_wait", write(x), read(out), write(sem)),
            eqn("dma_wait", read(x), write(out), write(sem))]
    jaxpr = types.SimpleNamespace(eqns=eqns, effects=set().union(*(e.effects for e in eqns)))
    assert set(map(id, written_refs(jaxpr))) == {id(out), id(sem)}
    waits_only = [eqn("dma_wait", read(out), write(x), write(sem))]  # x: the destination of another call's copy
    alone = types.SimpleNamespace(eqns=waits_only, effects=set(waits_only[0].effects))
    assert id(x) in set(map(id, written_refs(alone)))
    jaxpr.eqns.append(eqn("swap", write(x)))  # a real write of x: counted
    assert id(x) in set(map(id, written_refs(jaxpr)))
