"""Process environment that must be set before jax is imported."""

from __future__ import annotations

__all__ = ["configure"]


def configure() -> None:
    """CPU-first, quiet defaults when no accelerator is attached; the user's settings win.

    See ``backends.families.jax_env_defaults``: with no TPU or GPU on this host jax runs on
    the CPU (the interpreters, libtpu's compile-only devices and the CUDA plugin's
    deviceless compiles all still work); with one attached nothing is forced.
    """
    from pallas_verify.backends.families import apply_jax_env_defaults

    apply_jax_env_defaults()
