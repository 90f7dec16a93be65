"""Lowering and compiling one case for one target, in the calling process.

This runs inside an isolation worker: a compiler may abort the whole process (an fp8
dot compiled for A100 does), so the engine never calls it in its own process.

How an unmodified kernel (one that passes no ``interpret=``) is made to lower for a
target from the outside: trace it with ``jax.jit(...).trace`` on
``ShapeDtypeStruct`` arguments placed on a compile-only device, under that device's
abstract mesh, and lower with ``lowering_platforms=("tpu",)`` or ``("cuda",)``. In jax
0.12 a ``pallas_call`` without ``compiler_params`` lowers with Mosaic on ``tpu`` and
with Triton on ``cuda``; ``pltpu.CompilerParams`` select Mosaic TPU and
``pl.triton.CompilerParams`` select Triton, and each fails on the other platform.
``plgpu.kernel`` kernels always lower with Mosaic GPU. ``kernel_sites`` reads which
lowering a kernel asks for, so a mismatch is reported as unsupported instead of as
the bare ``AssertionError`` or ``ValueError`` jax raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.backends import families
from pallas_verify.case import UNSUPPORTED, Case, ErrorInfo, Outcome
from pallas_verify.errors import PallasVerifyError
from pallas_verify.transforms import bound

__all__ = ["UNSUPPORTED", "compile_case", "execute_case", "kernel_sites", "read_traced", "unsupported_reason"]

_ARCH_IN_PROCESS: dict[str, str] = {}


def kernel_sites(closed_jaxpr: Any) -> list[str]:
    """The lowering each Pallas kernel in a traced function asks for, in order.

    ``"default"`` is a ``pallas_call`` without ``compiler_params``; otherwise one of
    ``"mosaic_tpu"``, ``"triton"``, ``"mosaic_gpu"``, or ``"unknown:<type>"``.
    """
    kernels = _jax_compat.equations(closed_jaxpr.jaxpr, into=lambda eqn: not _jax_compat.is_kernel(eqn))
    return [_jax_compat.kernel_site(eqn) for eqn in kernels if _jax_compat.is_kernel(eqn)]


def unsupported_reason(family: str, sites: list[str]) -> str | None:
    """Why ``family`` cannot compile a function with these kernel sites, or None."""
    serves = families.family(family).lowerings
    how = {f.name: f.how for f in families.FAMILIES}
    if not sites:
        return f"{family} compiles Pallas kernels; the function calls none (no pallas_call or plgpu.kernel)."
    for site in sites:
        if site not in serves:
            asked = how.get(site, site)
            return (f"the kernel uses {asked}, which selects the {site} lowering; {family} "
                    f"compiles kernels written with {how[family]}.")
    return None


def compile_case(case: Case, *, family: str, target: str,
                 program: Callable[[Any], Callable[..., Any]] | None = None) -> tuple[Outcome, Any]:
    """Lower and compile ``case`` (under its transform) for ``target``; (outcome,
    compiled executable or None).

    ``program``, when given, makes what is compiled from the traced function's jaxpr (a
    function of its flat arguments: the kernel with other compiler params, called twice...).
    Warnings raised while compiling (e.g. Triton's deprecation) become diagnostics.
    """
    start = time.perf_counter()
    platform = families.family(family).lowering_platform
    mesh, abstract_mesh = _mesh(family, target)
    args = _abstract_args(case.inputs, mesh)
    fn = bound(case)
    with warnings.catch_warnings(record=True) as caught, _device_facts(family, target):
        warnings.simplefilter("always")
        try:
            with _use(abstract_mesh):
                traced = _jax().jit(fn).trace(*args)
                reason = unsupported_reason(family, kernel_sites(traced.jaxpr))
                if reason is not None:
                    return _failed(ErrorInfo(type=UNSUPPORTED, message=reason), start, compiled_only=True), None
                if program is not None:
                    traced = _jax().jit(program(traced.jaxpr)).trace(*args)
                _pin_mosaic_gpu_arch(family, target)
                lowered = traced.lower(lowering_platforms=(platform,))
            compiled = lowered.compile()
        except PallasVerifyError:
            raise
        except Exception as error:  # the kernel's own failure is the outcome
            notes = _warning_text(caught)
            return _failed(_error_info(error), start, diagnostics=f"{error}{notes}", compiled_only=True), None
    notes = _warning_text(caught)
    seconds = time.perf_counter() - start
    return Outcome(compiled_only=True, seconds=seconds, diagnostics=f"compiled for {family}:{target}{notes}"), compiled


def read_traced(case: Case, *, family: str, target: str, read: Callable[[Any], Any]) -> Any:
    """``read(jaxpr)`` of ``case``'s function traced as for ``target``; None when it does not
    trace (its compile then says why)."""
    mesh, abstract_mesh = _mesh(family, target)
    args = _abstract_args(case.inputs, mesh)
    try:
        with _device_facts(family, target), _use(abstract_mesh):
            return read(_jax().jit(bound(case)).trace(*args).jaxpr)
    except PallasVerifyError:
        raise
    except Exception:  # the kernel's own failure: the compile reports it
        return None


def execute_case(case: Case, *, family: str, device: Any,
                 program: Callable[[Any], Callable[..., Any]] | None = None) -> Outcome:
    """Run ``case`` on a real device of ``family``'s platform and return its outputs
    (``program``: as for ``compile_case``)."""
    jax = _jax()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = _execute(case, family, device, jax, program)
    return dataclasses.replace(outcome, seconds=time.perf_counter() - start,
                               diagnostics=outcome.diagnostics + _warning_text(caught))


def _execute(case: Case, family: str, device: Any, jax: Any, program: Callable[[Any], Callable[..., Any]] | None) -> Outcome:
    start = time.perf_counter()
    try:
        inputs = [jax.device_put(x, device) for x in case.inputs]
        jitted = jax.jit(bound(case))
        traced = jitted.trace(*inputs)
        reason = unsupported_reason(family, kernel_sites(traced.jaxpr))
        if reason is not None:
            return _failed(ErrorInfo(type=UNSUPPORTED, message=reason), start)
        if program is not None:
            jitted = jax.jit(program(traced.jaxpr))
        outputs = tuple(np.asarray(leaf) for leaf in jax.tree.leaves(jitted(*inputs)))
    except Exception as error:  # the kernel's own failure is the outcome
        return _failed(_error_info(error), start, diagnostics=str(error))
    return Outcome(outputs=outputs, seconds=time.perf_counter() - start)


def trim_message(text: str) -> str:
    """The compiler's message without jax's boilerplate: its first two paragraphs."""
    skip = ("Please report a bug", "See https://", "See details at")
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    kept = [p for p in paragraphs if not p.startswith(skip)][:2]
    message = "\n\n".join(kept) or text.strip()
    return message if len(message) <= 1200 else message[:1200] + " ..."


def _warning_text(caught: list[warnings.WarningMessage]) -> str:
    return "".join(f"\n{w.category.__name__}: {w.message}" for w in caught)


def _error_info(error: BaseException) -> ErrorInfo:
    tb = "".join(traceback.format_exception(error, limit=-4))
    return ErrorInfo(type=type(error).__name__, message=trim_message(str(error)), traceback=tb)


def _failed(error: ErrorInfo, start: float, *, diagnostics: str = "", compiled_only: bool = False) -> Outcome:
    return Outcome(error=error, seconds=time.perf_counter() - start, diagnostics=diagnostics,
                   compiled_only=compiled_only)


def _device_facts(family: str, target: str) -> Any:
    """What a GPU kernel reads from its device while it is traced for ``target`` (its SM
    count: jax's Mosaic GPU kernels size their grid by it), supplied by the CPU devices."""
    chip = next(t for t in families.family(family).targets if t.name == target)
    if not isinstance(chip, families.GpuTarget):
        return contextlib.nullcontext()
    return _jax_compat.gpu_device_facts(core_count=chip.core_count)


def _pin_mosaic_gpu_arch(family: str, target: str) -> None:
    """Mosaic GPU fixes ptxas's architecture at its first compile in a process."""
    if family != "mosaic_gpu":
        return
    first = _ARCH_IN_PROCESS.setdefault(family, target)
    if first != target:
        raise PallasVerifyError(
            f"mosaic_gpu:{target} cannot compile in a process that already compiled for "
            f"mosaic_gpu:{first}: Mosaic GPU keeps the first GPU architecture for the whole "
            "process. Run each mosaic_gpu backend in its own worker process."
        )


@functools.cache
def _mesh(family: str, target: str) -> tuple[Any, Any]:
    """A one-device Mesh of the target's compile-only device, and the abstract mesh to lower under."""
    jax = _jax()
    from jax.experimental import topologies

    row = families.family(family)
    chip = next(t for t in row.targets if t.name == target)
    if isinstance(chip, families.TpuChip):
        families.apply_jax_env_defaults(libtpu_only=True)
        # One chip on one host: libtpu 0.0.48 (jax 0.11) assumes a 2x2x1 host and refuses a
        # one-chip topology unless told; the others accept it either way.
        device = topologies.get_topology_desc(chip.topology, platform=row.lowering_platform,
                                              chips_per_host_bounds=[1, 1, 1]).devices[0]
    else:
        config = families.gpu_target_config(chip)
        device = topologies.get_topology_desc(platform=row.lowering_platform, target_config=config,
                                              topology="1x1x1").devices[0]
    mesh = jax.sharding.Mesh(np.array([device]), ("x",))
    return mesh, _jax_compat.abstract_mesh_of(mesh, device)


def _abstract_args(inputs: tuple[np.ndarray, ...], mesh: Any) -> list[Any]:
    jax = _jax()
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    return [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype, sharding=sharding) for x in inputs]


def _use(abstract_mesh: Any) -> Any:
    return _jax().sharding.use_abstract_mesh(abstract_mesh)


def _jax() -> Any:
    import jax

    return jax
