"""The smith campaign: its budget, its progress lines, Ctrl-C, the time of its findings."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pallas_verify.campaigns.smith.campaign import SmithOptions, _Campaign, smith
from pallas_verify.campaigns.smith.record import SmithRun
from pallas_verify.exits import EXIT_INTERRUPTED
from pallas_verify.findings import Finding
from pallas_verify.reports.progress import Progress
from pallas_verify.reports.report import BackendResult, Report

from .test_recheck import _MASKED


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_budget_is_kept_and_each_batch_prints_a_line(tmp_path: Path) -> None:
    stream = io.StringIO()
    started = time.monotonic()
    run = smith(SmithOptions(backends=("interpret",), budget_s=1.0, out_dir=tmp_path, seed=0, isolate="never",
                             slice_examples=2), stream=stream)
    assert time.monotonic() - started < 1.0 + 5.0  # the case running at the end finishes; nothing more starts
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("pallas-verify smith: seed=0, backends interpret, budget 1 s")
    batches = [line for line in lines if " batch of " in line]
    assert batches and run.programs >= 1
    assert batches[-1].endswith(f"| {run.programs} programs, validity 100.0%, 0 findings")
    assert "\r" not in stream.getvalue()  # piped: no status line


def _campaign(tmp_path: Path, stream: io.StringIO) -> _Campaign:
    run = SmithRun(report=Report(backends=["interpret"]))
    return _Campaign(options=SmithOptions(backends=("interpret",), budget_s=60.0, out_dir=tmp_path), run=run,
                     spec=None, backends=["interpret"], seed=0, progress=Progress(stream, 60.0))


def test_a_terminal_gets_a_status_line(tmp_path: Path) -> None:
    stream = _Terminal()
    camp = _campaign(tmp_path, stream)
    camp.run.cells["interpret"] = BackendResult(kernel="smith", backend="interpret", status="pass", examples=7)
    camp.show()
    assert stream.getvalue().startswith("\r[")
    assert "programs per backend: interpret 7 |" in stream.getvalue()
    plain = io.StringIO()
    _campaign(tmp_path, plain).show()
    assert plain.getvalue() == ""


def test_a_finding_is_timed_from_the_start_of_the_campaign(tmp_path: Path) -> None:
    camp = _campaign(tmp_path, io.StringIO())
    (tmp_path / "tmp").mkdir()
    finding = Finding(kind="mismatch", kernel="smith", backend="interpret", message="outputs differ",
                      config={"program": _MASKED}, elapsed_s=1.5, evidence={"recheck": "reproduces"})
    part = Report(findings=[finding], results=[BackendResult(kernel="smith", backend="interpret", status="fail",
                                                             examples=3, seconds=2.0)])
    camp.fold({"report": part.to_dict(), "files": {}, "started": camp.wall + 10.0, "coverage": {}, "noise": []})
    (found,) = camp.run.report.findings
    assert found.elapsed_s == pytest.approx(11.5)  # the batch began 10 s into the campaign
    assert "[mismatch] on interpret after 11.5 s (reproduces)" in camp.progress.stream.getvalue()


@pytest.mark.slow
def test_sigint_keeps_what_was_found_and_exits_130(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pallas_verify.cli", "smith", "--budget", "5m", "--backends", "interpret",
               "--out", str(tmp_path), "--seed", "0", "--workers", "1", "--slice-examples", "2"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if " batch of " in line:
            break
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, "".join(lines) + rest
    assert time.monotonic() - sent < 30
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["interrupted"] is True and data["programs"] >= 2
    assert "SIGINT: stopping" in rest and "(interrupted)" in rest


def test_a_batch_whose_worker_died_is_a_lost_batch_not_a_report() -> None:
    from pallas_verify.campaigns.smith.campaign import _batch_result
    from pallas_verify.execution import Done, Failure, Work

    work = Work(entry="pallas_verify.campaigns.smith.batch:run_unit", kind="slice")
    died = _batch_result(Done(work=work, failure=Failure(cause="died", message="worker killed by signal SIGKILL")))
    assert died == {"kind": "died", "error": "worker killed by signal SIGKILL"}
    assert _batch_result(Done(work=work, value={"report": {}}))["report"] == {}
    assert _batch_result(Done(work=work, value=None))["kind"] == "internal error"
