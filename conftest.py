"""Repo-wide pytest configuration: environment before jax, Hypothesis profiles."""

from __future__ import annotations

import os

from pallas_verify._env import configure

configure()  # before anything imports jax

from hypothesis import settings  # noqa: E402

from pallas_verify.profiles import suite_settings  # noqa: E402

pytest_plugins = ["pytester"]  # the plugin's own tests run pytest inside pytest

# The project's own tests: the engine's ci and dev budgets (deterministic in CI, a little
# more exploratory locally), with Hypothesis's own output and example database.
settings.register_profile("pv-ci", suite_settings("ci"))
settings.register_profile("pv-dev", suite_settings("dev"))
settings.load_profile("pv-ci" if os.environ.get("CI") else os.environ.get("PV_TEST_PROFILE", "pv-dev"))
