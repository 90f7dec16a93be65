"""The engine's Hypothesis profiles and the project's own test profiles share budgets."""

from __future__ import annotations

import pytest
from hypothesis import Verbosity

from pallas_verify.errors import InvalidArgument
from pallas_verify.profiles import PROFILES, suite_settings


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_suite_settings_share_the_profile_budget_but_not_its_quiet(name):
    engine, suite = PROFILES[name], suite_settings(name)
    for attribute in ("max_examples", "derandomize", "deadline", "suppress_health_check", "print_blob"):
        assert getattr(suite, attribute) == getattr(engine, attribute), attribute
    assert engine.verbosity == Verbosity.quiet
    assert suite.verbosity != Verbosity.quiet


def test_ci_is_deterministic_without_an_example_database():
    for ci in (PROFILES["ci"], suite_settings("ci")):
        assert (ci.derandomize, ci.database) == (True, None)


def test_suite_settings_name_the_profiles_for_a_bad_name():
    with pytest.raises(InvalidArgument, match=r"profile='cii' is not one of \('dev', 'ci', 'nightly'\)"):
        suite_settings("cii")
