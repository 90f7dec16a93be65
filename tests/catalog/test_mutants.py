"""Each mutant's raw signal shows in direct runs; each correct twin is clean."""

from __future__ import annotations

import contextlib
import functools
import logging
import signal

import jax
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from pallas_verify import _jax_compat, transforms
from pallas_verify.causes import simplest
from pallas_verify.grid.check import check_grid
from reference_kernels.mutants import FINDING_KINDS, Mutant, backward, compile_mutants, mutants

MUTANTS = {m.name: m for m in mutants()}
F32_TOL = (1e-5, 1e-5)
BF16_TOL = (1.6e-2, 1e-5)
F16_TOL = (1e-3, 1e-5)


def example(spec):
    """The simplest config and inputs of ``spec`` (deterministic)."""
    config = simplest(spec.configs)
    return config, simplest(spec.inputs(config))


def run(spec, config, inputs, **mode) -> np.ndarray:
    """The kernel in TPU interpret mode under the chip's (padded) bounds, as tpu_interpret runs it;
    a kernel that does not target TPU (Triton-style) on the HLO interpreter, bare."""
    if "tpu" not in spec.platforms:
        with pltpu.force_tpu_interpret_mode(True):
            return np.asarray(spec.kernel(*inputs, **config)).astype(np.float32)
    params = pltpu.InterpretParams(**{"buffer_bounds": "padded", **mode})
    with _jax_compat.tpu_target(), pltpu.force_tpu_interpret_mode(params):
        return np.asarray(spec.kernel(*inputs, **config)).astype(np.float32)


def error_text(spec, config, inputs, **mode) -> str:
    with pytest.raises(Exception) as info:  # noqa: PT011  (any wrapped interpreter error)
        run(spec, config, inputs, **mode)
    return str(info.value)


def close(actual, expected, tol=F32_TOL) -> bool:
    rtol, atol = tol
    expected = np.asarray(expected).astype(np.float32)
    return bool(np.all(np.abs(actual - expected) <= atol + rtol * np.abs(expected)))


def reference(spec, config, inputs):
    return spec.reference(*inputs, **config)


def mutant(name) -> tuple[Mutant, dict, tuple]:
    m = MUTANTS[name]
    config, inputs = example(m.spec)
    return m, config, inputs


def test_catalog_covers_every_kind_the_cpu_can_produce():
    named = {kind for m in MUTANTS.values() for kind in m.expects}
    # side_effect is a compile backend's (compile_mutants, tests/quality/test_compile_mutants_found.py).
    cpu_kinds = set(FINDING_KINDS) - {"backend_divergence", "compile_error", "crash", "exception", "side_effect"}
    assert cpu_kinds <= named
    assert "side_effect" in {kind for m in compile_mutants() for kind in m.expects}
    assert len(MUTANTS) >= 12
    assert len({m.twin.name for m in MUTANTS.values()}) == len(MUTANTS)


def test_acc_across_parallel_races_and_mismatches():
    m, config, inputs = mutant("acc_across_parallel")
    text = error_text(m.spec, config, inputs, detect_races=True, num_cores_or_threads=2)
    assert "RACE DETECTED" in text
    assert not close(run(m.spec, config, inputs), reference(m.spec, config, inputs))
    assert [i.kind for i in check_grid(m.spec.kernel, inputs, config)] == ["race"]


def test_race_reports_go_to_the_root_logger_under_warn(caplog):
    m, config, inputs = mutant("acc_across_parallel")
    with caplog.at_level(logging.WARNING):
        run(m.spec, config, inputs, detect_races=True, num_cores_or_threads=2, on_race="warn")
    races = [r for r in caplog.records if "RACE DETECTED" in r.getMessage()]
    assert races
    assert {r.name for r in races} == {"root"}


def test_output_revisit_raises_revisited_block():
    m, config, inputs = mutant("output_revisit")
    assert "RuntimeError: Revisited block" in error_text(m.spec, config, inputs)
    assert [i.kind for i in check_grid(m.spec.kernel, inputs, config)] == ["revisit"]


@pytest.mark.parametrize(
    ("name", "tol"),
    [
        ("rotated_index_map", F32_TOL),
        ("wrong_program_id", F32_TOL),
        ("bf16_long_k", BF16_TOL),
    ],
)
def test_plain_mismatches(name, tol):
    m, config, inputs = mutant(name)
    assert not close(run(m.spec, config, inputs), reference(m.spec, config, inputs), tol)
    assert check_grid(m.spec.kernel, inputs, config) == []


@pytest.mark.parametrize("name", ["missing_acc_init", "unmasked_ragged_reduction"])
def test_uninitialized_reads_differ_between_nan_and_zero_fill(name):
    m, config, inputs = mutant(name)
    nan_fill = run(m.spec, config, inputs, uninitialized_memory="nan")
    zero_fill = run(m.spec, config, inputs, uninitialized_memory="zero")
    assert np.isnan(nan_fill).any()
    assert not np.isnan(zero_fill).any()


def test_shifted_window_reads_out_of_bounds():
    m, config, inputs = mutant("shifted_window_oob")
    text = error_text(m.spec, config, inputs, out_of_bounds_reads="raise")
    assert "IndexError: Out-of-bounds read" in text


