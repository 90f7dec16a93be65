"""What the installed JAX release has, found by probing it, never by its version string.

pallas-verify supports the last three minor releases of JAX (0.10, 0.11, 0.12; see
docs/jax-versions.md). They differ in what this tool reads and sets:

- the fields of ``pltpu.InterpretParams`` and ``plgpu.InterpretGPUParams`` (``on_race``
  is new in 0.12; before it, a race is always reported the way ``on_race="warn"``
  reports it, so the tool's own choice needs no field there);
- GPU interpret mode itself (``plgpu.InterpretGPUParams``, new in 0.11);
- where jax's TPU chip table lives (``jax._src.tpu_info`` since 0.11,
  ``jax._src.pallas.mosaic.tpu_info`` before, still re-exported there), and which names
  are public (``pltpu.TensorCoreMesh`` is new in 0.11).

``interpret_params`` builds an interpreter's params object from keyword arguments, with
the fields the installed release lacks left out where leaving them out changes nothing,
and ``MissingFeature`` (the tool's, never the kernel's) where it would. ``gaps`` lists
what the installed release lacks and what is therefore not checked, once per run.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Mapping
from typing import Any

from pallas_verify.errors import PallasVerifyError

__all__ = ["Gap", "MissingFeature", "discharge_strips_memory_space", "gaps", "gpu_interpret_gap", "interpret_fields",
           "interpret_params", "interpret_params_class", "interpret_params_source", "jax_version",
           "swapped_waits_mislabelled", "tensorcore_mesh_class", "tpu_info_modules"]


class MissingFeature(PallasVerifyError):
    """The installed JAX lacks something a run asked for: said as the tool's, not the kernel's."""


# Fields the tool sets whose value is what an older release does anyway when it lacks the
# field: JAX before 0.12 logs a race and sets ``races_found``, which is on_race="warn".
_IMPLIED: Mapping[str, Any] = {"on_race": "warn"}
_CLASSES = {"tpu": ("tpu", "InterpretParams"), "gpu": ("mosaic_gpu", "InterpretGPUParams")}


def jax_version() -> str:
    import jax

    return jax.__version__


@functools.cache
def interpret_params_class(platform: str) -> type | None:
    """``pltpu.InterpretParams`` (``platform="tpu"``) or ``plgpu.InterpretGPUParams``
    (``"gpu"``), or None when the installed JAX has no such interpreter."""
    import importlib

    module, name = _CLASSES[platform]
    try:
        return getattr(importlib.import_module(f"jax.experimental.pallas.{module}"), name, None)
    except ImportError:
        return None


@functools.cache
def interpret_fields(platform: str) -> frozenset[str]:
    """The fields of the platform's interpret params in the installed JAX (empty: none)."""
    cls = interpret_params_class(platform)
    return frozenset(f.name for f in dataclasses.fields(cls)) if cls is not None else frozenset()


