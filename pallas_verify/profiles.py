"""Hypothesis settings profiles: dev (default), ci (deterministic), nightly (deep).

The engine searches a kernel with ``PROFILES``; the project's own tests (conftest.py's
``pv-dev`` and ``pv-ci``) use ``suite_settings``: the same budgets and search rules, but
Hypothesis prints its falsifying examples there (the engine reports findings itself, so it
keeps Hypothesis quiet).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings

from pallas_verify import choices

__all__ = ["NO_EXPLAIN", "PROFILES", "profile_settings", "suite_settings"]

# Every search: kernels are slow to trace and their inputs large.
_SEARCH: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.data_too_large),
}
# Per profile: how many examples, and whether they are the same every run (choices.py).
_BUDGETS: dict[str, dict[str, Any]] = {name: budget for name, (_, budget) in choices.PROFILES.items()}
#: Every Hypothesis phase but explain, which after shrinking reruns the test on random
#: variants of the minimal failing example to say which parts of it matter.
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)
# The engine's searches only. No explain phase: after shrinking, it reruns the test on
# random variants of the minimal failing example to say which parts of it matter, a kernel
# run each, until the shrink budget is spent; the engine reports its findings itself and
# never shows that explanation.
_ENGINE: dict[str, Any] = {"verbosity": Verbosity.quiet, "report_multiple_bugs": True,
                           "phases": NO_EXPLAIN}

PROFILES: dict[str, settings] = {name: settings(**budget, **_SEARCH, **_ENGINE) for name, budget in _BUDGETS.items()}


def profile_settings(name: str) -> settings:
    """The named profile; InvalidArgument listing the profiles otherwise."""
    from pallas_verify.errors import InvalidArgument, closest

    if name not in PROFILES:
        raise InvalidArgument(f"profile={name!r} is not one of {tuple(PROFILES)}." + closest(name, PROFILES))
    return PROFILES[name]


def suite_settings(name: str) -> settings:
    """The profile ``name``'s budget and search rules for the project's own tests."""
    profile_settings(name)  # the same check and message for a bad name
    return settings(**_BUDGETS[name], **_SEARCH)
