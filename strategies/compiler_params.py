"""Compiler parameters of Mosaic GPU kernels, drawn per example.

``mosaic_gpu_compiler_params`` draws the ``plgpu.CompilerParams`` fields that change what a
``plgpu.kernel`` does, as a JSON-able dict of keyword arguments (``plgpu.CompilerParams
(**drawn)``): ``approx_math`` (approximate exp, tanh, rsqrt, sin, cos on a GPU),
``unsafe_no_auto_barriers`` (no automatic barriers around a thread's shared-memory loads
and stores: the kernel must then never read and write one region from one thread),
``max_concurrent_steps`` and ``dimension_semantics`` (the pipelining and grid order of a
Mosaic GPU ``pallas_call`` grid). Fields that only profile or describe the deployment
(``profile_*``, ``is_multi_process``, ``skip_device_barrier``, ``lowering_semantics``,
``reduction_scratch_bytes``) keep the kernel's own values.
"""

from __future__ import annotations

import typing
from typing import Any, get_args

from hypothesis import strategies as st

from strategies._validation import check_bool, check_int

__all__ = ["GPU_DIMENSION_SEMANTICS", "mosaic_gpu_compiler_params"]


def _gpu_semantics() -> tuple[str, ...]:
    from jax.experimental.pallas import mosaic_gpu as plgpu

    hint = typing.get_type_hints(plgpu.CompilerParams)["dimension_semantics"]
    literal = next(a for a in get_args(hint) if get_args(a))  # Sequence[Literal[...]] | None
    return tuple(get_args(get_args(literal)[0]))


#: The Mosaic GPU dimension semantics of jax 0.12 (``plgpu.CompilerParams``'s type, which
#: the draws read; tests/strategies/test_compiler_params.py holds the two equal).
GPU_DIMENSION_SEMANTICS: tuple[str, ...] = ("parallel", "sequential")


def mosaic_gpu_compiler_params(
    *,
    grid_rank: int = 0,
    max_concurrent_steps: int = 4,
    unsafe_no_auto_barriers: bool | None = None,
    approx_math: bool | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """``plgpu.CompilerParams`` keyword arguments: ``approx_math`` and
    ``unsafe_no_auto_barriers`` (drawn; a bool pins one), ``max_concurrent_steps`` in
    1..max_concurrent_steps, and ``dimension_semantics`` (one per grid axis; absent for
    ``grid_rank=0``).

    Shrinks toward the upstream defaults: no approximate math, automatic barriers on, one
    step in flight, every axis "parallel" (the first choice of the Literal).

    Example: ``mosaic_gpu_compiler_params(grid_rank=1)`` draws {"approx_math": True,
    "unsafe_no_auto_barriers": False, "max_concurrent_steps": 3,
    "dimension_semantics": ("sequential",)}.
    """
    where = "mosaic_gpu_compiler_params"
    check_int(where, "grid_rank", grid_rank, min_value=0)
    check_int(where, "max_concurrent_steps", max_concurrent_steps, min_value=1)
    flags = {}
    for name, value in (("approx_math", approx_math), ("unsafe_no_auto_barriers", unsafe_no_auto_barriers)):
        flags[name] = st.booleans() if value is None else st.just(check_bool(where, name, value))
    draws = {**flags, "max_concurrent_steps": st.integers(1, max_concurrent_steps)}
    if grid_rank:
        draws["dimension_semantics"] = st.tuples(*[st.sampled_from(_gpu_semantics())] * grid_rank)
    return st.fixed_dictionaries(draws)
