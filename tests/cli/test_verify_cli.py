"""`pallas-verify verify` and `backends`: exit codes 0/1/2, one-line reasons, the JSON report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SPECS = Path(__file__).parents[1] / "engine" / "_specs.py"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pallas_verify.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_clean_spec_exits_zero_and_writes_the_json_report(tmp_path):
    run = cli("verify", f"{SPECS}::good", "--backends", "interpret", "--max-examples", "2",
              "--json", "r.json", "--out", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["findings"] == []
    assert report["backends"] == ["interpret"]
    assert report["kernels"][0]["name"] == "scale_add"
    assert report["kernels"][0]["results"]["interpret"]["status"] == "pass"
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == report  # --out gets the report too
    assert (tmp_path / "out" / "report.html").is_file()


def test_buggy_spec_exits_one_with_a_mismatch_finding_and_reproducer(tmp_path):
    # Unshrunk (shrinking is tests/cli/test_cli_hygiene.py's): the first failing example's finding.
    run = cli("verify", f"{SPECS}::off_by_one", "--backends", "interpret", "--max-examples", "20",
              "--seed", "3", "--shrink-budget", "0", "--json", "r.json", "--out", "out", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    [finding] = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert {"kind", "kernel", "backend", "message", "config", "elapsed_s", "reproducer"} <= finding.keys()
    assert finding["kind"] == "mismatch" and finding["kernel"] == "scale_add_off_by_one"
    assert Path(finding["reproducer"]).is_file() and Path(finding["reproducer"]).with_suffix(".npz").is_file()
    assert "reproduce: python" in run.stdout


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["verify", "no_such_file.py::spec"], "spec file 'no_such_file.py' does not exist"),
        (["verify", f"{SPECS}::nope"],
         "has no attribute 'nope' and no KernelSpec named so; its KernelSpecs: good (name 'scale_add')"),
        (["verify", f"{SPECS}::good", "--backends", "interprit"], "Did you mean 'interpret'"),
        (["verify", f"{SPECS}::good", "--max-examples", "0"], "max_examples=0 must be a positive integer"),
        (["verify", f"{SPECS}::bad_inputs", "--backends", "interpret"], "inputs must draw a tuple"),
        (["verify", f"{SPECS}::good", "--profile", "weekly"], "profile='weekly' is not one of"),
    ],
)
def test_usage_errors_and_invalid_specs_exit_two_with_a_one_line_reason(tmp_path, args, reason):
    run = cli(*args, "--out", "out", cwd=tmp_path)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pallas-verify: error: ")
    assert reason in lines[0]


def test_argparse_usage_error_exits_two(tmp_path):
    assert cli("verify", cwd=tmp_path).returncode == 2


def test_backends_lists_every_backend_with_its_availability(tmp_path):
    run = cli("backends", cwd=tmp_path)
    assert run.returncode == 0
    lines = run.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert names[:3] == ["interpret", "tpu_interpret", "gpu_interpret"]
    assert {"mosaic_tpu:v5e", "triton:h100", "mosaic_gpu:b200"} <= set(names)
    assert all("available" in line for line in lines)


def test_a_target_may_name_the_spec_by_its_name_field_as_every_output_does():
    from pallas_verify.errors import InvalidSpec
    from pallas_verify.loader import load_specs, spec_ref

    [spec] = load_specs(f"{SPECS}::scale_add_off_by_one")  # the variable is off_by_one
    assert spec.name == "scale_add_off_by_one"
    assert spec_ref(spec) == f"{SPECS.resolve()}::off_by_one"  # workers and reproducers load the variable
    with pytest.raises(InvalidSpec, match=r"::scale_add_ref is a function, not a pallas_verify.KernelSpec; its "
                       r"KernelSpecs: good \(name 'scale_add'\), off_by_one \(name 'scale_add_off_by_one'\)"):
        load_specs(f"{SPECS}::scale_add_ref")


@pytest.mark.parametrize(("option", "make", "reason"), [
    ("--out", lambda p: p.write_text("a file"), "--out {path!r} is not a folder"),
    ("--json", lambda p: p.mkdir(), "--json {path!r} is a folder; give a file path"),
])
def test_output_paths_are_checked_before_any_work(tmp_path, option, make, reason):
    make(tmp_path / "taken")
    run = cli("verify", f"{SPECS}::good", "--backends", "interpret", option, "taken", cwd=tmp_path)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("pallas-verify: error: ") and reason.format(path="taken") in line
    assert run.stdout == ""  # no seed line: nothing was loaded or run
