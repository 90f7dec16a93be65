"""Databases degrade, never poison: Redis killed mid-campaign, a corrupt failure-database
entry, a replay that cannot run night after night."""

from __future__ import annotations

import pytest

from benchmarks import faultcases

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("redis")]


def test_redis_killed_mid_campaign_charges_nothing_to_a_kernel(staged):
    pytest.importorskip("redis", reason="the 'cluster' extra (redis) is not installed")
    outcome = staged(faultcases.redis_killed, next_night=False)
    assert not [f for f in outcome.report["findings"] if f["kind"] == "exception"]
    [note] = [n for n in outcome.report["run"]["notes"] if "unreachable" in n]
    assert "[3 units]" in note  # said once for the run, with how many units it concerned
    assert outcome.stderr.count("unreachable") == 1


def test_a_corrupt_entry_is_quarantined_and_an_unrunnable_replay_retired(staged):
    outcome = staged(faultcases.failure_db_entries)
    notes = outcome.report["run"]["notes"]
    assert any("moved garbage-mismatch-interpret-00000000.json aside" in n and "JSONDecodeError" in n for n in notes)
    assert any("retired block_copy-crash-interpret-11111111.json" in n and "3 nights in a row" in n for n in notes)
    assert ("crash", "block_copy") not in outcome.found()
