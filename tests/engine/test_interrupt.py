"""Stopping verify (Ctrl-C, SIGTERM): what finished is kept, the rest is marked interrupted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pallas_verify.engine import verify
from pallas_verify.interrupts import Interrupted
from pallas_verify.loader import load_spec
from pallas_verify.reports.live import LiveProgress

SPECS = Path(__file__).with_name("_specs.py")
STOPPING = Path(__file__).parents[1] / "cli" / "_interrupt_specs.py"


class _StopAt(LiveProgress):
    """Progress that presses Ctrl-C at a chosen moment of the search."""

    def __init__(self, when) -> None:
        super().__init__(sys.stderr)
        self.when = when

    def tick(self, cell, *, examples, max_examples, shrink_steps, failing=()):
        if self.when(examples=examples, shrink_steps=shrink_steps, failing=failing):
            raise KeyboardInterrupt


def test_a_stop_while_shrinking_keeps_the_failure_seen_with_its_reproducer(tmp_path):
    spec = load_spec(f"{SPECS}::off_by_one")
    stop = _StopAt(lambda failing, shrink_steps, **_: bool(failing) and shrink_steps >= 2)
    with pytest.raises(Interrupted) as info:  # a budget of 8: shrinking goes on past it (a budget of 30 it ends within)
        verify(spec, ["interpret", "tpu_interpret"], max_examples=8, profile="ci", out_dir=tmp_path, progress=stop)
    report = info.value.report
    assert info.value.signame == "SIGINT" and report.interrupted
    [finding] = report.findings
    assert finding.kind == "mismatch" and Path(finding.reproducer).is_file()
    assert "interrupted by SIGINT" in finding.evidence["shrink_stopped"]
    cells = {r.backend: (r.status, r.reason) for r in report.results}
    assert cells["interpret"] == ("fail", "mismatch")
    assert cells["tpu_interpret"] == ("interrupted", "stopped by SIGINT before this backend ran")


def test_a_stop_before_any_failure_marks_the_cell_interrupted_with_its_examples(tmp_path):
    spec = load_spec(f"{SPECS}::good")
    with pytest.raises(Interrupted) as info:
        verify(spec, ["interpret"], max_examples=30, profile="ci", out_dir=tmp_path,
               progress=_StopAt(lambda examples, **_: examples >= 2))
    [cell] = info.value.report.results
    assert (cell.status, cell.examples) == ("interrupted", 2)
    assert info.value.report.findings == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_verify_keeps_the_finished_cells_and_exits_130(tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-m", "pallas_verify.cli", "verify", str(STOPPING), "--backends",
                             "interpret", "--max-examples", "8", "--seed", "1", "--out", "out", "--json", "r.json"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    deadline = time.monotonic() + 300
    while not any(line.startswith("quick on interpret: PASS") for line in seen) and time.monotonic() < deadline:
        seen.append(proc.stderr.readline())  # a line per finished cell, as it finishes
    time.sleep(2.0)  # into the slow spec's search
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report == json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["interrupted"] is True
    cells = {k["name"]: k["results"]["interpret"] for k in report["kernels"]}
    assert cells["quick"]["status"] == "pass" and cells["quick"]["examples"] == 8
    assert cells["slow"]["status"] == "interrupted"
    assert f"stopped by {sig.name}" in cells["slow"]["reason"]
    assert "quick\n  interpret              PASS" in out  # the text summary
    assert "Traceback" not in err
