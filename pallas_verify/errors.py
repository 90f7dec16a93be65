"""The exception hierarchy: one root, leaves that are also the builtin they refine."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["InvalidArgument", "InvalidSpec", "NotForThisCase", "PallasVerifyError", "brief", "check_positive_int",
           "closest"]


class PallasVerifyError(Exception):
    """Root of every error pallas-verify raises on purpose."""


class InvalidSpec(PallasVerifyError, TypeError):
    """A KernelSpec field has the wrong type, shape or value."""


class InvalidArgument(PallasVerifyError, ValueError):
    """An argument to a public function or CLI option is invalid."""


class NotForThisCase(PallasVerifyError):
    """A kernel raises this when the backend running it cannot run this one example (a
    generated program uses what that backend lacks): the example is not run there, and
    not judged; the backend's search goes on with the next one (the others run it)."""


def check_positive_int(name: str, value: object, *, optional: bool = False, example: int | None = None) -> None:
    """InvalidArgument naming ``name=value`` unless ``value`` is an int of at least 1 (not a
    bool); None passes when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        hint = f", e.g. {example}" if example is not None else ""
        raise InvalidArgument(f"{name}={value!r} must be a positive integer{hint}.")


def closest(value: str, choices: Iterable[str]) -> str:
    """A ' Did you mean X?' suffix naming the closest valid choice, or ''."""
    match = difflib.get_close_matches(str(value), list(choices), n=1)
    return f" Did you mean {match[0]!r}?" if match else ""


def brief(value: object, limit: int = 120) -> str:
    """``value`` on one short line for an error message: an array by its type, shape and
    dtype (never its elements), a list or tuple by its first items, anything else by its
    repr, cut at ``limit`` characters."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__}(shape={tuple(shape)}, dtype={dtype})"
    if isinstance(value, (list, tuple)):
        items = ", ".join(brief(v, 60) for v in value[:3]) + (", ..." if len(value) > 3 else "")
        text = f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
        return f"a {type(value).__name__} of {len(value)}: {text}" if len(value) > 3 else text
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
