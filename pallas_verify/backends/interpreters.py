"""The three interpreters: HLO (``interpret=True``), TPU interpret mode, GPU interpret mode."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from pallas_verify import _jax_compat
from pallas_verify.backends import schedule, tpu_reruns
from pallas_verify.backends.execute import execute, jitted
from pallas_verify.backends.families import GPU_TARGETS
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.keys import Lru, shapes_key

__all__ = ["GpuInterpret", "HloInterpret", "TpuInterpret", "interpreter_backends", "trace_context"]


def trace_context(platforms: Any) -> contextlib.AbstractContextManager[None]:
    """The device context a kernel targeting ``platforms`` is traced under here, by every
    interpreter and by the static check and blame: for a TPU kernel, a TPU device kind
    (``emit_pipeline``, ``buffer_bounds="padded"`` and ``pltpu.get_tpu_info`` read the
    chip's tiling from it), as TPU interpret mode and the Mosaic compiles have."""
    return _jax_compat.tpu_target() if "tpu" in tuple(platforms) else contextlib.nullcontext()


@dataclasses.dataclass(frozen=True)
class HloInterpret:
    """The HLO interpreter: a jit'd scan over the grid. Serves every platform."""

    name: str = "interpret"
    platforms: frozenset[str] = frozenset({"tpu", "gpu"})
    executes: bool = True
    isolate: bool = False
    # No shape_invariance rerun: the HLO interpreter compiles the whole grid into one XLA
    # program whose code depends on the array's extent, so a correct kernel's rows can
    # change in the last bit inside a longer array (measured: flash_forward_f32_stats).
    reruns_shapes: bool = False
    arithmetic: str = "xla"

    def available(self) -> str | None:
        return None

    def modes(self) -> st.SearchStrategy[Mapping[str, Any]]:
        return st.just({})

    def run(self, case: Case) -> Outcome:
        """Run with the lanes of masked loads and stores checked against their ref's bounds
        (``_jax_compat.checked_bounds``): a Triton-style mask off by one is ``out_of_bounds``."""
        with trace_context(case.spec.platforms), _jax_compat.checked_bounds():  # a TPU kernel traces as for a TPU
            return execute(case, True)

    def interpret_source(self, mode: Mapping[str, Any]) -> str:
        """The ``interpret=`` value ``run`` uses, as plain-jax source (for reproducers)."""
        return "True"

    def recompiles(self, mode: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
        return True  # no knobs

    def variants(self, mode: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return []

    def witness_mode(self) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class TpuInterpret:
    """TPU interpret mode: simulated memories, DMAs, semaphores, cores; modes per example."""

    name: str = "tpu_interpret"
    platforms: frozenset[str] = frozenset({"tpu"})
    executes: bool = True
    isolate: bool = False
    reruns_shapes: bool = True  # the shape_invariance rerun (oracles/shape_invariance.py)
    arithmetic: str = "xla"

    def available(self) -> str | None:
        return None

    def modes(self) -> st.SearchStrategy[Mapping[str, Any]]:
        from strategies import tpu_interpret_modes

        return tpu_interpret_modes()

    def run(self, case: Case) -> Outcome:
        """Run under the chip's bounds: buffers are padded to their tiled shape
        (``buffer_bounds="padded"``), so a DMA that copies a whole tile past the logical end
        of an array (legal on hardware) is no out-of-bounds read; only reads past the
        tiled allocation are. The padding holds the ``uninitialized_memory`` fill, so the
        NaN-vs-zero rerun still shows padding that leaks into an output. A mode may pin
        ``buffer_bounds="logical"``. Race detection runs only where something can race
        (``tpu_reruns.races_possible``): it is most of a run's cost.

        A kernel that allocates HBM in ``run_scoped`` (which a real TPU does not support)
        runs again with ``allow_hbm_allocation_in_run_scoped=True``, only so that its
        outputs are still judged; the outcome fails saying it cannot run on a TPU."""
        outcome = self._run(case, case.mode)
        if _jax_compat.allocates_hbm_in_run_scoped(outcome.error) and "allow_hbm_allocation_in_run_scoped" not in case.mode:
            return _hbm_in_run_scoped(outcome, self._run(case, {**case.mode, "allow_hbm_allocation_in_run_scoped": True}))
        return outcome

    def _run(self, case: Case, mode: Mapping[str, Any]) -> Outcome:
        with _jax_compat.tpu_target(), _jax_compat.deadlock_watch():
            facts, plan = kernel_facts(case)
            kinds = tpu_reruns.kinds_of(facts)
            skipped = ("race",) if mode.get("detect_races") and not tpu_reruns.races_possible(facts, mode) else ()
            mode = {**mode, **({"detect_races": False} if skipped else {})}
            # Where a rerun could change the outputs only through memory, the run's memory says
            # whether it can; a fill other than the default is applied to the run by the watch.
            defaults = _jax_compat.run_time_knobs()  # none where this JAX's memory cannot be watched
            run_time = {knob: mode.get(knob, default) for knob, default in defaults.items()}
            refill = "uninitialized_memory" in run_time and run_time["uninitialized_memory"] != defaults[
                "uninitialized_memory"]
            watched = plan if tpu_reruns.watch_settles(kinds) or refill else None
            if watched is None:
                run_time.pop("uninitialized_memory", None)
            outcome, seen = _execute(case, mode, run_time, watched)
            if seen is not None and seen.broken and refill:  # the fill may not have been applied: compile it in
                del run_time["uninitialized_memory"]
                outcome, seen = _execute(case, mode, run_time, None)
        outcome = _in_kernel_terms(case, _with_declared_revisit(case, outcome))
        reruns, settled = tpu_reruns.settle(kinds, seen.saw() if seen is not None and outcome.ok else None)
        return dataclasses.replace(outcome, reruns=reruns, settled=tuple(sorted(settled)), skipped=skipped)

    def interpret_source(self, mode: Mapping[str, Any]) -> str:
        """The ``interpret=`` value ``run`` uses, as plain-jax source (for reproducers)."""
        return _jax_compat.tpu_run_source(mode)

    def recompiles(self, mode: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
        """Whether a run in ``variant`` compiles anew after one in ``mode``: not when they
        differ only in knobs read at run time (``_jax_compat.run_time_knobs``), which ``run``
        applies to the run compiled for ``mode`` (in the same process)."""
        knobs = (set(mode) | set(variant)) - set(_jax_compat.run_time_knobs())
        return any(mode.get(k) != variant.get(k) for k in knobs)

    def witness_mode(self) -> dict[str, Any]:
        """The mode it witnesses another backend's upstream limitation in (attribution):
        races detected; upstream's defaults otherwise (one core, out-of-bounds reads
        raised, NaN fill, DMAs completed on wait)."""
        return {"detect_races": True}

    def variants(self, mode: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Metamorphic reruns: (finding kind, mode) with the knob that kind is about changed,
        from the rerun table (``tpu_reruns.RERUNS``).

        A correct kernel gives bitwise-identical outputs under each. The fill, DMA timing and
        race detection are given to a run after it is compiled (``recompiles``); another seed
        or core count retraces and compiles, so ``reruns`` runs those as one rerun; jax's
        cache makes a repeated (config, mode) free.
        """
        return tpu_reruns.variants(mode)


def _execute(case: Case, mode: Mapping[str, Any], run_time: Mapping[str, Any],
             plan: _jax_compat.MemoryPlan | None) -> tuple[Outcome, Any]:
    """Run ``case`` in TPU interpret mode ``mode``, compiled with the upstream defaults of
    the ``run_time`` knobs and given their values while it runs (``_jax_compat.watch_memory``):
    examples and reruns that differ only in those share one compiled run. The outcome, and
    the watch of its memory (None without ``plan``); the outcome carries the schedule run."""
    compiled = {knob: value for knob, value in mode.items() if knob not in run_time}
    params = _jax_compat.tpu_run_params(compiled, recorder=schedule.RECORDER)
    with schedule.recording() as ran, _jax_compat.watch_memory(plan, run_time) as seen:
        outcome = execute(case, params)  # a deadlock ends the run as `deadlock`
    return dataclasses.replace(outcome, schedule=tuple(ran)), seen


def _hbm_in_run_scoped(refused: Outcome, allowed: Outcome) -> Outcome:
    """A kernel that allocates HBM in run_scoped: the outcome of the run that allowed it
    (its outputs are still judged), failing with why it cannot run on a real TPU."""
    assert refused.error is not None
    ran = "runs" if allowed.error is None else f"fails there too ({allowed.error.summary()})"
    message = (f"the kernel allocates HBM in pl.run_scoped, which Pallas does not support on a real TPU "
               f"({refused.error.message}); TPU interpret mode with allow_hbm_allocation_in_run_scoped=True {ran}. "
               "Allocate the buffer as a pallas_call operand or scratch in VMEM instead")
    return dataclasses.replace(allowed, error=ErrorInfo(type="UnsupportedOnTpu", message=message,
                                                        traceback=refused.error.traceback))


def _in_kernel_terms(case: Case, outcome: Outcome) -> Outcome:
    """The outcome with its race reports, semaphore counts, deadlock and out-of-bounds
    messages naming the kernel's own parameters, elements, grid points and source lines
    instead of the interpreter's buffer numbers (``grid.buffers``). The kernel is traced
    again only when there is such a message; when that fails the text stays as it was."""
    error = outcome.error
    named_error = error is not None and _jax_compat.error_kind(error.message) in ("deadlock", "out_of_bounds")
    if not outcome.diagnostics and not named_error:
        return outcome
    from pallas_verify.grid.buffers import in_kernel_terms
    from pallas_verify.grid.trace import grid_mappings
    from pallas_verify.transforms import bound

    try:
        calls = grid_mappings(bound(case), case.inputs, {})
    except Exception:  # names are a courtesy: the interpreter's own text is still right
        return outcome
    if named_error:
        assert error is not None
        error = dataclasses.replace(error, message=in_kernel_terms(error.message, calls))
    return dataclasses.replace(outcome, diagnostics=in_kernel_terms(outcome.diagnostics, calls), error=error)


_REVISITED_OUTPUT = re.compile(r"Revisited block .* of output (\d+) in iteration")


def _with_declared_revisit(case: Case, outcome: Outcome) -> Outcome:
    """``outcome``, its revisit error marked when the revisited output's BlockSpec declares
    ``RevisitMode.ANY`` (TPU interpret mode ignores pipeline modes; ``_jax_compat``'s
    table then names the error an upstream limitation instead of a ``revisit`` finding)."""
    error = outcome.error
    match = _REVISITED_OUTPUT.search(error.message) if error is not None else None
    if error is None or match is None:
        return outcome
    from pallas_verify.grid.trace import grid_mappings
    from pallas_verify.transforms import bound

    try:
        calls = grid_mappings(bound(case), case.inputs, {})
    except Exception:  # a kernel that does not trace again: the error stays as it is
        return outcome
    index = int(match.group(1))
    if not any(index < len(c.outputs) and c.outputs[index].revisit_any for c in calls):
        return outcome
    marked = dataclasses.replace(error, message=f"{error.message} {_jax_compat.REVISIT_ANY_DECLARED}")
    return dataclasses.replace(outcome, error=marked)


def kernel_facts(case: Case) -> tuple[frozenset[str], _jax_compat.MemoryPlan | None]:
    """What ``case``'s kernel has that TPU interpret mode's knobs reach, and the plan of a
    watch of its memory (``_jax_compat.kernel_facts``; traced once per kernel, config,
    transform and input shapes)."""
    import jax

    fn, avals = jitted(case), shapes_key(case.inputs)
    return _KNOBS.get_or_make((fn, avals), lambda: _jax_compat.kernel_facts(
        fn, [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in avals]))


_KNOBS: Lru[tuple[Any, ...], tuple[frozenset[str], _jax_compat.MemoryPlan | None]] = Lru(maxsize=256)


# SM counts GPU interpret mode simulates (mode key "sm_count", the ``core_count`` a kernel
# reads from its device), cheapest first: 2 and 3 make each block of a persistent kernel
# loop over several tiles at sizes cheap to interpret (no GPU has so few SMs, but a kernel
# must be right for any count its clusters fit in; 2 fits a 2-CTA cluster), 16 is an H100
# MIG 1g slice, then the whole H100 and B200.
SM_COUNTS: tuple[int, ...] = (2, 3, 16, *(t.core_count for t in GPU_TARGETS if t.accelerated))


@dataclasses.dataclass(frozen=True)
class GpuInterpret:
    """GPU interpret mode (``plgpu.kernel``-style kernels), with race detection on.

    Its mode is ``plgpu.InterpretGPUParams`` keyword arguments plus ``sm_count``: the
    number of SMs the simulated GPU has, which CPU devices report as ``core_count`` while
    the case runs (jax's Mosaic GPU kernels size their grid by it).
    """

    name: str = "gpu_interpret"
    platforms: frozenset[str] = frozenset({"gpu"})
    executes: bool = True
    isolate: bool = False
    reruns_shapes: bool = False
    arithmetic: str = "xla"

    def available(self) -> str | None:
        gap = _jax_compat.gpu_interpret_gap()
        return None if gap is None else str(gap)

    def modes(self) -> st.SearchStrategy[Mapping[str, Any]]:
        from strategies import gpu_interpret_modes

        return st.tuples(gpu_interpret_modes(), st.sampled_from(SM_COUNTS)).map(
            lambda drawn: {**drawn[0], "sm_count": drawn[1]})

    def run(self, case: Case) -> Outcome:
        params = {k: v for k, v in case.mode.items() if k != "sm_count"}
        with _jax_compat.gpu_device_facts(core_count=case.mode.get("sm_count")):
            hazard = _program_order(case)
            if hazard is not None:
                return Outcome(error=ErrorInfo(type=hazard[0], message=hazard[1]))
            return execute(case, _jax_compat.interpret_params("gpu", **params))

    def interpret_source(self, mode: Mapping[str, Any]) -> str:
        """The ``interpret=`` value ``run`` uses, as plain-jax source (for reproducers; the
        simulated GPU's SM count, ``sm_count``, is not an interpret param)."""
        return _jax_compat.interpret_params_source("gpu", {k: v for k, v in mode.items() if k != "sm_count"})

    def recompiles(self, mode: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
        return True  # no knob of its is applied to a run compiled for another mode

    def witness_mode(self) -> dict[str, Any]:
        """The mode it witnesses another backend's upstream limitation in: races detected."""
        return {"detect_races": True}

    def variants(self, mode: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return []


def _program_order(case: Case) -> tuple[str, str] | None:
    """What GPU interpret mode cannot see for itself, read from the kernel's program order,
    as (error type, message): a WGMMA accumulator read before any wait on its MMA (the
    interpreter runs WGMMA synchronously; ``dma_ordering``), or a ref one thread reads and
    writes in a kernel that turned Mosaic GPU's automatic barriers off (the interpreter runs
    a warpgroup as one thread; ``race``). None when the kernel cannot be traced here (the
    run reports that). A shrink reruns the same kernel on the same shapes many times: the
    answer is kept per (jitted kernel, input shapes, SM count)."""
    fn = jitted(case)
    key = (fn, shapes_key(case.inputs), case.mode.get("sm_count"))
    if key not in _ASYNC_ORDER:
        try:
            traced = fn.trace(*case.inputs)
        except Exception:  # the kernel's own failure: execute reports it
            return None
        wgmma = _jax_compat.wgmma_read_before_wait(traced.jaxpr)
        barriers = _jax_compat.read_and_written_without_auto_barriers(traced.jaxpr)
        _ASYNC_ORDER.put(key, ("AsyncOrderError", f"{_jax_compat.ASYNC_ORDER_MARKER}: {wgmma}") if wgmma else
                         ("RaceError", f"{_jax_compat.RACE_MARKER} (unsafe_no_auto_barriers): {barriers}")
                         if barriers else None)
    return _ASYNC_ORDER.get(key)


_ASYNC_ORDER: Lru[tuple[Any, ...], tuple[str, str] | None] = Lru(maxsize=256)


def interpreter_backends() -> list[Any]:
    return [HloInterpret(), TpuInterpret(), GpuInterpret()]
