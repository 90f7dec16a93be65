"""A smith finding as a standalone, readable reproducer: the program's kernel and
reference as source, the inputs in an ``.npz`` beside it, and the check that re-runs it
(the one reproducer template, ``reports.reproducer``)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from pallas_verify.campaigns.smith.source import program_source
from pallas_verify.findings import Finding
from pallas_verify.reports.reproducer import file_stem, reproducer_source, write_pictures

__all__ = ["write_smith_reproducer"]

# The generated program's spec, defined in the script itself (its inputs read from the .npz).
_SPEC = '''

# -- how pallas-verify checks it -----------------------------------------------------------
from hypothesis import strategies as st  # noqa: E402

import pallas_verify as pv  # noqa: E402


def _inputs(config):
    with np.load(Path(__file__).with_suffix(".npz")) as data:
        return st.just(tuple(data[f"arg{{i}}"] for i in range(len(data.files))))


KERNEL_SPEC = pv.KernelSpec(name={name!r}, kernel=kernel, reference=reference, configs=st.just({{}}),
                            inputs=_inputs, platforms=("tpu",), bitwise_stable=False)
'''


def write_smith_reproducer(finding: Finding, out_dir: Path, stem: str) -> Finding:
    """Write ``stem.py`` (+ ``.npz``) for a finding of the generated-programs spec."""
    program = finding.config["program"]
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / f"{stem}.py"
    if finding.reproducer and Path(finding.reproducer).with_suffix(".npz").is_file():
        shutil.copyfile(Path(finding.reproducer).with_suffix(".npz"), script.with_suffix(".npz"))
    body = program_source(program) + _SPEC.format(name=file_stem(stem))
    script.write_text(reproducer_source(
        finding, spec='f"{Path(__file__).resolve()}::KERNEL_SPEC"', config="{}", body=body,
        headline=f"{finding.kind} on backend {finding.backend} (a smith program)",
        note="The kernel and its reference are plain source below."))
    drawn = write_pictures(finding, script.with_suffix(""))  # beside this reproducer, not the batch's
    evidence = {**finding.evidence, "pictures": drawn} if drawn else finding.evidence
    return dataclasses.replace(finding, reproducer=str(script.resolve()), evidence=evidence)
