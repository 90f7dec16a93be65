"""KernelSpec: what a kernel author hands us, validated on construction."""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

from hypothesis import strategies as st

from pallas_verify.errors import InvalidSpec, brief, closest

__all__ = ["PLATFORMS", "TRANSFORMS", "KernelSpec", "Tolerance"]

Platform = Literal["tpu", "gpu"]
PLATFORMS: tuple[str, ...] = get_args(Platform)
Transform = Literal["vmap", "grad"]
TRANSFORMS: tuple[str, ...] = get_args(Transform)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tolerance:
    """An override of the dtype-derived tolerance: ``|a - b| <= atol + rtol * |b|``.

    Attributes:
      rtol: relative tolerance, >= 0.
      atol: absolute tolerance, >= 0.
    """

    rtol: float
    atol: float

    def __post_init__(self) -> None:
        for field in ("rtol", "atol"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidSpec(f"Tolerance {field}={value!r} must be a number, e.g. 1e-5.")
            if not math.isfinite(value) or value < 0:
                raise InvalidSpec(f"Tolerance {field}={value!r} must be finite and >= 0.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelSpec:
    """A kernel, its pure-JAX reference, and the space of its configurations and inputs.

    Attributes:
      name: identifier used in test ids and reports (letters, digits, ``_ - .``).
      kernel: ``kernel(*inputs, **config)`` -> array or tuple of arrays. Calls
        ``pl.pallas_call`` WITHOUT ``interpret=``: the backend chooses that.
      reference: ``reference(*inputs, **config)`` -> the same structure, pure JAX.
      configs: ``SearchStrategy[dict]`` of the kernel's keyword arguments.
      inputs: ``config -> SearchStrategy[tuple of numpy arrays]``.
      tolerance: None (default) derives it from the output dtypes; a Tolerance overrides.
      platforms: the platforms the kernel targets; default ``("tpu",)``.
      features: tags for the conformance matrix; default ``()``.
      transforms: transforms checked like outputs (``"vmap"``, ``"grad"``); default ``()``.
      unsupported: ``{backend glob: reason}`` for what the kernel knowingly does not
        support (e.g. ``{"mosaic_tpu:v4": "int8 matmul needs v5+"}``); a failure there is
        reported as unsupported, not as a finding. Default ``{}``.
      bitwise_stable: True (default) when the kernel does no floating-point
        reassociation, so two executing backends must agree bitwise
        (``backend_divergence`` otherwise).
    """

    name: str
    kernel: Callable[..., Any]
    reference: Callable[..., Any]
    configs: st.SearchStrategy[dict[str, Any]]
    inputs: Callable[[dict[str, Any]], st.SearchStrategy[tuple[Any, ...]]]
    tolerance: Tolerance | None = None
    platforms: tuple[str, ...] = ("tpu",)
    features: tuple[str, ...] = ()
    transforms: tuple[str, ...] = ()
    unsupported: Mapping[str, str] = dataclasses.field(default_factory=dict)
    bitwise_stable: bool = True

    def __post_init__(self) -> None:
        _check_name(self.name)
        for field in ("kernel", "reference", "inputs"):
            _check_callable(self.name, field, getattr(self, field))
        if not isinstance(self.configs, st.SearchStrategy):
            raise InvalidSpec(
                f"KernelSpec {self.name!r}: configs={brief(self.configs)} must be a Hypothesis "
                "SearchStrategy of dicts, e.g. st.fixed_dictionaries({'block': st.just(128)})."
            )
        if self.tolerance is not None and not isinstance(self.tolerance, Tolerance):
            raise InvalidSpec(
                f"KernelSpec {self.name!r}: tolerance={brief(self.tolerance)} must be None or "
                "pv.Tolerance(rtol=..., atol=...)."
            )
        object.__setattr__(self, "platforms", _choices(self.name, "platforms", self.platforms, PLATFORMS, nonempty=True))
        object.__setattr__(self, "transforms", _choices(self.name, "transforms", self.transforms, TRANSFORMS))
        object.__setattr__(self, "features", _strings(self.name, "features", self.features))
        _check_unsupported(self.name, self.unsupported)
        object.__setattr__(self, "unsupported", dict(self.unsupported))
        if not isinstance(self.bitwise_stable, bool):
            raise InvalidSpec(f"KernelSpec {self.name!r}: bitwise_stable={self.bitwise_stable!r} must be True or False.")
        object.__setattr__(self, "_module", _constructing_module())

    @property
    def module(self) -> str | None:
        """The name of the module whose code constructed this spec (None if unknown): where
        ``loader.spec_ref`` looks first for the module-level name that holds it."""
        return self.__dict__.get("_module")

    def unsupported_reason(self, backend: str) -> str | None:
        """The declared reason this kernel does not support ``backend``, if any."""
        for pattern, reason in self.unsupported.items():
            if fnmatch.fnmatchcase(backend, pattern):
                return reason
        return None


# Frames between a KernelSpec's caller and __post_init__: this module (and the __init__
# dataclasses generates for it) and dataclasses.replace.
_PLUMBING = frozenset({__name__, "dataclasses"})


def _constructing_module() -> str | None:
    """The ``__name__`` of the first frame outside KernelSpec's own construction."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in _PLUMBING:
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


def _check_name(name: object) -> None:
    ok = isinstance(name, str) and name and all(c.isalnum() or c in "_-." for c in name)
    if not ok:
        raise InvalidSpec(
            f"KernelSpec name={brief(name)} must be a non-empty string of letters, digits, "
            "'_', '-' or '.', e.g. 'matmul_bf16'."
        )


def _check_callable(spec: str, field: str, value: object) -> None:
    if not callable(value):
        raise InvalidSpec(f"KernelSpec {spec!r}: {field}={brief(value)} must be callable.")


def _strings(spec: str, field: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise InvalidSpec(
            f"KernelSpec {spec!r}: {field}={value!r} must be a tuple of strings, "
            f"e.g. ({value!r},)." if isinstance(value, str) else
            f"KernelSpec {spec!r}: {field}={brief(value)} must be a tuple of strings."
        )
    for item in value:
        if not isinstance(item, str) or not item:
            raise InvalidSpec(f"KernelSpec {spec!r}: {field} item {item!r} must be a non-empty string.")
    return tuple(value)


def _choices(spec: str, field: str, value: object, valid: tuple[str, ...], nonempty: bool = False) -> tuple[str, ...]:
    items = _strings(spec, field, value)
    if nonempty and not items:
        raise InvalidSpec(f"KernelSpec {spec!r}: {field}=() must name at least one of {valid}.")
    for item in items:
        if item not in valid:
            raise InvalidSpec(
                f"KernelSpec {spec!r}: {field} item {item!r} is not one of {valid}."
                + closest(item, valid)
            )
    return items


def _check_unsupported(spec: str, value: object) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
    ):
        raise InvalidSpec(
            f"KernelSpec {spec!r}: unsupported={brief(value)} must map backend globs to "
            "reasons, e.g. {'mosaic_tpu:v4': 'int8 matmul needs v5 or later'}."
        )
