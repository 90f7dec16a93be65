"""A third-party library's function, imported when called: a spec module loads without
its library, and each kernel of a library that is absent says why it does not run."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import Any

from reference_kernels.thirdparty import EXTRA, PINS

__all__ = ["absent", "needs", "version"]


def absent(dist: str, package: str) -> str | None:
    """Why the library ``dist`` (import name ``package``) cannot run here, or None."""
    if importlib.util.find_spec(package) is not None:
        return None
    pin = PINS.get(dist)
    return (f"the kernel's library {dist} is not installed: pip install 'pallas-verify[{EXTRA}]' "
            f"(it pins {dist}=={pin})" if pin else f"the kernel's library {dist} is not installed")


def needs(dist: str, package: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a kernel function as needing ``dist``: ``kernel.unavailable`` says why it cannot
    run while ``package`` is not importable, which skips its cells (``registry.skip_reason``)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        call.unavailable = absent(dist, package)  # type: ignore[attr-defined]
        return call

    return mark


def version(dist: str) -> str | None:
    """The installed release of ``dist``, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
