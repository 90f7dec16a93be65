"""The CLI's help names the choices its tables hold, never a retyped list."""

from __future__ import annotations

import pytest

from pallas_verify import cli
from pallas_verify.choices import PROFILES  # the table the engine's profiles are made from


@pytest.mark.parametrize("command", ["verify", "conformance", "demo"])
def test_profile_help_lists_every_profile_of_the_table(command, capsys, monkeypatch):
    monkeypatch.setitem(PROFILES, "deep_test_only", PROFILES["dev"])
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Hypothesis profile: " + ", ".join(PROFILES) in text


def test_plugin_help_lists_the_profiles_and_isolation_choices_of_the_tables(pytester):
    from pallas_verify import choices

    result = pytester.runpytest_subprocess("--help")  # the pytest11 entry point loads the plugin
    text = " ".join(result.stdout.str().split())
    for name in (*choices.PROFILES, *choices.ISOLATE):
        assert f"{name} (" in text, name
    assert "|".join(choices.ISOLATE) in text
