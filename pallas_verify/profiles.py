"""Hypothesis settings profiles: dev (default), ci (deterministic), nightly (deep)."""

from __future__ import annotations

from hypothesis import HealthCheck, Verbosity, settings

__all__ = ["PROFILES", "profile_settings"]

_COMMON = {
    "deadline": None,
    "verbosity": Verbosity.quiet,
    "report_multiple_bugs": True,
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.data_too_large),
}
PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=20, **_COMMON),
    "ci": settings(max_examples=10, derandomize=True, database=None, print_blob=True, **_COMMON),
    "nightly": settings(max_examples=200, **_COMMON),
}


def profile_settings(name: str) -> settings:
    """The named profile; InvalidArgument listing the profiles otherwise."""
    from pallas_verify.errors import InvalidArgument, closest

    if name not in PROFILES:
        raise InvalidArgument(f"profile={name!r} is not one of {tuple(PROFILES)}." + closest(name, PROFILES))
    return PROFILES[name]
