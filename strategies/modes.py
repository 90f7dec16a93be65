"""Interpreter modes: the knobs TPU and GPU interpret mode take, drawn per example.

Choices come from the upstream dataclasses (the ``Literal`` types of the fields of
``pltpu.InterpretParams`` and ``plgpu.InterpretGPUParams``), so a value or a Literal
field added upstream is drawn without a change here. A mode is a plain JSON-able dict of
keyword arguments of that dataclass; ``make_interpret_params`` builds the object.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

from hypothesis import strategies as st

from strategies._validation import check_bool, check_choice, check_int, closest
from strategies.errors import InvalidStrategyType, InvalidStrategyValue

__all__ = [
    "INTERPRET_PLATFORMS",
    "dma_execution_modes",
    "gpu_interpret_modes",
    "gpu_interpret_params",
    "literal_choices",
    "make_interpret_params",
    "tpu_interpret_modes",
    "tpu_interpret_params",
]

Platform = Literal["tpu", "gpu"]
INTERPRET_PLATFORMS: tuple[str, ...] = get_args(Platform)
# Literal fields never drawn: on_race is the engine's (it reads the race flag), and
# buffer_bounds="padded" needs a TPU device kind in scope. Pin them with ``fixed=``.
UNDRAWN_FIELDS = frozenset({"on_race", "buffer_bounds"})


@functools.cache
def _params_class(platform: str) -> type:
    if platform == "tpu":
        from jax.experimental.pallas import tpu as pltpu

        return pltpu.InterpretParams
    import jax
    from jax.experimental.pallas import mosaic_gpu as plgpu

    if not hasattr(plgpu, "InterpretGPUParams"):  # GPU interpret mode is new in jax 0.11
        raise InvalidStrategyValue(f"platform='gpu': jax {jax.__version__} has no GPU interpret mode "
                                   "(plgpu.InterpretGPUParams, new in jax 0.11); install jax>=0.11 to draw its modes.")
    return plgpu.InterpretGPUParams


@functools.cache
def literal_choices(platform: str) -> dict[str, tuple[Any, ...]]:
    """``{field: choices}`` for every Literal-typed field of the platform's interpret
    params dataclass, the upstream default first (so a draw shrinks to it)."""
    check_choice("literal_choices", "platform", platform, INTERPRET_PLATFORMS)
    cls = _params_class(platform)
    hints = typing.get_type_hints(cls)
    choices = {}
    for field in dataclasses.fields(cls):
        if get_origin(hints[field.name]) is Literal:
            values = get_args(hints[field.name])
            choices[field.name] = (field.default, *(v for v in values if v != field.default))
    return choices


def _check_mode(where: str, name: str, mode: Any, platform: str) -> dict[str, Any]:
    """``mode`` as a dict whose keys are fields and whose Literal values are valid."""
    if not isinstance(mode, Mapping):
        raise InvalidStrategyType(
            f"{where}({name}={mode!r}): expected a dict of interpret params, e.g. "
            "{'detect_races': True}."
        )
    fields = [f.name for f in dataclasses.fields(_params_class(platform))]
    literals = literal_choices(platform)
    for key, value in mode.items():
        if key not in fields:
            raise InvalidStrategyValue(
                f"{where}({name}={dict(mode)!r}): {key!r} is not a {platform} interpret "
                f"param; valid keys are {fields}.{closest(key, fields)}"
            )
        if key in literals:
            check_choice(where, f"{name}[{key!r}]", value, literals[key])
    try:
        _params_class(platform)(**mode)
    except (TypeError, ValueError) as error:
        raise InvalidStrategyValue(f"{where}({name}={dict(mode)!r}): {error}") from None
    return dict(mode)


def _literal_draws(platform: str, fixed: Mapping[str, Any]) -> dict[str, st.SearchStrategy]:
    return {
        name: st.sampled_from(values)
        for name, values in literal_choices(platform).items()
        if name not in UNDRAWN_FIELDS and name not in fixed
    }


def _modes(
    draws: dict[str, st.SearchStrategy], pinned: dict[str, Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts of the drawn fields (in ``draws`` order) updated with the pinned ones."""
    drawn = {k: v for k, v in draws.items() if k not in pinned}
    return st.fixed_dictionaries(drawn).map(lambda mode: {**{k: mode[k] for k in drawn}, **pinned})


def _races(where: str, detect_races: Any) -> st.SearchStrategy[bool]:
    if detect_races is None:
        return st.booleans()
    return st.just(check_bool(where, "detect_races", detect_races))


