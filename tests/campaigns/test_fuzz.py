"""`pallas-verify fuzz` and `pallas-verify replay`: budgets, signatures, reports, signals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pallas_verify.campaigns.fuzz import FuzzOptions, parse_budget
from pallas_verify.campaigns.fuzzdb import signature
from pallas_verify.findings import Finding

PV = [sys.executable, "-m", "pallas_verify.cli"]

# An index_map off by one block: block i reads input block i + 1.
BUGGY = textwrap.dedent('''
    from __future__ import annotations

    import jax
    import numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl

    import pallas_verify as pv

    SHIFT = {shift}


    def _body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0


    def kernel(x, *, block):
        nb = x.shape[0] // block
        return pl.pallas_call(
            _body, grid=(nb,),
            in_specs=[pl.BlockSpec((block, 128), lambda i: ((i + SHIFT) % nb, 0))],
            out_specs=pl.BlockSpec((block, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


    def reference(x, *, block):
        return x + 1.0


    def inputs(config):
        return st.just((np.arange(config["block"] * 256, dtype=np.float32).reshape(-1, 128),))


    PLUS_ONE = pv.KernelSpec(name="plus_one", kernel=kernel, reference=reference, inputs=inputs,
                             configs=st.fixed_dictionaries({{"block": st.sampled_from([8, 16])}}))
''')


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("1h30m", 5400), ("45", 45), ("1.5m", 90)])
def test_budgets_parse(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_budget("soon"), "budget='soon' is not a duration; write e.g. 90s, 30m or 1h30m"),
        (lambda: parse_budget("0s"), "budget='0s' must be more than zero seconds"),
        (lambda: FuzzOptions(workers=0), "workers=0 must be a positive integer"),
        (lambda: FuzzOptions(slice_examples=True), "slice_examples=True must be a positive integer"),
    ],
)
def test_bad_fuzz_arguments(call, message):
    from pallas_verify.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_signature_is_the_cell_and_kind_not_the_message():
    def f(message: str, backend: str = "interpret", kind: str = "mismatch", transform=None) -> Finding:
        return Finding(kind=kind, kernel="k", backend=backend, message=message, transform=transform)

    one = f("out: 12/48 bad (25%), max abs 3.5e-02 at 0x7f00aa")
    assert signature(one) == signature(f("out[1]: 7/96 NaN where the reference has numbers"))  # one bug, two texts
    assert signature(one) != signature(f(one.message, "tpu_interpret"))
    assert signature(one) != signature(f(one.message, kind="race"))
    assert signature(one) != signature(f(one.message, transform="vmap"))


def test_replay_of_an_unreadable_report_is_a_usage_error(tmp_path, capsys):
    from pallas_verify.cli import main

    (tmp_path / "bad.json").write_text("{")
    assert main(["replay", str(tmp_path / "bad.json")]) == 2
    assert "is not a readable pallas-verify JSON report" in capsys.readouterr().err


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([*PV, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_replay_says_whether_a_mutant_finding_still_reproduces(tmp_path):
    spec = tmp_path / "plus_one.py"
    spec.write_text(BUGGY.format(shift=1))
    found = _run(["verify", str(spec), "--backends", "interpret", "--max-examples", "2", "--out", "out",
                  "--json", "out/r.json"], tmp_path)
    assert found.returncode == 1, found.stderr
    replay = _run(["replay", "out/r.json"], tmp_path)
    assert replay.returncode == 1, replay.stderr
    assert "STILL REPRODUCES  mismatch in plus_one on interpret" in replay.stdout
    spec.write_text(BUGGY.format(shift=0))  # the fix
    fixed = _run(["replay", "out/r.json"], tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert "FIXED             mismatch in plus_one on interpret" in fixed.stdout


@pytest.mark.slow
def test_fuzz_dedups_keeps_a_database_and_replays_it_first(tmp_path):
    spec = tmp_path / "plus_one.py"
    spec.write_text(BUGGY.format(shift=1))
    # Two slices of the one cell, each finding the bug; the budget only caps the run.
    args = ["fuzz", str(spec), "--backends", "interpret", "--budget", "120s", "--max-slices", "2", "--workers", "1",
            "--slice-examples", "2", "--out", "out", "--seed", "1"]
    first = _run(args, tmp_path)
    assert first.returncode == 1, first.stderr
    data = json.loads((tmp_path / "out/report.json").read_text())
    assert data["run"]["slices"] == 2
    assert [(f["kind"], f["backend"]) for f in data["findings"]] == [("mismatch", "interpret")]  # one, not one per slice
    assert len(list((tmp_path / "out/db").glob("*.json"))) == 1
    second = _run([*args[:7], "1", *args[8:]], tmp_path)  # the replay, then one slice
    assert "1 known findings to replay" in second.stderr
    assert "(still reproduces)" in second.stderr
    again = json.loads((tmp_path / "out/report.json").read_text())["findings"]
    assert again[0]["evidence"]["replayed_from"].endswith(".json")


def _check_reports(out: Path) -> dict:
    data = json.loads((out / "report.json").read_text())
    assert data["kernels"]
    assert data["backends"]
    ET.fromstring((out / "report.junit.xml").read_text())
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    return data


@pytest.mark.slow
def test_fuzz_over_the_catalog_writes_json_junit_and_html(tmp_path):
    started = time.monotonic()
    budget = 12  # far less than the catalog needs: most cells are left unreached, each saying why
    done = _run(["fuzz", "--budget", f"{budget}s", "--out", "out", "--workers", "2", "--slice-examples", "2"], tmp_path,
                400)
    data = _check_reports(tmp_path / "out")
    cells = [r for k in data["kernels"] for r in k["results"].values()]
    unreached = [r for r in cells if r["status"] == "not_reached"]
    assert done.returncode == (1 if data["findings"] else 4 if unreached else 0), done.stderr
    assert {r["reason"] for r in unreached} <= {"the budget ran out before it ran",
                                                "the budget ran out while its first unit ran"}
    assert not data["interrupted"]
    assert sum(r["examples"] for k in data["kernels"] for r in k["results"].values()) > 0
    assert time.monotonic() - started < budget + 30 + 60  # budget + grace + start-up
