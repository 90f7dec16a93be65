"""The third-party corpus: every spec module loads without its library (whose kernels are
then skipped, naming the extra that installs it), the extra pins what ``PINS`` says, and,
with the libraries installed at those releases, conformance gives the verdicts
docs/thirdparty.md records."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pallas_verify.backends import registry
from reference_kernels import specs_of
from reference_kernels.thirdparty import EXTRA, MODULES, PINS, registered_modules
from reference_kernels.thirdparty._library import absent, version

ROOT = Path(__file__).parents[2]
SPECS = [spec for module in registered_modules() for spec in specs_of(module)]
DOC = ROOT / "docs" / "thirdparty.md"
BACKENDS = ("interpret", "tpu_interpret")


def recorded_verdicts() -> dict[str, dict[str, str]]:
    """kernel -> {backend: status} from the verdict table of docs/thirdparty.md: a verdict
    for every backend of the row (``PASS``), or one per backend (``interpret: PASS;
    tpu_interpret: FAIL``)."""
    rows = [line.split("|")[1:-1] for line in DOC.read_text().splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0]]
    kernel, verdict, backends = header.index("spec"), header.index("verdict"), header.index("backends")
    table = {}
    for row in rows[1:]:
        cells = [cell.strip() for cell in row]
        if len(cells) == len(header) and cells[kernel].startswith("`"):
            names = [b.strip() for b in cells[backends].split(",")]
            if ":" in cells[verdict]:
                pairs = (part.split(":") for part in cells[verdict].split(";"))
                table[cells[kernel].strip("`")] = {b.strip(): v.strip().lower() for b, v in pairs}
            else:
                table[cells[kernel].strip("`")] = dict.fromkeys(names, cells[verdict].lower())
    return table


def test_the_extra_pins_the_releases_the_verdicts_were_measured_on():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["optional-dependencies"][EXTRA] == [f"{d}=={v}" for d, v in PINS.items()]
    entry = project["project"]["entry-points"]["pallas_verify.kernels"]["thirdparty"]
    assert entry == "reference_kernels.thirdparty:registered_modules"
    assert len(MODULES) == len({s.split(".")[-1] for s in registered_modules()}) == 4


def test_every_corpus_spec_is_in_the_verdict_table_and_there_are_ten_kernels_or_more():
    assert {s.name for s in SPECS} == set(recorded_verdicts())
    assert all(set(cells) == set(BACKENDS) for cells in recorded_verdicts().values())
    assert len({id(getattr(s.kernel, "__wrapped__", s.kernel)) for s in SPECS}) >= 10


def test_a_missing_library_skips_its_kernels_naming_the_extra():
    why = absent("pallas-forge", "pallas_forge_not_here")
    assert why == ("the kernel's library pallas-forge is not installed: pip install 'pallas-verify[corpus]' "
                   "(it pins pallas-forge==0.1.2)")
    for spec in SPECS:
        missing = spec.kernel.unavailable
        skip = registry.skip_reason(spec, registry.get("interpret"))
        assert (missing is None) == (skip is None), spec.name
        if missing is not None:
            assert skip == registry.Skip("skipped", missing) and "[corpus]" in missing


def _installed() -> str | None:
    wrong = [f"{d} {version(d) or 'absent'} (pinned {v})" for d, v in PINS.items() if version(d) != v]
    return None if not wrong else (f"the corpus's libraries are not installed at their pins ({', '.join(wrong)}): "
                                   f"pip install 'pallas-verify[{EXTRA}]' (make test-corpus)")


@pytest.mark.slow
@pytest.mark.skipif(_installed() is not None, reason=str(_installed()))
def test_conformance_gives_the_recorded_verdicts(tmp_path):
    names = ",".join(s.name for s in SPECS)
    run = subprocess.run(
        [sys.executable, "-m", "pallas_verify.cli", "conformance", "--kernels", names, "--backends",
         ",".join(BACKENDS), "--max-examples", "10", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=3600)
    report = json.loads((tmp_path / "report.json").read_text())
    got = {k["name"]: {b: k["results"][b]["status"] for b in BACKENDS} for k in report["kernels"]}
    assert got == recorded_verdicts(), run.stdout[-4000:] + run.stderr[-4000:]
    failed = {k["kernel"] for k in report["findings"]}
    assert failed == {name for name, cells in got.items() if "fail" in cells.values()}
