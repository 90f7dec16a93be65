"""The choices the front ends offer (CLI and pytest plugin), as plain data.

Cheap to import (neither jax nor hypothesis), so option help can list the choices from
the one table the engine uses.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["DEMO_KERNELS", "ISOLATE", "PROFILES", "derandomized", "describe", "repeats", "run_seed"]

#: Hypothesis settings profile -> (what it is for, its budget: settings keyword arguments).
PROFILES: dict[str, tuple[str, dict[str, Any]]] = {
    "dev": ("default: a fresh search each run", {"max_examples": 20}),
    "ci": ("deterministic", {"max_examples": 10, "derandomize": True, "print_blob": True}),
    "nightly": ("deep", {"max_examples": 200}),
}

#: What ``pallas-verify demo`` (``make demo``) verifies: a ragged elementwise kernel, a tiled
#: matmul with an accumulator, a row softmax, a portable kernel (TPU and GPU backends) and a
#: plgpu.kernel with barriers (GPU interpret mode, Mosaic GPU): a few seconds per backend each.
DEMO_KERNELS = ("ragged_add", "matmul_f32", "softmax", "scale_shift", "gpu_barrier_affine")

#: Where cases run -> what it means.
ISOLATE: dict[str, str] = {
    "auto": "in worker processes whenever the spec can be loaded by reference (a module-level spec)",
    "always": "always in worker processes (the spec must be loadable by reference)",
    "never": "in this process, except for compilers that may abort",
}


def describe(table: dict[str, Any]) -> str:
    """``name (what it is), ...`` for option help."""
    return ", ".join(f"{name} ({value[0] if isinstance(value, tuple) else value})" for name, value in table.items())


def derandomized(profile: str | None) -> bool:
    """Whether ``profile`` draws the same examples every run (ci)."""
    return profile is not None and bool(PROFILES.get(profile, ("", {}))[1].get("derandomize"))


def repeats(seed: int | None, profile: str | None) -> bool:
    """Whether a run given ``seed`` (None: none given) under ``profile`` draws the same
    examples as every other such run: a seed given, or a derandomized profile."""
    return seed is not None or derandomized(profile)


def run_seed(seed: int | None, profile: str | None = None) -> int:
    """The seed of a run, one policy for every front end and campaign: the one given; 0
    under a derandomized ``profile`` (ci: the same run every time); else a fresh random
    one. Printed and recorded, it repeats the search."""
    if seed is not None:
        return seed
    if derandomized(profile):
        return 0
    return random.SystemRandom().randrange(2**32)
