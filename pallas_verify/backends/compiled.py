"""Backends that compile for real chips: ``mosaic_tpu:<chip>``, ``triton:<gpu>``, ``mosaic_gpu:<gpu>``.

Without the hardware they compile only, through libtpu's compile-only devices (extra
``tpu``) and the CUDA plugin's deviceless compiles (extra ``gpu``); when jax sees a
real chip of the target's kind they run the kernel on it. A compiler may abort the
process, so every backend here sets ``isolate = True`` and ``run`` is called inside a
worker process. Compiles are cached per (kernel, config, input shapes, transform, backend) within
the process, so shrinking does not recompile.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from pallas_verify.backends import families as targets
from pallas_verify.backends.lowering import UNSUPPORTED, compile_case, execute_case
from pallas_verify.case import Case, Outcome

__all__ = [
    "COMPILE_CACHE",
    "UNSUPPORTED",
    "CompileCache",
    "CompiledBackend",
    "attached_targets",
    "compile_backends",
]

@dataclasses.dataclass(kw_only=True)
class CompileCache:
    """Outcomes of compiles in this process, least recently used evicted first.

    Attributes:
      maxsize: entries kept; default 512.
      hits: lookups answered from the cache.
      misses: lookups that compiled.
    """

    maxsize: int = 512
    hits: int = 0
    misses: int = 0
    _entries: collections.OrderedDict[Any, Outcome] = dataclasses.field(
        default_factory=collections.OrderedDict, repr=False
    )

    def get(self, key: Any) -> Outcome | None:
        outcome = self._entries.get(key)
        if outcome is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return outcome

    def put(self, key: Any, outcome: Outcome) -> None:
        self._entries[key] = outcome
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)


COMPILE_CACHE = CompileCache()


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

    @property
    def name(self) -> str:
        return f"{self.family}:{self.target}"

    @property
    def platforms(self) -> frozenset[str]:
        return frozenset({targets.family(self.family).platform})

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
        return next(t for t in targets.family(self.family).targets if t.name == self.target)

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
    return [CompiledBackend(family=f.name, target=t.name) for f in targets.FAMILIES for t in f.targets]


@functools.cache
def attached_targets() -> frozenset[str]:
    """Target names of the real devices jax sees in this process (empty on a CPU-only host)."""
    import jax

    return targets.targets_of((d.platform, d.device_kind) for d in jax.devices())


def _attached_device(target: str) -> Any:
    import jax

    return next(d for d in jax.devices() if targets.target_of(d.platform, d.device_kind) == target)


def _overridden(mode: Mapping[str, Any]) -> Any:
    """What a real chip runs of the traced function: the kernel under the mode's compiler-param
    overrides (None: as it is)."""
    overrides = mode.get("compiler_params")
    if not overrides:
        return None
    from pallas_verify import _jax_compat

    return lambda closed: _jax_compat.evaluator(_jax_compat.with_compiler_params(closed, overrides))


def _cache_key(backend: str, case: Case) -> tuple[Any, ...]:
    shapes = tuple((tuple(x.shape), str(x.dtype)) for x in case.inputs)
    config = repr(sorted(case.config.items()))
    kernel = case.spec.kernel
    try:
        hash(kernel)
    except TypeError:
        kernel = id(kernel)
    return backend, case.spec.name, kernel, config, shapes, case.transform


def _missing(family: str) -> str | None:
    """Why this family cannot run here, or None. Looks for files only: no import of jax."""
    return targets.missing_compiler(family)
