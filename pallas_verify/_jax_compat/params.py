"""Mosaic TPU compiler params of the kernels in a traced function (JAX 0.12 internals):
what each ``pallas_call`` declares and does that outlives it, and the same function with
its params overridden or its kernels named.

An unmodified kernel (its author passes its own ``compiler_params=``) is given other
params from the outside by rewriting the ``compiler_params`` param of its ``pallas_call``
equations in the traced jaxpr (every call-like body, loop and branch included) and
evaluating the rewritten jaxpr: what the Mosaic lowering then reads is the override, as
if the author had written it. Kernels over a mesh (``pl.kernel``, ``core_map``) keep
theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from pallas_verify._jax_compat.versions import tpu_info_modules

__all__ = [
    "SIDE_EFFECTS",
    "SIDE_EFFECT_DROPPED",
    "MosaicCall",
    "count_calls",
    "evaluator",
    "mosaic_calls",
    "tagged",
    "tpu_vmem_bytes",
    "with_compiler_params",
]

#: ``has_side_effects`` as pallas-verify writes it (JSON-able): the values of
#: ``pltpu.SideEffectType`` (``True`` means "side_effecting", ``False`` "pure").
SIDE_EFFECTS = ("pure", "dataflow_side_effecting", "side_effecting")

#: ``ErrorInfo.type`` of a compile in which a kernel with side effects ran fewer times than
#: it was called (``backends.mosaic_params``): the oracles make it a ``side_effect`` finding.
SIDE_EFFECT_DROPPED = "SideEffectDropped"

# Name prefix given to every pallas_call by ``tagged``: a name scope around the call, which
# XLA names the compiled program's custom call after ("%pv_kernel_0.3 = ... custom-call").
TAG = "pv_kernel_"
# The key of ``_rewrite``'s changes that names such a scope instead of a param.
_SCOPE = "__name_scope__"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MosaicCall:
    """One Mosaic TPU ``pallas_call`` of a traced function.

    Attributes:
      index: its position among the function's Mosaic TPU pallas_calls (``tagged`` order).
      name: the kernel function's name.
      declared: the kernel's own ``pltpu.CompilerParams`` fields that differ from the
        upstream defaults, as plain data (``has_side_effects`` as one of ``SIDE_EFFECTS``).
      side_effects: what the kernel body does that outlives the call, one line each
        (``"pltpu.trace_value at kernel.py:12"``): debug prints and callbacks, profiler
        values, host callbacks. Reads and writes of its own refs and semaphores are not.
      operands: operands of the call (what ``allow_input_fusion`` has one entry per).
      inside_jit: whether the call sits inside a ``jax.jit`` of the traced function.
    """

    index: int
    name: str
    declared: Mapping[str, Any]
    side_effects: tuple[str, ...]
    operands: int
    inside_jit: bool = False

    @property
    def side_effect_type(self) -> str:
        """``has_side_effects`` as the kernel declares it, one of ``SIDE_EFFECTS``."""
        return str(self.declared.get("has_side_effects", "pure"))


def tpu_vmem_bytes(device_kind: str) -> int:
    """The VMEM of one TensorCore of the TPU of ``device_kind`` (``"TPU v5 lite"``), bytes,
    as jax's own chip table (``pltpu.get_tpu_info``) gives it."""
    tpu_info = tpu_info_modules()[0]
    version = tpu_info.chip_version_from_device_kind(device_kind)
    if version is None:
        raise ValueError(f"device_kind={device_kind!r} is not a TPU chip this jax knows (pltpu.get_tpu_info has no "
                         "entry for it): correct the chip's device_kind in backends/families.py TPU_CHIPS, or "
                         "use a jax whose chip table has it.")
    return tpu_info.get_tpu_info_for_chip(version, 1).vmem_capacity_bytes


def mosaic_calls(closed: Any) -> list[MosaicCall]:
    """Every Mosaic TPU ``pallas_call`` of a traced function (a ClosedJaxpr), in ``tagged`` order."""
    found: list[MosaicCall] = []
    _rewrite(closed, lambda eqn, inside_jit: found.append(_read(len(found), eqn, inside_jit)), with_jit=True)
    return found


def with_compiler_params(closed: Any, overrides: Mapping[str, Any]) -> Any:
    """``closed`` with ``overrides`` (plain data, see ``SIDE_EFFECTS``; ``allow_input_fusion``
    a bool for every operand) replacing those fields of every Mosaic TPU pallas_call's
    ``pltpu.CompilerParams`` (upstream defaults where the kernel passes none)."""
    from jax.experimental.pallas import tpu as pltpu

    def override(eqn: Any) -> dict[str, Any]:
        params = eqn.params.get("compiler_params") or pltpu.CompilerParams()
        return {"compiler_params": params.replace(**_upstream(overrides, len(eqn.invars)))}

    return _rewrite(closed, override)


def tagged(closed: Any) -> Any:
    """``closed`` with each Mosaic TPU pallas_call in a name scope ``pv_kernel_<index>``: the
    compiled program's custom calls carry the name (``count_calls``)."""
    count = [0]

    def name(eqn: Any) -> dict[str, Any]:
        count[0] += 1
        return {_SCOPE: f"{TAG}{count[0] - 1}"}

    return _rewrite(closed, name)


