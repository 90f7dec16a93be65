"""The JAX release in report.json: written by every run (without importing jax for it),
kept when a report is read back, and absent from reports written before it."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from pallas_verify.reports.report import Report, running_jax_version


def test_a_report_says_the_jax_release_it_ran_on_and_keeps_its_own_when_read_back():
    assert Report().to_dict()["jax_version"] == running_jax_version() == importlib.metadata.version("jax")
    data = {**Report().to_dict(), "jax_version": "0.10.2"}
    assert Report.from_dict(json.loads(json.dumps(data))).to_dict()["jax_version"] == "0.10.2"


def test_a_report_written_before_the_key_still_reads():
    data = Report().to_dict()
    del data["jax_version"]
    report = Report.from_dict(data)
    assert report.jax_version is None and report.to_dict()["jax_version"] == running_jax_version()


def test_writing_a_report_does_not_import_jax():
    code = ("import sys; from pallas_verify.reports.report import Report; v = Report().to_dict()['jax_version']; "
            "print(v, 'jax' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [importlib.metadata.version("jax"), "False"]
