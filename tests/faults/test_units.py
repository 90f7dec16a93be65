"""The one rule where units come back (campaigns.units), on scripted executors: what each
failure means, bounded retries, findings sent while a unit runs, and a stop that arrives
in the same poll as a unit's end."""

from __future__ import annotations

import dataclasses
import errno
import io
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pallas_verify.campaigns.units import (
    MAX_ATTEMPTS,
    Found,
    Invalid,
    Lost,
    Reported,
    Skipped,
    Units,
    judge,
)
from pallas_verify.errors import InvalidArgument, InvalidSpec
from pallas_verify.execution import Done, Executor, Failure, Update, Work
from pallas_verify.findings import Finding
from pallas_verify.reports.report import BackendResult, Report


def _raised(exc: BaseException) -> Failure:
    try:
        raise exc
    except BaseException as caught:
        return Failure.of(caught)


def _redis_down() -> Failure:
    redis = pytest.importorskip("redis")
    return _raised(redis.ConnectionError("Error 111 connecting to 127.0.0.1:6391. Connection refused."))


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (lambda: Failure(cause="died", message="killed by signal SIGKILL"), Lost("worker killed", "", 1)),
        (lambda: Failure(cause="node", message="node left"), Lost("node lost", "", 1)),
        (lambda: Failure(cause="overran", message="past 600 s"), Lost("overran", "", 1)),
        (lambda: Failure(cause="executor", message="RaySystemError"), Lost("executor error", "", 1)),
        (lambda: Failure(cause="unplaceable", message="no node offers TPU"), Skipped("no node offers TPU")),
        (_redis_down, Lost("database error", "", 1)),
        (lambda: _raised(OSError(errno.ENOSPC, "No space left on device")), Lost("disk error", "", 1)),
        (lambda: _raised(MemoryError()), Lost("out of memory", "", 1)),
        (lambda: _raised(InvalidArgument("spec file 'k.py' does not exist.")), Lost("setup error", "", 1)),
        (lambda: _raised(InvalidSpec("KernelSpec 'k': inputs must draw a tuple")),
         Invalid("KernelSpec 'k': inputs must draw a tuple")),
        (lambda: _raised(KeyError("oops")), Lost("internal error", "", 1)),
    ],
)
def test_every_way_a_unit_can_fail_has_one_meaning_and_none_is_a_finding(failure: Callable[[], Failure], expected):
    got = judge(failure())
    assert type(got) is type(expected)
    if isinstance(expected, Lost):
        assert got.cause == expected.cause
        assert got.retry == (expected.cause not in ("overran", "internal error"))
    else:
        assert got == expected


class _Scripted(Executor):
    """Each unit's attempts end as scripted: a Failure, or a value (a list: Updates first)."""

    name = "scripted"

    def __init__(self, script: dict[str, list], on_poll: Callable[[], None] | None = None) -> None:
        self.script, self.on_poll = script, on_poll
        self.running_: list[Work] = []
        self.submitted: list[str] = []

    def slots(self) -> int:
        return 2

    def offers(self, hardware: str) -> str | None:
        return None

    def submit(self, work: Work) -> None:
        self.running_.append(work)
        self.submitted.append(work.tag)

    def poll(self, timeout_s: float) -> list[Done | Update]:
        if self.on_poll is not None:
            self.on_poll()
        out: list[Done | Update] = []
        for work in list(self.running_):
            end = self.script[work.tag].pop(0)
            self.running_.remove(work)
            if isinstance(end, Failure):
                out.append(Done(work=work, failure=end, node="n1"))
                continue
            *updates, value = end if isinstance(end, list) else [end]
            out += [Update(work=work, value=u, node="n1") for u in updates]
            out.append(Done(work=work, value=value, node="n1"))
        return out

    def running(self) -> list[Work]:
        return list(self.running_)

    def cancel(self) -> list[Work]:
        stopped, self.running_ = self.running_, []
        return stopped

    def close(self) -> None:
        self.running_ = []


