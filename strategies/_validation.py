"""Argument checks shared by the strategy functions; messages name argument, value and fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from strategies.errors import InvalidStrategyType, InvalidStrategyValue


def closest(value: object, choices: Iterable[object]) -> str:
    """A ' Did you mean X?' suffix naming the closest valid choice, or ''."""
    names = [str(choice) for choice in choices]
    match = difflib.get_close_matches(str(value), names, n=1)
    return f" Did you mean {match[0]!r}?" if match else ""


def check_int(
    where: str, name: str, value: Any, *, min_value: int | None = None, max_value: int | None = None
) -> int:
    """``value`` as an int within ``[min_value, max_value]``; bools are rejected."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStrategyType(
            f"{where}({name}={value!r}): expected an int, got {type(value).__name__}. "
            f"Pass a whole number, e.g. {name}={min_value if min_value is not None else 1}."
        )
    if min_value is not None and value < min_value:
        raise InvalidStrategyValue(
            f"{where}({name}={value!r}): must be >= {min_value}. Pass {name}={min_value} or more."
        )
    if max_value is not None and value > max_value:
        raise InvalidStrategyValue(
            f"{where}({name}={value!r}): must be <= {max_value}. Pass {name}={max_value} or less."
        )
    return value


def check_optional_int(where: str, name: str, value: Any, *, min_value: int) -> int | None:
    """None, or ``value`` as an int >= ``min_value``."""
    return None if value is None else check_int(where, name, value, min_value=min_value)


def check_bool(where: str, name: str, value: Any) -> bool:
    """``value`` if it is a bool."""
    if not isinstance(value, bool):
        raise InvalidStrategyType(
            f"{where}({name}={value!r}): expected True or False, got {type(value).__name__}."
        )
    return value


def check_shape(
    where: str, name: str, value: Any, *, min_dim: int = 1, min_rank: int = 1
) -> tuple[int, ...]:
    """``value`` as a tuple of at least ``min_rank`` ints, each >= ``min_dim``."""
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidStrategyType(
            f"{where}({name}={value!r}): expected a tuple of ints, got "
            f"{type(value).__name__}. Pass e.g. {name}=(8, 128)."
        )
    if len(value) < min_rank:
        raise InvalidStrategyValue(
            f"{where}({name}={value!r}): needs at least one dimension. Pass e.g. {name}=(8, 128)."
        )
    for index, dim in enumerate(value):
        check_int(where, f"{name}[{index}]", dim, min_value=min_dim)
    return tuple(value)


def check_choice(where: str, name: str, value: Any, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``; the error lists them and the closest."""
    if value not in choices:
        raise InvalidStrategyValue(
            f"{where}({name}={value!r}): not one of {tuple(choices)!r}.{closest(value, choices)}"
        )
    return value


def check_choices(where: str, name: str, values: Any, choices: Sequence[Any]) -> tuple[Any, ...]:
    """``values`` as a non-empty tuple of distinct members of ``choices``."""
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise InvalidStrategyType(
            f"{where}({name}={values!r}): expected a tuple drawn from {tuple(choices)!r}."
        )
    if not values:
        raise InvalidStrategyValue(
            f"{where}({name}={values!r}): must not be empty; choose from {tuple(choices)!r}."
        )
    for value in values:
        check_choice(where, name, value, choices)
    if len(set(values)) != len(values):
        raise InvalidStrategyValue(f"{where}({name}={values!r}): contains duplicates.")
    return tuple(values)
