"""`conformance --seed`: one seed reaches every kernel's search, in this process and in
units of work, and the report records it (0 under the derandomized ci profile)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pallas_verify import engine
from pallas_verify.campaigns import units
from pallas_verify.campaigns.conformance import run_conformance
from pallas_verify.cli_args import parser
from pallas_verify.execution import Done, Executor, Work
from pallas_verify.loader import load_spec

SPEC = str(Path(__file__).parents[1] / "execution" / "portable_add.py") + "::ADD_ONE"


class _InProcess(Executor):
    """Runs each unit's entry here, at the next poll: the real unit, without a worker."""

    name = "inprocess"

    def __init__(self) -> None:
        self.running_: list[Work] = []

    def slots(self) -> int:
        return 1

    def offers(self, hardware: str) -> str | None:
        return None

    def submit(self, work: Work) -> None:
        self.running_.append(work)

    def poll(self, timeout_s: float) -> list[Done]:
        done, self.running_ = self.running_, []
        return [Done(work=w, value=units.run_spec(w), node="here") for w in done]

    def running(self) -> list[Work]:
        return list(self.running_)

    def cancel(self) -> list[Work]:
        stopped, self.running_ = self.running_, []
        return stopped

    def close(self) -> None:
        self.running_ = []


@pytest.fixture
def seeds(monkeypatch) -> list[Any]:
    """The seed every verify of the run was called with."""
    seen: list[Any] = []
    real = engine.verify

    def spy(spec, backends=None, max_examples=None, seed=None, **kw):
        seen.append(seed)
        return real(spec, backends, max_examples, seed, **kw)

    monkeypatch.setattr(engine, "verify", spy)
    return seen


@pytest.mark.parametrize("executor", [None, _InProcess], ids=["here", "units"])
def test_the_given_seed_reaches_every_search_and_the_report(tmp_path, seeds, executor):
    report = run_conformance([load_spec(SPEC)], backends="interpret", max_examples=1, out_dir=tmp_path,
                             progress=lambda _: None, seed=1234, executor=executor and executor())
    assert seeds == [1234]
    assert report.seed == 1234 and report.to_dict()["seed"] == 1234
    assert [r.status for r in report.results] == ["pass"]


def test_without_a_seed_ci_runs_seed_zero_and_says_so(tmp_path, seeds):
    report = run_conformance([load_spec(SPEC)], backends="interpret", max_examples=1, out_dir=tmp_path,
                             progress=lambda _: None)
    assert seeds == [0] and report.seed == 0


def test_the_command_takes_a_seed():
    args = parser().parse_args(["conformance", "--seed", "7"])
    assert args.seed == 7
    assert parser().parse_args(["conformance"]).seed is None