def _shipped(kernel: str, kind: str = "mismatch", files: bool = True) -> dict:
    finding = Finding(kind=kind, kernel=kernel, backend="interpret", message="outputs differ", config={"b": 8},
                      reproducer=f"/elsewhere/{kernel}-{kind}-interpret.py")
    cell = BackendResult(kernel=kernel, backend="interpret", status="fail", reason=kind, examples=2)
    report = Report(backends=["interpret"], findings=[finding], results=[cell],
                    kernels=[{"name": kernel, "features": [], "platforms": []}])
    names = {f"{kernel}-{kind}-interpret.py": b"print(1)\n", f"{kernel}-{kind}-interpret.npz": b"npz"}
    return {"report": report.to_dict(), "files": names if files else {}, "notes": ["a note"]}


def _drain(units: Units, want: int) -> list:
    got = []
    while sum(not isinstance(a.result, Found) for a in got) < want:
        got += units.poll(0)
    return got


def test_a_killed_unit_is_retried_and_a_lost_one_says_how_often(tmp_path):
    died = Failure(cause="died", message="the worker process running the unit was killed by signal SIGKILL")
    executor = _Scripted({"flaky": [died, _shipped("k")], "doomed": [died] * MAX_ATTEMPTS,
                          "slow": [Failure(cause="overran", message="past its limit")]})
    units = Units(executor, tmp_path)
    for tag in ("flaky", "doomed", "slow"):
        units.submit(Work(entry="m:f", kind="slice", tag=tag))
    got = {a.work.tag: a.result for a in _drain(units, 3)}
    assert isinstance(got["flaky"], Reported) and got["flaky"].notes == ("a note",)
    assert got["doomed"] == Lost("worker killed", died.message, MAX_ATTEMPTS)
    assert got["slow"] == Lost("overran", "past its limit", 1)  # not retried: it would overrun again
    assert executor.submitted.count("doomed") == MAX_ATTEMPTS and executor.submitted.count("slow") == 1
    assert [(r["unit"], r["cause"], r["attempt"]) for r in units.retried] == [
        ("flaky", "worker killed", 1), ("doomed", "worker killed", 1), ("doomed", "worker killed", 2)]
    [finding] = got["flaky"].report.findings  # its reproducer now on this host
    assert finding.reproducer.startswith(str(tmp_path.resolve())) and finding.reproducer.endswith("/k-mismatch-interpret.py")
    assert Path(finding.reproducer).read_bytes() == b"print(1)\n"


def test_findings_sent_while_a_unit_runs_arrive_before_its_end_with_their_reproducers(tmp_path):
    sent = _shipped("k")["report"]["findings"][0]
    update = {"finding": {**sent, "evidence": {"provisional": "the first failing example, before shrinking"}},
              "files": {"k-mismatch-interpret.py": b"x", "k-mismatch-interpret.npz": b"y"}}
    executor = _Scripted({"u": [[update, Failure(cause="overran", message="cut")]]})
    units = Units(executor, tmp_path)
    work = Work(entry="m:f", kind="slice", tag="u")
    units.submit(work)
    first, end = _drain(units, 1)
    assert isinstance(first.result, Found) and isinstance(end.result, Lost)
    reproducer = first.result.finding.reproducer
    assert reproducer == str((tmp_path / f"u{work.uid}" / "k-mismatch-interpret.py").resolve())
    assert Path(reproducer).read_bytes() == b"x"


