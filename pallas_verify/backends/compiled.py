"""Backends that compile for real chips: ``mosaic_tpu:<chip>``, ``triton:<gpu>``, ``mosaic_gpu:<gpu>``.

Without the hardware they compile only, through libtpu's compile-only devices (extra
``tpu``) and the CUDA plugin's deviceless compiles (extra ``gpu``); when jax sees a
real chip of the target's kind they run the kernel on it. A compiler may abort the
process, so every backend here sets ``isolate = True`` and ``run`` is called inside a
worker process. Compiles are cached per (kernel, config, input shapes, transform, backend) within
the process, so shrinking does not recompile.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from pallas_verify.backends import families
from pallas_verify.backends.lowering import UNSUPPORTED, compile_case, execute_case
from pallas_verify.case import Case, Outcome
from pallas_verify.keys import Lru, bound_key, shapes_key

__all__ = [
    "COMPILE_CACHE",
    "UNSUPPORTED",
    "CompiledBackend",
    "attached_targets",
    "compile_backends",
]

#: Outcomes of compiles in this process.
COMPILE_CACHE: Lru[tuple[Any, ...], Outcome] = Lru(maxsize=512)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompiledBackend:
    """One compile target: a family (``mosaic_tpu``, ``triton``, ``mosaic_gpu``) and a chip.

    Attributes:
      family: the compiler.
      target: the chip or GPU name (``"v5e"``, ``"h100"``), see ``targets``.
    """

    family: str
    target: str
    isolate: bool = True
    reruns_shapes: bool = False  # it compiles; nothing to compare

    @property
    def name(self) -> str:
        return f"{self.family}:{self.target}"

    @property
    def arithmetic(self) -> str:
        """Its compiler's: a real chip computes with its own math (``Backend.arithmetic``)."""
        return self.family

    @property
    def platforms(self) -> frozenset[str]:
        return frozenset({families.family(self.family).platform})

    @property
    def executes(self) -> bool:
        """True when jax sees a real device of this target (then ``run`` executes)."""
        return self.target in attached_targets()

    def available(self) -> str | None:
        return _missing(self.family)

    def modes(self) -> st.SearchStrategy[Mapping[str, Any]]:
        """Mosaic TPU: overrides of the kernel's own compiler params, drawn around the
        chip's VMEM (``backends.mosaic_params``); other families draw nothing."""
        if self.family != "mosaic_tpu":
            return st.just({})
        from pallas_verify.backends import mosaic_params

        return mosaic_params.modes(self._chip.device_kind)

    @property
    def _chip(self) -> Any:
        return next(t for t in families.family(self.family).targets if t.name == self.target)

    def variants(self, mode: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return []

    def witness_mode(self) -> dict[str, Any]:
        return {}

    def recompiles(self, mode: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
        return True

    def interpret_source(self, mode: Mapping[str, Any]) -> str | None:
        return None  # a compiler: it interprets nothing

    def run(self, case: Case) -> Outcome:
        if self.executes:
            return execute_case(case, family=self.family, device=_attached_device(self.target),
                                program=_overridden(case.mode))
        outcome = self._compile_cached(case)
        if self.family != "mosaic_tpu":
            return outcome
        from pallas_verify.backends import mosaic_params

        start = time.perf_counter()
        judged = mosaic_params.compile_with_params(case, outcome, target=self.target,
                                                   device_kind=self._chip.device_kind, key=_cache_key(self.name, case))
        return dataclasses.replace(judged, seconds=outcome.seconds + time.perf_counter() - start)

    def _compile_cached(self, case: Case) -> Outcome:
        start = time.perf_counter()
        key = _cache_key(self.name, case)
        cached = COMPILE_CACHE.get(key)
        if cached is not None:
            return dataclasses.replace(cached, seconds=time.perf_counter() - start)
        outcome, _ = compile_case(case, family=self.family, target=self.target)
        COMPILE_CACHE.put(key, outcome)
        return outcome


def compile_backends() -> list[CompiledBackend]:
    """All compile backends: every family of ``families.FAMILIES`` for each of its targets."""
    return [CompiledBackend(family=f.name, target=t.name) for f in families.FAMILIES for t in f.targets]


@functools.cache
def attached_targets() -> frozenset[str]:
    """Target names of the real devices jax sees in this process (empty on a CPU-only host)."""
    import jax

    return families.targets_of((d.platform, d.device_kind) for d in jax.devices())


def _attached_device(target: str) -> Any:
    import jax

    return next(d for d in jax.devices() if families.target_of(d.platform, d.device_kind) == target)


def _overridden(mode: Mapping[str, Any]) -> Any:
    """What a real chip runs of the traced function: the kernel under the mode's compiler-param
    overrides (None: as it is)."""
    overrides = mode.get("compiler_params")
    if not overrides:
        return None
    from pallas_verify import _jax_compat

    return lambda closed: _jax_compat.evaluator(_jax_compat.with_compiler_params(closed, overrides))


def _cache_key(backend: str, case: Case) -> tuple[Any, ...]:
    return (backend, case.spec.name, *bound_key(case.spec.kernel, case.config, case.transform), shapes_key(case.inputs))


def _missing(family: str) -> str | None:
    """Why this family cannot run here, or None. Looks for files only: no import of jax."""
    return families.missing_compiler(family)