def test_input_mutation_is_static_only():
    m, config, inputs = mutant("input_mutation")
    before = [x.copy() for x in inputs]
    out = run(m.spec, config, inputs)
    assert close(out, reference(m.spec, config, inputs))
    assert all(np.array_equal(a, b) for a, b in zip(before, inputs, strict=True))
    (issue,) = check_grid(m.spec.kernel, inputs, config)
    assert issue.kind == "input_mutation"


@pytest.mark.parametrize("name", ["read_before_wait", "write_dma_dest_in_flight"])
def test_dma_ordering_shows_as_eager_vs_on_wait_and_as_a_race(name):
    m, config, inputs = mutant(name)
    eager = run(m.spec, config, inputs, dma_execution_mode="eager")
    on_wait = run(m.spec, config, inputs, dma_execution_mode="on_wait")
    assert not np.array_equal(eager, on_wait, equal_nan=True)
    assert "RACE DETECTED" in error_text(m.spec, config, inputs, detect_races=True)


def test_never_waited_dma_prints_semaphore_count_at_exit(capsys):
    m, config, inputs = mutant("never_wait")
    eager = run(m.spec, config, inputs, dma_execution_mode="eager")
    assert "has non-zero count for 0 (global core 0) at kernel exit" in capsys.readouterr().out
    assert close(eager, reference(m.spec, config, inputs))
    assert np.isnan(run(m.spec, config, inputs, dma_execution_mode="on_wait")).all()


def test_a_store_past_the_row_end_is_dropped_by_the_bare_hlo_interpreter_and_caught_by_its_backend():
    from pallas_verify.backends import registry
    from pallas_verify.case import Case

    m, config, inputs = mutant("row_norm_store_past_end")
    assert close(run(m.spec, config, inputs), reference(m.spec, config, inputs))  # the lane past the end vanishes
    outcome = registry.get("interpret").run(Case(spec=m.spec, config=config, inputs=inputs, backend="interpret",
                                                 mode={}, transform=None))
    assert outcome.error.type == "IndexError"
    assert outcome.error.message.startswith("Out-of-bounds masked store at ")
    assert "masks.py" in outcome.error.message and "(_row_norm_kernel)" in outcome.error.message
    assert "lie outside the ref of shape (4, 100) (the first at index (0, 100))" in outcome.error.message
    twin = registry.get("interpret").run(Case(spec=m.twin, config=config, inputs=inputs, backend="interpret",
                                              mode={}, transform=None))
    assert twin.error is None


@contextlib.contextmanager
def alarm(seconds: int):
    def expire(signum, frame):
        raise TimeoutError(f"case exceeded {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_deadlocked_semaphore_hangs_until_interrupted_and_leaves_state_usable():
    m, config, inputs = mutant("deadlock_semaphore")
    with alarm(1):
        text = error_text(m.spec, config, inputs)
    assert "TimeoutError: case exceeded 1 s" in text
    assert close(run(m.twin, config, inputs), reference(m.twin, config, inputs))


def _twin_modes(m: Mutant) -> list[dict]:
    """The default mode, the mode that exposes the mutant, and eager DMAs for DMA kernels."""
    modes = [{}, dict(m.exposed_by)] if m.exposed_by else [{}]
    return [*modes, {"dma_execution_mode": "eager"}] if "dma" in m.twin.features else modes


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_twin_is_clean(name, capsys):
    m = MUTANTS[name]
    config, inputs = example(m.twin)
    tol = BF16_TOL if "bf16" in m.twin.features else F16_TOL if "f16" in m.twin.features else F32_TOL
    expected = reference(m.twin, config, inputs)
    for mode in _twin_modes(m):
        assert close(run(m.twin, config, inputs, **mode), expected, tol), mode
    assert capsys.readouterr().out == ""
    assert check_grid(m.twin.kernel, inputs, config) == []


# The backward mutants' forward is correct: their raw signal is the gradient, taken the
# way verify takes it (pallas_verify.transforms under "grad" on the extended inputs).
BACKWARD = sorted(m.name for m in backward.MUTANTS)


def grad_inputs(spec, config, inputs) -> tuple:
    """Primals, one seed-0 normal cotangent per float output, then the primal layout."""
    outs = jax.tree.leaves(jax.eval_shape(functools.partial(spec.reference, **config), *inputs))
    rng = np.random.default_rng(0)
    cotangents = tuple(rng.standard_normal(o.shape).astype(o.dtype) for o in outs)
    return (*inputs, *cotangents, np.arange(len(inputs), dtype=np.int32))


def grads(spec, config, extended) -> list[np.ndarray]:
    """The kernel's VJP on the HLO interpreter (the bug is in the math, not the memory)."""
    fn = transforms.rule("grad").wrap(functools.partial(spec.kernel, **config))
    with pltpu.force_tpu_interpret_mode(True):
        return [np.asarray(g) for g in jax.jit(fn)(*extended)]


@pytest.mark.parametrize("name", BACKWARD)
def test_backward_mutant_forward_is_right_and_its_gradient_wrong(name):
    m, config, inputs = mutant(name)
    assert close(run(m.spec, config, inputs), reference(m.spec, config, inputs), (1e-4, 1e-4))
    extended = grad_inputs(m.spec, config, inputs)
    expected, _ = transforms.expected_outputs(m.spec, config, extended, "grad")
    got = grads(m.spec, config, extended)
    assert any(not close(g, e, (1e-3, 1e-3)) for g, e in zip(got, expected, strict=True))
    twin = grads(m.twin, config, extended)
    assert all(close(g, e, (1e-3, 1e-3)) for g, e in zip(twin, expected, strict=True))