def _supported(platform: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` without the fields the installed JAX lacks and implies (``_IMPLIED``);
    MissingFeature for any other field it lacks, or when it has no such interpreter."""
    if interpret_params_class(platform) is None:
        raise MissingFeature(f"JAX {jax_version()} has no {platform.upper()} interpret mode "
                             f"(jax.experimental.pallas.{'.'.join(_CLASSES[platform])}); it is new in JAX 0.11. "
                             "Install jax>=0.11 to run it")
    fields = interpret_fields(platform)
    missing = [k for k in kwargs if k not in fields and _IMPLIED.get(k, _MISSING) != kwargs[k]]
    if missing:
        raise MissingFeature(f"JAX {jax_version()}'s {_CLASSES[platform][1]} has no field {missing[0]!r} "
                             f"(asked for {missing[0]}={kwargs[missing[0]]!r}); its fields are {sorted(fields)}. "
                             "Install a newer jax, or leave the field out of the mode")
    return {k: v for k, v in kwargs.items() if k in fields}


_MISSING = object()


def interpret_params(platform: str, **kwargs: Any) -> Any:
    """The platform's interpret params object for ``kwargs`` on the installed JAX."""
    checked = _supported(platform, kwargs)  # raises first where the interpreter is missing
    return interpret_params_class(platform)(**checked)  # type: ignore[misc]


def interpret_params_source(platform: str, kwargs: Mapping[str, Any]) -> str:
    """``interpret_params(platform, **kwargs)`` as plain-jax source (for reproducers)."""
    prefix = {"tpu": "pltpu", "gpu": "plgpu"}[platform]
    return f"{prefix}.{_CLASSES[platform][1]}(**{_supported(platform, kwargs)!r})"


@functools.cache
def tensorcore_mesh_class() -> type:
    """The class of a TPU TensorCore mesh (``pltpu.TensorCoreMesh``; only internal in 0.10)."""
    from jax.experimental.pallas import tpu as pltpu

    found = getattr(pltpu, "TensorCoreMesh", None)
    if found is None:
        from jax._src.pallas.mosaic import core

        found = core.TensorCoreMesh
    return found


@functools.cache
def tpu_info_modules() -> tuple[types.ModuleType, ...]:
    """The modules of jax's TPU chip table whose device lookups callers go through: the
    one that defines them, and ``pallas.mosaic.tpu_info``, which re-exports them (0.11+)
    or defines them (0.10)."""
    import importlib

    found = []
    for name in ("jax._src.tpu_info", "jax._src.pallas.mosaic.tpu_info"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return tuple(found)


@functools.cache
def discharge_strips_memory_space() -> bool:
    """Whether ``discharge_state`` takes ``strip_memory_space`` (JAX 0.11 on; 0.10
    discharges SMEM refs into plain arrays without it)."""
    from jax._src.state import discharge

    return "strip_memory_space" in inspect.signature(discharge.discharge_state).parameters


@functools.cache
def swapped_waits_mislabelled() -> bool:
    """Whether the installed JAX labels a DMA wait bound with source and destination swapped
    (a remote copy's send wait) with the effects of an unswapped one, a write of its source
    (0.10: its ``_get_dma_effects`` takes no ``src_dst_swapped``)."""
    from jax._src.pallas.mosaic import primitives

    effects = getattr(primitives, "_get_dma_effects", None)
    return effects is not None and "src_dst_swapped" not in inspect.signature(effects).parameters


@dataclasses.dataclass(frozen=True)
class Gap:
    """Something the installed JAX lacks, and what is therefore not checked."""

    feature: str
    unchecked: str

    def __str__(self) -> str:
        return f"JAX {jax_version()} lacks {self.feature}: {self.unchecked}"


def _reexported(module: str, name: str) -> bool:
    """Whether ``jax.experimental.pallas.<module>``'s source re-exports ``name`` the way
    JAX's public modules do (``from ... import name as name``), read without importing the
    module (Mosaic GPU's takes about 0.2 s): a yes is that module's own statement; a no
    (or no such file) is for the import to settle."""
    import importlib.util
    import re

    try:
        found = importlib.util.find_spec(f"jax.experimental.pallas.{module}")
        if found is None or not found.origin:
            return False
        with open(found.origin, encoding="utf-8") as f:
            source = f.read()
    except (ImportError, OSError, UnicodeDecodeError, ValueError):
        return False
    return re.search(rf"^from \S+ import {name} as {name}$", source, re.MULTILINE) is not None


def gpu_interpret_gap() -> Gap | None:
    """The gap when the installed JAX has no GPU interpret mode (the ``gpu_interpret``
    backend's reason to be unavailable), else None."""
    if _reexported(*_CLASSES["gpu"]) or interpret_params_class("gpu") is not None:
        return None
    return Gap("GPU interpret mode (plgpu.InterpretGPUParams, new in 0.11)",
               "the gpu_interpret backend is unavailable: no Mosaic GPU kernel is run, and GPU races, "
               "out-of-bounds accesses and uninitialized reads are not checked")


def gaps() -> tuple[Gap, ...]:
    """What the installed JAX lacks that pallas-verify would use, probed."""
    gpu = gpu_interpret_gap()
    found = [gpu] if gpu is not None else []
    from pallas_verify._jax_compat.memwatch import available as watchable

    if not watchable():
        found.append(Gap("the memory layout of TPU interpret mode that the memory watch follows (new in 0.11)",
                         "nothing is unchecked, but every metamorphic rerun runs with its knobs compiled in, so "
                         "tpu_interpret costs more per example"))
    return tuple(found)
