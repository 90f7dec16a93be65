"""The exception hierarchy: one root, leaves that are also the builtin they refine."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["InvalidArgument", "InvalidSpec", "PallasVerifyError", "closest"]


class PallasVerifyError(Exception):
    """Root of every error pallas-verify raises on purpose."""


class InvalidSpec(PallasVerifyError, TypeError):
    """A KernelSpec field has the wrong type, shape or value."""


class InvalidArgument(PallasVerifyError, ValueError):
    """An argument to a public function or CLI option is invalid."""


def closest(value: str, choices: Iterable[str]) -> str:
    """A ' Did you mean X?' suffix naming the closest valid choice, or ''."""
    match = difflib.get_close_matches(str(value), list(choices), n=1)
    return f" Did you mean {match[0]!r}?" if match else ""
