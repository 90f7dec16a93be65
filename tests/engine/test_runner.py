"""Runner.check on tiny in-process specs: verdicts, the reference computed once per
example and shared by backends, a reference that raises, and cells a backend cannot run."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv
from pallas_verify.backends import registry
from pallas_verify.errors import InvalidArgument
from pallas_verify.runner import Runner, Unsupported

N, BLOCK = 256, 128


def _add(x_ref, o_ref, *, bump):
    o_ref[...] = x_ref[...] + 1.0 + bump


def _kernel(bump: float):
    def kernel(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: _add(x_ref, o_ref, bump=bump),
            grid=(x.shape[0] // BLOCK,),
            in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
            out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x)

    return kernel


class CountingReference:
    """x + 1, counting how often it runs (a host callback fires on every run, traced or
    cached by jit alike; a cached reference does not run again)."""

    def __init__(self, fails: bool = False) -> None:
        self.calls = 0
        self.fails = fails

    def _tick(self) -> None:
        self.calls += 1

    def __call__(self, x):
        if self.fails:
            raise ValueError("the reference takes no such input")
        jax.debug.callback(self._tick)
        return x + 1.0


def _spec(*, bump: float = 0.0, reference: CountingReference | None = None) -> pv.KernelSpec:
    """Built in a function: a module-level KernelSpec would be collected as a test."""
    return pv.KernelSpec(name="add_one" if not bump else "add_one_wrong", kernel=_kernel(bump),
                         reference=reference or CountingReference(), configs=st.just({}),
                         inputs=lambda config: st.just((np.zeros(N, np.float32),)))


def _x(seed: int = 0) -> tuple[np.ndarray, ...]:
    return (np.random.default_rng(seed).standard_normal(N).astype(np.float32),)


INTERPRET = registry.get("interpret")


def test_a_correct_kernel_has_no_finding_and_a_wrong_one_a_mismatch():
    with Runner(_spec(), isolate="never") as runner:
        assert runner.check({}, _x(), INTERPRET, {}) == []
    with Runner(_spec(bump=0.5), isolate="never") as runner:
        [finding] = runner.check({}, _x(), INTERPRET, {})
    assert (finding.kind, finding.kernel, finding.backend) == ("mismatch", "add_one_wrong", "interpret")
    assert "outputs differ from the reference" in finding.message


def test_the_reference_runs_once_per_example_whatever_the_backends_and_repeats():
    reference = CountingReference()
    # No reruns: TPU interpret mode's shape rerun asks the reference of another example
    # (the inputs grown twice as long), which is not what is counted here.
    with Runner(_spec(reference=reference), isolate="never", metamorphic=False) as runner:
        assert runner.check({}, _x(0), INTERPRET, {}) == []
        once = reference.calls
        assert once >= 1
        assert runner.check({}, _x(0), INTERPRET, {}) == []
        assert runner.check({}, _x(0), registry.get("tpu_interpret"), {}) == []
        assert reference.calls == once
        assert runner.check({}, _x(1), INTERPRET, {}) == []  # another example: computed for it
        assert reference.calls == 2 * once


def test_the_reference_cache_is_bounded_and_forgets_the_oldest_example():
    reference = CountingReference()
    with Runner(_spec(reference=reference), isolate="never", cache_size=1) as runner:
        runner.check({}, _x(0), INTERPRET, {})
        once = reference.calls
        runner.check({}, _x(1), INTERPRET, {})
        runner.check({}, _x(1), INTERPRET, {})
        assert reference.calls == 2 * once  # example 1 was still cached
        runner.check({}, _x(0), INTERPRET, {})
        assert reference.calls == 3 * once  # example 0 had been evicted


def test_a_reference_that_raises_is_a_finding_of_the_reference_not_of_the_kernel():
    with Runner(_spec(reference=CountingReference(fails=True)), isolate="never") as runner:
        [finding] = runner.check({}, _x(), INTERPRET, {})
    assert (finding.kind, finding.kernel, finding.backend) == ("exception", "add_one", "reference")
    assert "the reference raised ValueError: the reference takes no such input" in finding.message


def test_a_known_upstream_limitation_is_unsupported_never_a_finding():
    # GPU interpret mode runs pallas_call only with whole-array blocks; this kernel tiles.
    with Runner(_spec(), isolate="never") as runner, pytest.raises(Unsupported, match="whole-array blocks"):
        runner.check({}, _x(), registry.get("gpu_interpret"), {})


def test_isolate_is_checked_and_always_needs_a_module_level_spec():
    with pytest.raises(InvalidArgument, match=r"isolate='sometimes' must be one of \('auto', 'always', 'never'\)"):
        Runner(_spec(), isolate="sometimes")
    with pytest.raises(InvalidArgument, match="isolate='always' needs KernelSpec 'add_one' at module level"):
        Runner(_spec(), isolate="always")
