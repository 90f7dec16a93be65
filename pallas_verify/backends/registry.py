"""The backend registry: one table of every backend, by name."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pallas_verify.backends.base import Backend
from pallas_verify.backends.interpreters import interpreter_backends
from pallas_verify.errors import InvalidArgument, closest

__all__ = ["all_backends", "get", "resolve"]


@functools.cache
def all_backends() -> dict[str, Backend]:
    """Every backend pallas-verify knows, available here or not, in cost order."""
    backends: list[Backend] = list(interpreter_backends())
    from pallas_verify.backends.compiled import compile_backends

    backends.extend(compile_backends())
    return {b.name: b for b in backends}


def get(name: str) -> Backend:
    """The backend called ``name``; InvalidArgument naming valid choices otherwise."""
    table = all_backends()
    if name not in table:
        raise InvalidArgument(
            f"backend={name!r} is not a known backend; choose from {', '.join(table)}."
            + closest(name, table)
        )
    return table[name]


def resolve(names: Sequence[str] | None) -> list[Backend]:
    """The named backends (all when None), de-duplicated, in the registry's order."""
    if names is None:
        return list(all_backends().values())
    if isinstance(names, str):
        names = [n for n in names.split(",") if n]
    wanted = {get(n).name for n in names}
    return [b for b in all_backends().values() if b.name in wanted]
