"""Compiler params on the ``mosaic_tpu:<chip>`` backends: overrides drawn per example over a
kernel's own ``pltpu.CompilerParams``, and the check that a kernel with side effects runs
as often as it is called.

Overrides (``strategies.mosaic_tpu_compiler_overrides``, mode key ``compiler_params``)
are applied to the unmodified kernel by rewriting its ``pallas_call`` equations
(``_jax_compat.with_compiler_params``). The kernel is first compiled with its own params,
as on every compile backend; then under the override. Whose each outcome is:

- its own params do not compile: the kernel's ``compile_error``; when it runs out of VMEM
  the message says which limit applied (the ``vmem_limit_bytes`` it declares, or the
  chip's default scoped limit) and the chip's VMEM.
- the override compiles: recorded (``Outcome.compiler_params``), nothing to report.
- the override runs out of VMEM while its own params compile: the drawn limit (or the
  fusion drawn with it) is below what the kernel needs, which the author never asked
  for: not a finding, recorded as ``vmem_exceeded``; the report's ``compiler_params``
  figure brackets the kernel's VMEM need from these.
- the override fails otherwise: the compiler rejects a documented value of a field on a
  kernel it compiles with the author's own: JAX's, recorded as ``rejected`` with the
  error and ``fault: "jax"``; the cell does not fail for it.

Side effects (``has_side_effects``): a kernel whose body does something that outlives
the call (a debug print or callback, ``pltpu.trace_value``, a host callback), or that
declares side effects, is compiled in a program that calls it three times on the same
inputs (two results used, one unused); the compiled HLO's custom calls are counted per
kernel (``_jax_compat.count_calls``). Declared ``side_effecting`` (or ``True``) must run
three times, ``dataflow_side_effecting`` twice (it may be dropped when unused), and a
kernel with such effects that declares none is expected three times too: XLA merges
calls it believes pure (CSE) and drops unused ones (DCE), so its effect would happen
once. Fewer is the kernel's ``side_effect`` finding when it declares no side effects,
and JAX's (recorded, ``fault: "jax"``) when it declares them. A drawn override that
declares side effects is held to the same counts (JAX's when it fails).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from pallas_verify import _jax_compat
from pallas_verify.backends.lowering import compile_case, read_traced
from pallas_verify.case import Case, ErrorInfo, Outcome

__all__ = ["ParamsCoverage", "compile_with_params", "modes"]

# How many of the three calls of the side-effect program each declared type must keep.
_KEPT = {"pure": 3, "side_effecting": 3, "dataflow_side_effecting": 2}
_MIB = 1 << 20


def modes(device_kind: str) -> st.SearchStrategy[Mapping[str, Any]]:
    """``{"compiler_params": overrides}`` for a chip (``{}``: the kernel's own params)."""
    from strategies import mosaic_tpu_compiler_overrides

    vmem = _jax_compat.tpu_vmem_bytes(device_kind)
    return mosaic_tpu_compiler_overrides(vmem_bytes=vmem).map(lambda drawn: {"compiler_params": drawn} if drawn else {})


def compile_with_params(case: Case, base: Outcome, *, target: str, device_kind: str, key: Any) -> Outcome:
    """The outcome of ``case`` on ``mosaic_tpu:<target>`` given ``base``, its compile with the
    kernel's own params: checked for side effects and under the mode's overrides (module
    docstring). ``key`` names the case's compile (kernel, config, shapes, transform,
    backend): what is compiled here is cached under it."""
    compiler = _Compiler(case=case, target=target, key=key)
    kernels = compiler.kernels()
    if not base.ok:
        return _with_vmem_context(base, kernels, target, device_kind)
    own = _side_effect_check(compiler, {}, kernels)
    if own is not None and own[0] == "kernel":
        return dataclasses.replace(base, error=ErrorInfo(type=_jax_compat.SIDE_EFFECT_DROPPED, message=own[2]))
    records = [] if own is None else [{"override": {}, "result": own[1], "fault": "jax", "error": own[2]}]
    overrides = dict(case.mode.get("compiler_params") or {})
    if overrides:
        records.append(_overridden(compiler, overrides, kernels))
    if not records:
        return base
    return dataclasses.replace(base, compiler_params={"records": records})


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Compiler:
    """Compiles programs made of one case's traced function for one chip, cached."""

    case: Case
    target: str
    key: Any

    def kernels(self) -> list[Any]:
        """The function's Mosaic TPU pallas_calls as traced for the chip (``MosaicCall``)."""
        found = _cached((self.key, "kernels"), lambda: read_traced(
            self.case, family="mosaic_tpu", target=self.target, read=_jax_compat.mosaic_calls))
        return list(found or [])

    def compile(self, overrides: Mapping[str, Any], times: int) -> tuple[Outcome, dict[int, int] | None]:
        """The compile of ``_calls(overrides, times)`` and its custom calls per kernel."""
        def make() -> tuple[Outcome, dict[int, int] | None]:
            outcome, compiled = compile_case(self.case, family="mosaic_tpu", target=self.target,
                                             program=_calls(overrides, times))
            return outcome, None if compiled is None else _jax_compat.count_calls(compiled.as_text())

        return _cached((self.key, times, _frozen(overrides)), make)


# Compiles of programs made by this module, least recently used evicted first.
_CACHE: collections.OrderedDict[Any, Any] = collections.OrderedDict()
_CACHE_SIZE = 512


def _cached(key: Any, make: Callable[[], Any]) -> Any:
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = _CACHE[key] = make()
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def _overridden(compiler: _Compiler, overrides: dict[str, Any], kernels: list[Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"override": overrides}
    outcome, _ = compiler.compile(overrides, 1)
    if outcome.error is not None:
        error = outcome.error.summary()[:600]
        if _jax_compat.vmem_exhausted(outcome.error):
            return {**record, "result": "vmem_exceeded", "error": error}
        return {**record, "result": "rejected", "fault": "jax", "error": error}
    if overrides.get("has_side_effects") not in (None, False, "pure"):
        drawn = [dataclasses.replace(k, declared={**k.declared, "has_side_effects": _declared(overrides)})
                 for k in kernels]
        lost = _side_effect_check(compiler, overrides, drawn)
        if lost is not None:
            return {**record, "result": lost[1], "fault": "jax", "error": lost[2]}
    return {**record, "result": "compiled"}


def _declared(overrides: Mapping[str, Any]) -> str:
    value = overrides["has_side_effects"]
    return ("side_effecting" if value else "pure") if isinstance(value, bool) else str(value)


def _side_effect_check(compiler: _Compiler, overrides: dict[str, Any],
                       kernels: list[Any]) -> tuple[str, str, str] | None:
    """``(fault, result, message)`` when a kernel with side effects runs fewer times than the
    side-effect program calls it: fault ``"kernel"`` when it declares none, ``"jax"`` when
    it does; result ``"merged"`` (two used calls became one) or ``"dropped"`` (the unused
    call is gone)."""
    watched = [k for k in kernels if k.side_effects or k.side_effect_type != "pure"]
    if not watched:
        return None
    _, single = compiler.compile(overrides, 1)
    _, triple = compiler.compile(overrides, 3)
    if single is None or triple is None:
        return None  # the compile itself is judged elsewhere
    for kernel in watched:
        per_call = single.get(kernel.index, 0)
        kept = _KEPT.get(kernel.side_effect_type, 3)
        ran = triple.get(kernel.index, 0)
        if per_call and ran < kept * per_call:
            return _lost(kernel, ran, per_call, kept)
    return None


def _lost(kernel: Any, ran: int, per_call: int, kept: int) -> tuple[str, str, str]:
    what = "; ".join(kernel.side_effects) or "none the body shows"
    result = "merged" if ran < 2 * per_call else "dropped"
    how = ("XLA merged the two calls whose results are used into one" if result == "merged" else
           "the call whose results are unused was dropped")
    ran_text = (f"called three times on the same inputs inside one jit (two results used, one unused), the compiled "
                f"program runs it {ran} time(s) where {kept * per_call} are needed: {how}")
    if kernel.side_effect_type == "pure":
        return "kernel", result, (
            f"kernel {kernel.name!r} has side effects XLA cannot see ({what}) but its pltpu.CompilerParams leave "
            f"has_side_effects=False: {ran_text}, so its side effect happens fewer times than the program asks. "
            "Set pltpu.CompilerParams(has_side_effects=True) on its pallas_call.")
    where = (" Its pallas_call sits inside a jax.jit, whose dead-code elimination drops the whole jit call when no "
             "result is used without looking at has_side_effects (JAX 0.12; docs/upstream-findings.md, section 17)."
             if result == "dropped" and kernel.inside_jit else "")
    return "jax", result, (f"kernel {kernel.name!r} declares has_side_effects={kernel.side_effect_type!r} "
                           f"(effects: {what}), yet {ran_text}: JAX or XLA did not honour the declaration.{where}")


def _calls(overrides: Mapping[str, Any], times: int) -> Callable[[Any], Callable[..., Any]]:
    """A program: the traced function, its kernels named and given ``overrides``, called
    ``times`` times on the same arguments (every result kept but the third call's)."""

    def program(closed: Any) -> Callable[..., Any]:
        rewritten = _jax_compat.with_compiler_params(closed, overrides) if overrides else closed
        run = _jax_compat.evaluator(_jax_compat.tagged(rewritten))
        if times == 1:
            return run

        def called(*xs: Any) -> tuple[Any, ...]:
            results = [run(*xs) for _ in range(times)]
            return tuple(leaf for result in results[:2] for leaf in result)

        return called

    return program


def _frozen(overrides: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(overrides.items()))


def _with_vmem_context(base: Outcome, kernels: list[Any], target: str, device_kind: str) -> Outcome:
    """``base``'s compile error, when it is a VMEM overflow, with the limit that applied."""
    if not _jax_compat.vmem_exhausted(base.error):
        return base
    assert base.error is not None
    declared = sorted({k.declared["vmem_limit_bytes"] for k in kernels if "vmem_limit_bytes" in k.declared})
    vmem = _jax_compat.tpu_vmem_bytes(device_kind)
    limit = (f"the kernel declares vmem_limit_bytes={', '.join(str(d) for d in declared)}" if declared else
             "the kernel declares no vmem_limit_bytes, so the chip's default scoped VMEM limit applies")
    context = (f"The kernel does not fit in VMEM on {target}: {limit}; {target} has {vmem // _MIB} MiB of VMEM per "
               "core. Use smaller blocks or fewer buffers, or declare a vmem_limit_bytes it fits in (at most the "
               "chip's VMEM).")
    error = dataclasses.replace(base.error, message=f"{context}\n{base.error.message}")
    return dataclasses.replace(base, error=error)


@dataclasses.dataclass
class ParamsCoverage:
    """What the drawn compiler-param overrides of one search did (its ``mosaic_tpu`` cell).

    Attributes:
      examples: examples whose outcome carried a record.
      results: how many overrides ended each way (``compiled``, ``vmem_exceeded``,
        ``rejected``, ``merged``).
    """

    examples: int = 0
    results: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    _fields: set[str] = dataclasses.field(default_factory=set, repr=False)
    _fits: set[int] = dataclasses.field(default_factory=set, repr=False)
    _exceeds: set[int] = dataclasses.field(default_factory=set, repr=False)
    _jax: list[dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)

    def add(self, figure: Mapping[str, Any] | None) -> None:
        if not figure:
            return
        self.examples += 1
        for record in figure.get("records", ()):
            override = record.get("override", {})
            self.results[record["result"]] += 1
            self._fields.update(override)
            limit = override.get("vmem_limit_bytes")
            if limit is not None and record["result"] in ("compiled", "vmem_exceeded"):
                (self._fits if record["result"] == "compiled" else self._exceeds).add(int(limit))
            if record.get("fault") == "jax" and len(self._jax) < 3:
                self._jax.append(dict(record))

    def figure(self) -> dict[str, Any]:
        """The report's figure: ``examples``, ``results`` (count per result), ``fields``
        drawn, ``vmem`` (the largest drawn limit the kernel did not fit in, ``exceeds``, and
        the smallest it fitted in, ``fits``: its VMEM need lies between) and ``jax`` (up to
        three overrides the compiler failed on, JAX's fault)."""
        figure: dict[str, Any] = {"examples": self.examples, "results": dict(sorted(self.results.items())),
                                  "fields": sorted(self._fields)}
        if self._fits or self._exceeds:
            figure["vmem"] = {"exceeds": max(self._exceeds, default=None), "fits": min(self._fits, default=None)}
        if self._jax:
            figure["jax"] = self._jax
        return figure