def tpu_interpret_modes(
    *,
    detect_races: bool | None = True,
    max_cores: int = 2,
    max_random_seed: int = 2**16 - 1,
    fixed: Mapping[str, Any] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Modes of TPU interpret mode as JSON-able dicts of ``pltpu.InterpretParams`` kwargs.

    Draws ``detect_races`` (default always True: the mode is a sanitizer; None draws
    it), ``num_cores_or_threads`` in 1..max_cores (races across cores need >= 2 and a
    "parallel" grid axis), ``random_seed`` in 0..max_random_seed (permutes parallel grid
    axes), and every Literal field of InterpretParams (``dma_execution_mode``,
    ``uninitialized_memory``, ``out_of_bounds_reads``, and any added upstream) except
    ``on_race`` and ``buffer_bounds``. ``fixed`` pins fields (validated) instead.

    Shrinks toward the cheapest sanitizer: race detection on, 1 core, seed 0, and the
    upstream default of every Literal field (on_wait, nan, raise).

    Example: ``tpu_interpret_modes()`` draws {"detect_races": True,
    "num_cores_or_threads": 2, "random_seed": 3, "dma_execution_mode": "eager",
    "uninitialized_memory": "nan", "out_of_bounds_reads": "raise"}.
    """
    where = "tpu_interpret_modes"
    check_int(where, "max_cores", max_cores, min_value=1)
    check_int(where, "max_random_seed", max_random_seed, min_value=0)
    pinned = _check_mode(where, "fixed", fixed or {}, "tpu")
    draws = {
        "detect_races": _races(where, detect_races),
        "num_cores_or_threads": st.integers(1, max_cores),
        "random_seed": st.integers(0, max_random_seed),
        **_literal_draws("tpu", pinned),
    }
    return _modes(draws, pinned)


def gpu_interpret_modes(
    *, detect_races: bool | None = True, fixed: Mapping[str, Any] | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    """Modes of GPU interpret mode as JSON-able dicts of ``plgpu.InterpretGPUParams``
    kwargs: ``detect_races`` (default always True; None draws it) and every Literal field
    (``uninitialized_memory``, ``out_of_bounds_reads``, ...) except ``on_race``. The
    thread count comes from the kernel, so it is not drawn. ``fixed`` pins fields.

    Shrinks toward race detection on and the upstream default of every Literal field.

    Example: ``gpu_interpret_modes()`` draws {"detect_races": True,
    "out_of_bounds_reads": "raise", "uninitialized_memory": "zero"}.
    """
    where = "gpu_interpret_modes"
    pinned = _check_mode(where, "fixed", fixed or {}, "gpu")
    draws = {"detect_races": _races(where, detect_races), **_literal_draws("gpu", pinned)}
    return _modes(draws, pinned)


def dma_execution_modes() -> st.SearchStrategy[str]:
    """When TPU interpret mode executes a DMA (``"on_wait"``, ``"eager"``, and any mode
    added upstream). Shrinks toward the upstream default, ``"on_wait"``.

    Example: ``dma_execution_modes()`` draws "on_wait" or "eager".
    """
    return st.sampled_from(literal_choices("tpu")["dma_execution_mode"])


def make_interpret_params(mode: Mapping[str, Any], *, platform: str = "tpu") -> Any:
    """The upstream params object for a mode dict: ``pltpu.InterpretParams(**mode)`` for
    ``platform="tpu"``, ``plgpu.InterpretGPUParams(**mode)`` for ``"gpu"``.

    Example: ``make_interpret_params({"detect_races": True, "num_cores_or_threads": 2})``.
    """
    check_choice("make_interpret_params", "platform", platform, INTERPRET_PLATFORMS)
    checked = _check_mode("make_interpret_params", "mode", mode, platform)
    return _params_class(platform)(**checked)


def tpu_interpret_params(
    *,
    detect_races: bool | None = True,
    max_cores: int = 2,
    max_random_seed: int = 2**16 - 1,
    fixed: Mapping[str, Any] | None = None,
) -> st.SearchStrategy[Any]:
    """``pltpu.InterpretParams`` objects of ``tpu_interpret_modes`` (same arguments);
    shrinks like it. Example: ``interpret=data.draw(tpu_interpret_params(max_cores=1))``.
    """
    modes = tpu_interpret_modes(
        detect_races=detect_races, max_cores=max_cores, max_random_seed=max_random_seed, fixed=fixed
    )
    return modes.map(functools.partial(make_interpret_params, platform="tpu"))


def gpu_interpret_params(
    *, detect_races: bool | None = True, fixed: Mapping[str, Any] | None = None
) -> st.SearchStrategy[Any]:
    """``plgpu.InterpretGPUParams`` objects of ``gpu_interpret_modes`` (same arguments);
    shrinks like it. Example: ``interpret=data.draw(gpu_interpret_params())``."""
    modes = gpu_interpret_modes(detect_races=detect_races, fixed=fixed)
    return modes.map(functools.partial(make_interpret_params, platform="gpu"))
