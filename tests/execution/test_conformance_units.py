"""Conformance through an executor: one unit per spec, every cell records its node."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pallas_verify.campaigns.conformance import run_conformance
from pallas_verify.execution.local import LocalExecutor
from pallas_verify.loader import load_spec

SPEC = str(Path(__file__).with_name("portable_add.py")) + "::ADD_ONE"
MUTANT = "reference_kernels.mutants.grid:rotated_index_map_spec"


@pytest.mark.slow
def test_conformance_units_on_the_local_executor(tmp_path):
    lines: list[str] = []
    with LocalExecutor(1) as executor:
        report = run_conformance([load_spec(SPEC), load_spec(MUTANT)], backends="interpret,gpu_interpret",
                                 max_examples=2, out_dir=tmp_path, progress=lines.append, executor=executor)
    assert report.executor == "local"
    cells = {(r.kernel, r.backend, r.transform): r for r in report.results}
    assert cells["add_one", "interpret", None].status == "pass"
    assert cells["add_one", "interpret", None].node == socket.gethostname()
    assert cells["rotated_index_map", "interpret", None].status == "fail"
    assert cells["rotated_index_map", "gpu_interpret", None].status == "skipped"
    finding = next(f for f in report.findings if f.kernel == "rotated_index_map")
    assert Path(finding.reproducer).is_file()  # the driver holds the reproducer the worker wrote
    assert Path(finding.reproducer).is_relative_to(tmp_path)
    assert sorted(line.split(":")[0].split()[-1] for line in lines) == ["add_one", "rotated_index_map"]
