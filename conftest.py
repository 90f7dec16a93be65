"""Repo-wide pytest configuration: environment before jax, Hypothesis profiles."""

from __future__ import annotations

import os

from pallas_verify._env import configure

configure()  # before anything imports jax

from hypothesis import HealthCheck, settings  # noqa: E402

pytest_plugins = ["pytester"]  # the plugin's own tests run pytest inside pytest

# The project's own tests: deterministic in CI, a little more exploratory locally.
settings.register_profile(
    "pv-ci", max_examples=10, derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large),
)
settings.register_profile(
    "pv-dev", max_examples=20, deadline=None,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large),
)
settings.load_profile("pv-ci" if os.environ.get("CI") else os.environ.get("PV_TEST_PROFILE", "pv-dev"))
