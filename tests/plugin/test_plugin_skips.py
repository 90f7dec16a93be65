"""Cells that do not run are skipped at collection, with the engine's reason and status."""

from __future__ import annotations

import json

FAST = ("--pv-max-examples", "2", "--pv-isolate", "never", "-p", "no:cacheprovider")

DECLARED = ("DECLARED = pv.KernelSpec(name='declared', kernel=_make(0), reference=reference, configs=CONFIGS, "
            "inputs=inputs, platforms=('tpu',), transforms=('vmap',), "
            "unsupported={'interpret': 'the HLO interpreter is not the target'})\n")


def test_declared_unsupported_backend_is_skipped_at_collection_and_reported_so(pytester, spec_file):
    spec_file(DECLARED)
    result = pytester.runpytest_subprocess(*FAST, "--pv-backends", "interpret", "--pv-report", "rep", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.re_match_lines([r"SKIPPED \[1\] test_kernels.py(:\d+)?: unsupported: the HLO interpreter is not"])
    data = json.loads((pytester.path / "rep" / "report.json").read_text())
    [kernel] = data["kernels"]
    assert kernel["platforms"] == ["tpu"]
    assert {key: (r["status"], r["reason"]) for key, r in kernel["results"].items()} == {
        "interpret": ("unsupported", "the HLO interpreter is not the target"),
        "interpret+vmap": ("unsupported", "the HLO interpreter is not the target"),
    }
