"""`pallas-verify verify`: unloadable files, invalid specs among good ones, seeds, shrink
budgets, examples counted apart from shrink steps, and early-stopping shrinks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SPECS = Path(__file__).parents[1] / "engine" / "_specs.py"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pallas_verify.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"})


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("x = (\n", "SyntaxError at line 1: '(' was never closed"),
        ("import os\nraise RuntimeError('no device\\nattached')\n", "RuntimeError at line 2: no device attached"),
        ("import no_such_module_pv\n", "ModuleNotFoundError at line 1: No module named 'no_such_module_pv'"),
    ],
)
def test_a_spec_file_that_cannot_be_imported_exits_two_with_one_line(tmp_path, source, reason):
    (tmp_path / "broken.py").write_text(source)
    run = cli("verify", "broken.py", cwd=tmp_path)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"pallas-verify: error: spec file {str(tmp_path / 'broken.py')!r} cannot be imported: ")
    assert reason in line


MIXED = textwrap.dedent('''
    import sys
    sys.path.insert(0, {folder!r})
    from _specs import bad_inputs, good  # noqa: F401  (a valid spec and one whose inputs misbehave)
''')


def test_an_invalid_spec_keeps_the_results_of_the_others_and_exits_two(tmp_path):
    (tmp_path / "mixed.py").write_text(MIXED.format(folder=str(SPECS.parent)))
    run = cli("verify", "mixed.py", "--backends", "interpret", "--max-examples", "2", "--json", "r.json",
              "--out", "out", cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    *progress, line = run.stderr.strip().splitlines()
    assert progress == ["scale_add on interpret: PASS, 2 examples" + progress[0].partition(" examples")[2]]
    assert line.startswith("pallas-verify: error: KernelSpec 'bad_inputs': ") and "inputs must draw a tuple" in line
    array = r"ndarray\(shape=\(\d+,\), dtype=float32\)"
    assert re.search(rf"it drew \[{array}, {array}\]\.$", line), line  # one line: no array repr
    report = json.loads((tmp_path / "r.json").read_text())
    [kernel] = report["kernels"]
    assert kernel["name"] == "scale_add" and kernel["results"]["interpret"]["status"] == "pass"
    [invalid] = report["invalid_specs"]
    assert invalid["kernel"] == "bad_inputs" and "inputs must draw a tuple" in invalid["reason"]
    assert "INVALID SPEC: KernelSpec 'bad_inputs'" in run.stdout


def _seed_line(stdout: str) -> int:
    match = re.search(r"^pallas-verify verify: seed=(\d+) \(rerun this search with --seed \1\)$", stdout, re.M)
    assert match, stdout
    return int(match.group(1))


def _summary(report: dict) -> list[tuple]:
    # shrink steps are left out: how many fit in the shrink budget depends on the machine's speed
    cells = [(k["name"], key, r["status"], r["examples"]) for k in report["kernels"] for key, r in k["results"].items()]
    found = [(f["kind"], json.dumps(f["config"], sort_keys=True), f["evidence"]["examples_to_detect"])
             for f in report["findings"]]
    return cells + found


@pytest.mark.slow
def test_a_random_seed_is_printed_and_recorded_and_repeats_the_run(tmp_path):
    first_dir, again_dir = tmp_path / "a", tmp_path / "b"  # separate Hypothesis databases
    first_dir.mkdir(), again_dir.mkdir()
    args = ["verify", f"{SPECS}::off_by_one", "--backends", "interpret", "--max-examples", "6", "--out", "out",
            "--json", "r.json", "--shrink-budget", "300"]  # shrinking ends by patience, not by the clock
    first = cli(*args, cwd=first_dir)
    seed = _seed_line(first.stdout)
    report = json.loads((first_dir / "r.json").read_text())
    assert report["seed"] == seed
    again = cli(*args, "--seed", str(seed), cwd=again_dir)
    assert _seed_line(again.stdout) == seed and first.returncode == again.returncode
    assert _summary(json.loads((again_dir / "r.json").read_text())) == _summary(report)


def test_the_derandomized_ci_profile_records_seed_zero(tmp_path):
    run = cli("verify", f"{SPECS}::good", "--backends", "interpret", "--max-examples", "1", "--profile", "ci",
              "--json", "r.json", "--out", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert _seed_line(run.stdout) == 0
    assert json.loads((tmp_path / "r.json").read_text())["seed"] == 0


@pytest.mark.parametrize("value", ["-1", "soon", "inf"])
def test_a_bad_shrink_budget_is_a_usage_error(tmp_path, value):
    for command in (["verify", f"{SPECS}::good"], ["fuzz"]):
        run = cli(*command, "--shrink-budget", value, cwd=tmp_path)
        assert run.returncode == 2
        assert f"argument --shrink-budget: {value!r} is not a number of seconds >= 0" in run.stderr


# Every example raises the same exception: shrinking cannot make it more useful.
RAISES = textwrap.dedent('''
    import jax
    import numpy as np
    from hypothesis import strategies as st
    import pallas_verify as pv

    def _fail(x):
        raise RuntimeError("this backend cannot run the kernel")

    def kernel(x, *, block):  # traces fine; every run raises the same error
        return jax.pure_callback(_fail, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def reference(x, *, block):
        return x

    def inputs(config):
        return st.lists(st.floats(-1e3, 1e3, width=32), min_size=64, max_size=256).map(
            lambda v: (np.asarray(v, np.float32),))

    spec = pv.KernelSpec(name="always_raises", kernel=kernel, reference=reference,
                         configs=st.fixed_dictionaries({"block": st.sampled_from([8, 16, 32])}), inputs=inputs)
''')


@pytest.mark.slow
def test_examples_and_shrink_steps_are_counted_apart_and_a_search_failing_one_way_stops_early(tmp_path):
    (tmp_path / "raises.py").write_text(RAISES)
    run = cli("verify", "raises.py::spec", "--backends", "interpret", "--max-examples", "5", "--seed", "1",
              "--json", "r.json", "--out", "out", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    cell = report["kernels"][0]["results"]["interpret"]
    assert cell["status"] == "fail" and 1 <= cell["examples"] <= 5
    # Every example raised the same error: the search stopped after three, and the cell says so.
    assert cell["examples"] + cell["shrink_steps"] == 3, cell
    assert cell["note"].startswith("stopped early: all 3 examples run failed with the same signature (exception")
    shrink = f" + {cell['shrink_steps']} shrink steps" if cell["shrink_steps"] else ""
    assert f"{cell['examples']} examples{shrink}, " in run.stdout
    assert "stopped early: all 3 examples" in run.stdout
    [finding] = report["findings"]
    assert finding["kind"] == "exception" and "cannot run the kernel" in finding["message"]
    assert finding["evidence"]["shrink_stopped"] == cell["note"]
    assert finding["config"] == {"block": 8}  # the minimal config Hypothesis reached, which did fail
