"""JAX drops a has_side_effects=True kernel that sits inside a jax.jit when its result is
unused (reference_kernels/upstream/tpu_side_effects.py, plain JAX); the mosaic_tpu
backends attribute that drop to JAX. Once this test fails, JAX keeps such a kernel and the
attribution in backends/mosaic_params.py can go."""

from __future__ import annotations

from reference_kernels.upstream import tpu_side_effects


def test_a_bare_side_effecting_kernel_is_lowered_with_its_result_unused():
    assert tpu_side_effects.custom_calls_when_unused(inside_jit=False) == 1


def test_inside_a_jit_jax_still_drops_it():
    assert tpu_side_effects.custom_calls_when_unused(inside_jit=True) == 0, (
        "JAX now lowers a side-effecting kernel inside a jit with its result unused: update "
        "docs/upstream-findings.md section 17 and the message of backends/mosaic_params._lost")