def count_calls(hlo_text: str) -> dict[int, int]:
    """How many custom calls of each ``tagged`` kernel a compiled program's HLO text holds
    (one fused with its producers, under ``allow_input_fusion``, counts once)."""
    import re

    counts: dict[int, int] = {}
    scope = re.compile(rf"op_name=\"[^\"]*/{TAG}(\d+)/")
    for line in hlo_text.splitlines():
        if 'custom_call_target="tpu_custom_call"' in line and (match := scope.search(line)):
            counts[int(match.group(1))] = counts.get(int(match.group(1)), 0) + 1
    return counts


def evaluator(closed: Any) -> Callable[..., Any]:
    """A function of the traced function's flat arguments that runs ``closed`` (its flat outputs)."""
    import jax.extend as jex

    return jex.core.jaxpr_as_fun(closed)


def _upstream(overrides: Mapping[str, Any], operands: int) -> dict[str, Any]:
    from jax.experimental.pallas import tpu as pltpu

    values = dict(overrides)
    if isinstance(values.get("has_side_effects"), str):
        values["has_side_effects"] = pltpu.SideEffectType(values["has_side_effects"])
    if "allow_input_fusion" in values:
        values["allow_input_fusion"] = (bool(values["allow_input_fusion"]),) * operands
    return values


def _is_mosaic_tpu_call(eqn: Any) -> bool:
    from pallas_verify._jax_compat.tracing import kernel_site

    return eqn.primitive.name == "pallas_call" and kernel_site(eqn) in ("default", "mosaic_tpu")


def _rewrite(closed: Any, change: Callable[..., Mapping[str, Any] | None], *, with_jit: bool = False) -> Any:
    """``closed`` with ``change(eqn)`` (new params, or None to keep them) applied to every
    Mosaic TPU pallas_call, in program order, bodies of call-like equations included
    (``with_jit``: ``change(eqn, inside_jit)``)."""
    import jax.extend as jex

    def walk(jaxpr: Any, inside_jit: bool = False) -> Any:
        eqns = []
        for eqn in jaxpr.eqns:
            if _is_mosaic_tpu_call(eqn):
                new = dict((change(eqn, inside_jit) if with_jit else change(eqn)) or {})
                scope = new.pop(_SCOPE, None)
                source = eqn.source_info if scope is None else eqn.source_info.replace(
                    name_stack=eqn.source_info.name_stack.extend(scope))
                eqns.append(eqn.replace(params={**eqn.params, **new}, source_info=source))
                continue
            params = {}
            jit = inside_jit or eqn.primitive.name in ("pjit", "jit")
            for key, value in eqn.params.items():
                if isinstance(value, jex.core.Jaxpr):
                    params[key] = walk(value, jit)
                elif isinstance(value, tuple) and value and all(isinstance(v, jex.core.Jaxpr) for v in value):
                    params[key] = tuple(walk(v, jit) for v in value)
            eqns.append(eqn.replace(params={**eqn.params, **params}) if params else eqn)
        return jaxpr.replace(eqns=eqns)

    return walk(closed)


def _read(index: int, eqn: Any, inside_jit: bool) -> MosaicCall:
    from jax.experimental.pallas import tpu as pltpu

    from pallas_verify._jax_compat.tracing import call_name

    params = eqn.params.get("compiler_params") or pltpu.CompilerParams()
    defaults = pltpu.CompilerParams()
    declared = {}
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        if value != getattr(defaults, field.name):
            declared[field.name] = _plain(value)
    if "has_side_effects" in declared:
        declared["has_side_effects"] = _side_effect_type(params.has_side_effects)
    return MosaicCall(index=index, name=call_name(eqn), declared=declared,
                        side_effects=tuple(_escaping(eqn.params["jaxpr"])), operands=len(eqn.invars),
                        inside_jit=inside_jit)


def _side_effect_type(value: Any) -> str:
    if isinstance(value, bool):
        return "side_effecting" if value else "pure"
    return str(getattr(value, "value", value))


def _plain(value: Any) -> Any:
    value = getattr(value, "value", value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)


def _escaping_effect_types() -> dict[type, str]:
    """Effects of a kernel body that outlive the call, and what a kernel author calls them."""
    from jax._src import callback, debugging
    from jax._src.pallas.mosaic import primitives as tpu_primitives

    return {debugging.DebugEffect: "a debug print or callback", debugging.OrderedDebugEffect: "a debug print or callback",
            callback.IOEffect: "a host callback", callback.OrderedIOEffect: "a host callback",
            tpu_primitives.TraceEffect: "pltpu.trace_value"}


def _escaping(body: Any) -> list[str]:
    """One line per operation of a kernel body whose effect outlives the call."""
    from jax._src import source_info_util

    from pallas_verify._jax_compat.tracing import equations, sub_jaxprs

    kinds = _escaping_effect_types()
    lines = []
    for eqn in equations(body):
        if next(sub_jaxprs(eqn), None) is not None:  # a loop or branch: its body's equations say it
            continue
        names = sorted({kinds[type(e)] for e in eqn.effects if type(e) in kinds})
        for name in names:
            lines.append(f"{name} ({eqn.primitive.name}) at {source_info_util.summarize(eqn.source_info)}")
    return lines
