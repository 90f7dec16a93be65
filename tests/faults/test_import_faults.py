"""Spec files that exit, abort or hang when imported: one line naming each, exit 2, and
the other files still run; the driver (fuzz, verify) is never taken down."""

from __future__ import annotations

import pytest

from benchmarks import faultcases
from benchmarks.faultkit import Tagged, run_cli


@pytest.mark.slow
def test_fuzz_names_each_broken_file_and_runs_the_others(staged):
    outcome = staged(faultcases.broken_spec_files)
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("pallas-verify: error:")]
    assert any("exits.py' exited with status 3" in e for e in errors)
    assert any("aborts.py' was killed by signal SIGABRT" in e for e in errors)
    assert any("hangs_at_import.py' did not finish importing" in e for e in errors)
    assert {i["target"] for i in outcome.report["invalid_specs"]} == set(faultcases.BAD_IMPORTS)
    assert outcome.exit == 2


@pytest.mark.parametrize(("name", "said"), [("exits.py", "exited with status 3"),
                                            ("aborts.py", "was killed by signal SIGABRT")])
def test_verify_of_a_file_that_dies_at_import_is_a_usage_error_in_one_line(tmp_path, name, said):
    (tmp_path / name).write_text(faultcases.BAD_IMPORTS[name])
    tag = Tagged()
    run = run_cli(["verify", name, "--backends", "interpret"], cwd=tmp_path, env=tag.env())
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2, run.stderr
    assert lines == [f"pallas-verify: error: spec file {name!r} {said}" + lines[0].split(said, 1)[1]]
    assert not tag.orphans()
