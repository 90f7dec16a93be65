"""Process environment that must be set before jax is imported, and where the user's
caches live.

The persistent compilation cache (``_jax_compat.compile_cache``) is switched by one
variable, ``PALLAS_VERIFY_COMPILE_CACHE``, which worker processes inherit: unset (or
empty) for the default folder under the user's cache directory, a folder to keep it
there, or ``off`` (``0``, ``false``, ``no``) for none. ``--no-compile-cache`` (the CLI)
and ``--pv-no-compile-cache`` (the pytest plugin) set it to ``off`` for the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["COMPILE_CACHE_ENV", "cache_folder", "compile_cache_root", "configure", "disable_compile_cache", "turned_off",
           "user_cache_dir"]

#: The variable that places the persistent compilation cache, or turns it off.
COMPILE_CACHE_ENV = "PALLAS_VERIFY_COMPILE_CACHE"
_OFF = frozenset({"0", "off", "false", "no"})


def configure() -> None:
    """CPU-first, quiet defaults when no accelerator is attached; the user's settings win.

    See ``backends.families.jax_env_defaults``: with no TPU or GPU on this host jax runs on
    the CPU (the interpreters, libtpu's compile-only devices and the CUDA plugin's
    deviceless compiles all still work); with one attached nothing is forced.
    """
    from pallas_verify.backends.families import apply_jax_env_defaults

    apply_jax_env_defaults()


def user_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """pallas-verify's folder in the user's cache directory: ``$XDG_CACHE_HOME/pallas-verify``
    (default ``~/.cache/pallas-verify``)."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pallas-verify"


def turned_off(value: str | None) -> bool:
    """Whether a switch variable's value says off (``0``, ``off``, ``false``, ``no``)."""
    return (value or "").strip().lower() in _OFF


def cache_folder(variable: str, default: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The folder a cache variable places its cache in: unset or empty for ``default``, a
    folder, or off (``turned_off``) for None."""
    value = environ.get(variable, "").strip()
    if turned_off(value):
        return None
    return Path(value).expanduser() if value else default


def compile_cache_root(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the persistent compilation cache lives (``COMPILE_CACHE_ENV``; default the user's
    cache folder, ``user_cache_dir``), None when it is off. The JAX release and the machine
    get a folder of their own below it (``_jax_compat.compile_cache``)."""
    return cache_folder(COMPILE_CACHE_ENV, user_cache_dir(environ), environ)


def disable_compile_cache() -> None:
    """No persistent compilation cache in this process or in the workers it starts from now on."""
    os.environ[COMPILE_CACHE_ENV] = "off"
