"""Compiler parameters drawn per example: Mosaic GPU kernels' own, and overrides of a Mosaic
TPU kernel's that a compile backend applies.

``mosaic_gpu_compiler_params`` draws the ``plgpu.CompilerParams`` fields that change what a
``plgpu.kernel`` does, as a JSON-able dict of keyword arguments (``plgpu.CompilerParams
(**drawn)``): ``approx_math`` (approximate exp, tanh, rsqrt, sin, cos on a GPU),
``unsafe_no_auto_barriers`` (no automatic barriers around a thread's shared-memory loads
and stores: the kernel must then never read and write one region from one thread),
``max_concurrent_steps`` and ``dimension_semantics`` (the pipelining and grid order of a
Mosaic GPU ``pallas_call`` grid). Fields that only profile or describe the deployment
(``profile_*``, ``is_multi_process``, ``skip_device_barrier``, ``lowering_semantics``,
``reduction_scratch_bytes``) keep the kernel's own values.

``mosaic_tpu_compiler_overrides`` draws, over a Mosaic TPU kernel's own
``pltpu.CompilerParams``, the fields that change what is compiled or what is legal
(``TPU_OVERRIDE_FIELDS``): the VMEM limit around the chip's VMEM, input fusion, the
transposed-LHS matmul fusion, the runtime bounds checks and the side-effect type. The
``mosaic_tpu:<chip>`` backends apply them to the unmodified kernel.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Sequence
from typing import Any, get_args

from hypothesis import strategies as st

from strategies._validation import check_bool, check_choices, check_int

__all__ = ["GPU_DIMENSION_SEMANTICS", "TPU_OVERRIDE_FIELDS", "mosaic_gpu_compiler_params",
           "mosaic_tpu_compiler_overrides", "tpu_field_choices", "vmem_limits"]


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


#: The ``pltpu.CompilerParams`` fields ``mosaic_tpu_compiler_overrides`` draws: each changes
#: what Mosaic compiles (input fusion, the transposed-LHS matmul, bounds checks), what XLA
#: may do with the call (side effects: merge or drop it) or what is legal (the VMEM limit).
TPU_OVERRIDE_FIELDS: tuple[str, ...] = (
    "vmem_limit_bytes", "allow_input_fusion", "fuse_transposed_lhs_in_matmul", "disable_bounds_checks",
    "has_side_effects",
)
_MIB = 1 << 20


def vmem_limits(vmem_bytes: int) -> tuple[int, ...]:
    """VMEM limits around a chip's VMEM of ``vmem_bytes``: at it first, then a MiB below and
    above it, then halvings down to 1 MiB (where a kernel's need is bracketed), then twice it.
    """
    check_int("vmem_limits", "vmem_bytes", vmem_bytes, min_value=2 * _MIB)
    halvings = []
    size = vmem_bytes // 2
    while size >= _MIB:
        halvings.append(size)
        size //= 2
    return (vmem_bytes, vmem_bytes - _MIB, vmem_bytes + _MIB, *halvings, 2 * vmem_bytes)


def _tpu_params_class() -> type:
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.CompilerParams


def tpu_field_choices(field: str) -> tuple[Any, ...]:
    """The values drawn for a bool-or-enum field of ``pltpu.CompilerParams``, read from its
    type: ``(False, True)`` for a bool, the enum's values (plain strings) for an enum, both
    for a union (``has_side_effects: bool | SideEffectType``); the upstream default first."""
    cls = _tpu_params_class()
    hint = typing.get_type_hints(cls)[field]
    values: list[Any] = []
    for part in get_args(hint) or (hint,):
        if part is bool:
            values += [False, True]
        elif isinstance(part, type) and issubclass(part, enum.Enum):
            values += [member.value for member in part]
        elif get_args(part) and all(a is bool or a is Ellipsis for a in get_args(part)):  # tuple[bool, ...]
            values += [False, True]
    default = next(f.default for f in _dataclass_fields(cls) if f.name == field)
    default = getattr(default, "value", default)
    if default in values:
        values.remove(default)
        values.insert(0, default)
    return tuple(values)


def _dataclass_fields(cls: type) -> Sequence[Any]:
    import dataclasses

    return dataclasses.fields(cls)


def mosaic_tpu_compiler_overrides(
    *, vmem_bytes: int, fields: Sequence[str] = TPU_OVERRIDE_FIELDS
) -> st.SearchStrategy[dict[str, Any]]:
    """Overrides of a kernel's own ``pltpu.CompilerParams``, as a JSON-able dict: each of
    ``fields`` either absent (the kernel keeps its own value) or drawn:

    - ``vmem_limit_bytes``: one of ``vmem_limits(vmem_bytes)`` (``vmem_bytes``: the chip's
      VMEM per core), at, just below and above the chip's VMEM, halvings of it, twice it;
    - ``allow_input_fusion``: a bool for every operand of every call;
    - ``fuse_transposed_lhs_in_matmul``, ``disable_bounds_checks``: bools;
    - ``has_side_effects``: ``False``, ``True`` or a ``pltpu.SideEffectType`` value
      (``"pure"``, ``"dataflow_side_effecting"``, ``"side_effecting"``).

    Choices are read from ``pltpu.CompilerParams``'s field types, so a new side-effect type
    upstream is drawn without a change here. Shrinks toward no override at all (the kernel
    as its author compiles it), then each field's upstream default.

    Example: ``mosaic_tpu_compiler_overrides(vmem_bytes=128 << 20)`` draws
    {"vmem_limit_bytes": 16777216, "has_side_effects": "side_effecting"}.
    """
    where = "mosaic_tpu_compiler_overrides"
    check_int(where, "vmem_bytes", vmem_bytes, min_value=2 * _MIB)
    fields = check_choices(where, "fields", fields, TPU_OVERRIDE_FIELDS)
    draws = {field: (st.sampled_from(vmem_limits(vmem_bytes)) if field == "vmem_limit_bytes"
                     else st.sampled_from(tpu_field_choices(field))) for field in fields}
    return st.fixed_dictionaries({}, optional=draws)