def test_a_reproducer_the_driver_cannot_write_leaves_the_finding_without_one(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    units = Units(_Scripted({"u": [_shipped("k")]}), blocked)
    units.submit(Work(entry="m:f", kind="slice", tag="u"))
    [arrival] = _drain(units, 1)
    [finding] = arrival.result.report.findings
    assert finding.reproducer is None and finding.kind == "mismatch"
    assert units.write_errors and "reproducer k-mismatch-interpret" in units.write_errors[0]


def test_a_unit_ending_in_the_poll_where_a_stop_arrives_is_kept(tmp_path):
    from pallas_verify.campaigns import fuzz
    from pallas_verify.campaigns.fuzzdb import FailureDatabase
    from pallas_verify.campaigns.output import CampaignOutput
    from pallas_verify.campaigns.plan import Cell, FuzzOptions
    from pallas_verify.campaigns.replay import Replays
    from pallas_verify.campaigns.stop import StopOnSignal
    from pallas_verify.reports.progress import Progress

    stop = StopOnSignal()
    cells = [Cell(ref="m:a", kernel="a", backend="interpret"), Cell(ref="m:b", kernel="b", backend="interpret")]
    executor = _Scripted({"a on interpret": [_shipped("a")], "b on interpret": [_shipped("b", files=False)]},
                         on_poll=lambda: setattr(stop, "requested", "SIGTERM"))
    run = fuzz._Run(options=FuzzOptions(out_dir=tmp_path, budget_s=60), base=Report(seed=1, backends=["interpret"]),
                    cells=cells, progress=Progress(io.StringIO(), 60), db=FailureDatabase(tmp_path / "db"), seed=1)
    units = Units(executor, tmp_path / "tmp")
    with CampaignOutput(tmp_path, command="fuzz") as out:
        cancelled = fuzz._loop(run, units, Replays(run.db, 60.0), out, time.monotonic(), stop)
    report = run.assemble(1.0, final=True, units=units, running=cancelled)
    assert run.stop == "SIGTERM" and report.interrupted
    assert sorted(f.kernel for f in report.findings) == ["a", "b"]  # both ended in the poll the stop came in
    assert {r.kernel: r.status for r in report.results} == {"a": "fail", "b": "fail"}
    assert (tmp_path / "report.json").is_file()  # written after that poll already
    assert len(list((tmp_path / "db").glob("*.json"))) == 2


def test_a_provisional_finding_is_replaced_by_the_shrunk_one_and_kept_if_none_comes(tmp_path):
    from pallas_verify.campaigns import fuzz
    from pallas_verify.campaigns.fuzzdb import FailureDatabase
    from pallas_verify.reports.progress import Progress

    stream = io.StringIO()
    run = fuzz._Run(options=fuzz.FuzzOptions(out_dir=tmp_path), base=Report(), cells=[],
                    progress=Progress(stream, 60), db=FailureDatabase(tmp_path / "db"), seed=1)
    early = Finding(kind="timeout", kernel="k", backend="interpret", message="did not finish in 4.1 s",
                    evidence={"provisional": "the first failing example, before shrinking"})
    run.keep(early, provisional=True)
    run.keep(Finding(kind="timeout", kernel="k", backend="interpret", message="did not finish in 4.0 s"))
    [kept] = run.kept.values()
    assert "provisional" not in kept.evidence and kept.message.endswith("4.0 s")
    assert stream.getvalue().count("[timeout] k on interpret") == 1  # one finding, said once
    run.keep(dataclasses.replace(early, kind="mismatch"), provisional=True)  # no shrunk one follows
    assert [f.kind for f in run.kept.values()] == ["timeout", "mismatch"]
    assert len(list((tmp_path / "db").glob("*.json"))) == 2


def test_a_conformance_unit_lost_to_the_infrastructure_leaves_its_cells_not_reached_never_failed(tmp_path):
    from pallas_verify.campaigns.conformance import run_conformance
    from pallas_verify.exits import campaign_status
    from pallas_verify.loader import load_spec

    mutants = "reference_kernels.mutants.grid:"
    died = Failure(cause="died", message="the worker process running the unit was killed by signal SIGKILL")
    executor = _Scripted({"block_copy": [died] * MAX_ATTEMPTS, "rotated_index_map": [_shipped("rotated_index_map")]})
    written: list[Report] = []
    report = run_conformance([load_spec(mutants + "block_copy_spec"), load_spec(mutants + "rotated_index_map_spec")],
                             backends="interpret", out_dir=tmp_path, progress=lambda _: None, executor=executor,
                             write=written.append)
    cells = {r.kernel: r for r in report.results}
    assert cells["block_copy"].status == "not_reached"
    assert cells["block_copy"].reason.startswith("its unit was lost (worker killed, 3 attempts): ")
    assert cells["rotated_index_map"].status == "fail"
    assert [f.kernel for f in report.findings] == ["rotated_index_map"]  # nothing charged to block_copy
    assert [u["cause"] for u in report.run["lost"]] == ["worker killed"] and len(report.run["retried"]) == 2
    assert campaign_status(report) == 1
    assert written and written[-1].run["finished"] is False  # a report after every unit
