"""Output written as the run goes: an unusable --out refused before any work, one
campaign per folder, and a disk that fills mid-run keeps the report written before."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import faultcases


@pytest.mark.parametrize("name", ["out_read_only", "out_full", "out_dev_null"])
def test_an_output_folder_that_cannot_take_the_report_is_refused_in_one_line(staged, name):
    outcome = staged(faultcases.CASES[name])
    [line] = outcome.stderr.strip().splitlines()
    assert line.startswith("pallas-verify: error: --out ")
    assert outcome.seconds < 30  # before any search: no budget spent


@pytest.mark.slow
def test_a_second_campaign_on_the_folder_of_a_running_one_refuses(staged):
    outcome = staged(faultcases.two_campaigns)
    [line] = outcome.stderr.strip().splitlines()
    assert "is in use by another campaign (pid " in line and "pallas-verify fuzz" in line


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_keeps_the_last_report_and_every_finding(staged):
    outcome = staged(faultcases.disk_full_mid_run)
    assert outcome.stderr.count("cannot write the report") == 1  # said once, not after every unit
    if "output_error" in outcome.final["run"]:  # full to the end: the report on disk is the last one written
        assert outcome.final["run"]["output_error"] == "No space left on device"
        assert outcome.report["run"]["finished"] is False
    else:  # the run freed its own scratch space at the end, and the final report went in
        assert "is written again" in outcome.stderr and outcome.report["run"]["finished"] is True
    assert outcome.exit == 1  # findings first, whether or not the last write went through


def test_the_lock_is_released_when_its_holder_exits_however_it_exits(tmp_path: Path):
    import subprocess
    import sys

    from pallas_verify.campaigns.output import CampaignOutput
    from pallas_verify.errors import InvalidArgument

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from pallas_verify.campaigns.output import CampaignOutput\n"
                               f"CampaignOutput({str(tmp_path)!r}, command='fuzz').__enter__()\n"
                               "print('held', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(InvalidArgument, match=f"is in use by another campaign \\(pid {holder.pid}: pallas-verify fuzz"):
        CampaignOutput(tmp_path, command="fuzz").__enter__()
    holder.kill()  # SIGKILL: no clean-up ran
    holder.wait()
    holder.stdout.close()
    with CampaignOutput(tmp_path, command="conformance") as out:
        assert out.write.__self__ is out
