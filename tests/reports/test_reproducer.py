"""write_reproducer writes a script and its inputs; the script (run here, in-process)
exits 1 while the finding shows, 0 once the kernel is fixed, 3 when the case cannot run."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from pallas_verify.findings import Finding
from pallas_verify.reports.casefile import load_case
from pallas_verify.reports.reproducer import (
    EXIT_CANNOT_RUN,
    EXIT_FIXED,
    EXIT_REPRODUCES,
    write_reproducer,
)

SPECS = Path(__file__).with_name("_reproduce_specs.py")
X = np.arange(8, dtype=np.float32)
CONFIG = {"scale": np.float32(2.0)}  # written into the script as np.float32(2.0)
FINDING = Finding(kind="mismatch", kernel="twice", backend="interpret", message="outputs differ from the reference",
                  config=CONFIG)


def _write(tmp_path: Path, spec: str | None, finding: Finding = FINDING) -> Path:
    written = write_reproducer(finding, {"inputs": (X,)}, f"{SPECS}::{spec}" if spec else None, tmp_path)
    assert written.reproducer is not None
    return Path(written.reproducer)


def _exit_status(script: Path) -> int:
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(script), run_name="__main__")
    return done.value.code


def test_the_script_and_its_inputs_are_written_beside_each_other(tmp_path):
    script = _write(tmp_path, "wrong")
    assert script.name == "twice-mismatch-interpret.py" and script.is_file()
    inputs, config = load_case(script.with_suffix(".npz"))
    assert inputs[0].tobytes() == X.tobytes() and config is None  # the config is in the script
    text = script.read_text()
    assert "CONFIG = {'scale': np.float32(2.0)}" in text
    assert "mismatch in kernel 'twice' on backend interpret" in text
    assert f"SPEC = '{SPECS}::wrong'" in text


def test_the_reproducer_exits_one_while_the_bug_shows(tmp_path, capsys):
    assert _exit_status(_write(tmp_path, "wrong")) == EXIT_REPRODUCES
    assert "[mismatch] twice on interpret: outputs differ from the reference" in capsys.readouterr().out


def test_the_reproducer_exits_zero_once_the_kernel_is_fixed(tmp_path, capsys):
    assert _exit_status(_write(tmp_path, "right")) == EXIT_FIXED
    assert "mismatch no longer reproduces for 'twice' on interpret." in capsys.readouterr().out


def test_another_finding_on_the_fixed_case_still_reproduces(tmp_path, capsys):
    race = Finding(kind="race", kernel="twice", backend="interpret", message="data race", config=CONFIG)
    assert _exit_status(_write(tmp_path, "wrong", race)) == EXIT_REPRODUCES
    assert "race no longer reproduces for 'twice' on interpret, but the case still fails (mismatch)" in (
        capsys.readouterr().out)


@pytest.mark.parametrize(("spec", "says"), [
    ("judged_by_a_raising_reference", "the reference fails on it, so mismatch on interpret cannot be judged"),
    ("no_such_spec", "cannot run this case: InvalidArgument"),
    (None, "this reproducer has no spec reference"),
])
def test_a_case_that_cannot_run_exits_three_never_zero(tmp_path, capsys, spec, says):
    assert _exit_status(_write(tmp_path, spec)) == EXIT_CANNOT_RUN
    assert says in capsys.readouterr().out


def test_missing_inputs_cannot_run(tmp_path, capsys):
    script = _write(tmp_path, "wrong")
    script.with_suffix(".npz").unlink()
    assert _exit_status(script) == EXIT_CANNOT_RUN
    assert "cannot run this case: " in capsys.readouterr().out


def test_reproducers_written_before_replay_moved_still_import_it():
    from pallas_verify.campaigns.replay import reproduce
    from pallas_verify.reports.reproduce import reproduce as written_before

    assert written_before is reproduce


def test_a_copy_under_another_name_runs_as_written(tmp_path):
    script = _write(tmp_path, "wrong")
    copy = tmp_path / "db" / "elsewhere-1234.py"
    copy.parent.mkdir()
    copy.write_bytes(script.read_bytes())  # as the failure database keeps it: no rewriting
    copy.with_suffix(".npz").write_bytes(script.with_suffix(".npz").read_bytes())
    assert script.stem not in copy.read_text()
    assert _exit_status(copy) == EXIT_REPRODUCES
