"""Reports of each kind a run writes (verify passing, verify with findings of several
kinds, a fuzz night, conformance over every backend, smith), built as the commands
build them, for the HTML page's tests."""

from __future__ import annotations

import dataclasses

import numpy as np

from pallas_verify.findings import Finding
from pallas_verify.oracles.elements import element_evidence
from pallas_verify.reports.excerpt import kernel_excerpt
from pallas_verify.reports.report import BackendResult, Report, kernel_rows
from pallas_verify.tolerance import compare
from reference_kernels.mutants import grid

TPU = ["interpret", "tpu_interpret", "mosaic_tpu:v4", "mosaic_tpu:v5e", "mosaic_tpu:v5p", "mosaic_tpu:v6e",
       "mosaic_tpu:7x"]
GPU = ["gpu_interpret", "triton:a100", "triton:h100", "triton:b200", "mosaic_gpu:a100", "mosaic_gpu:h100",
       "mosaic_gpu:b200"]
ALL = [*TPU[:2], "gpu_interpret", *TPU[2:], *GPU[1:]]  # the registry's order
#: The n/a reason that, printed in each of its cells, made one kernel's row 300 px tall.
LONG_NA = ("TPU interpret mode (JAX 0.12) cannot run jax.vmap of a pallas_call that uses scalar prefetch: "
           "the batched grid's index maps receive a prefetch ref whose leading dimension is the batch, which "
           "the interpreter's discharge rule does not expect; the same example runs on interpret (see upstream: "
           "a plain-jax reproducer of the limitation is written beside this report)")


def _serves(backend: str, platforms: list[str]) -> bool:
    served = {"interpret": {"tpu", "gpu"}}.get(backend, {"tpu"} if backend in TPU else {"gpu"})
    return bool(served & set(platforms))


def _cells(kernel: str, platforms: list[str], backends: list[str], *, fail: dict[str, str] | None = None,
           na: dict[str, str] | None = None, transforms: tuple[str, ...] = ()) -> list[BackendResult]:
    fail, na = fail or {}, na or {}
    out = []
    for b in backends:
        for t in (None, *transforms):
            if not _serves(b, platforms):
                out.append(BackendResult(kernel=kernel, backend=b, status="skipped", transform=t,
                                         reason=f"{b} serves {sorted({'tpu', 'gpu'} - set(platforms))}; "
                                                f"the kernel targets {platforms}"))
            elif b in fail and t is None:
                out.append(BackendResult(kernel=kernel, backend=b, status="fail", reason=fail[b], examples=5,
                                         seconds=1.5, shrink_steps=12))
            elif b in na and t is not None:
                out.append(BackendResult(kernel=kernel, backend=b, status="unsupported", transform=t, reason=na[b]))
            else:
                out.append(BackendResult(kernel=kernel, backend=b, status="pass", transform=t, examples=5, seconds=0.8,
                                         reason="" if "interpret" in b else "compiled only (no device attached)"))
    return out


def _elements() -> dict:
    """The element picture of a (16, 128) output whose second row of (8, 32) blocks is wrong."""
    expected = np.linspace(-1, 1, 16 * 128, dtype=np.float32).reshape(16, 128)
    actual = expected.copy()
    actual[8:, :32] += 3.5
    actual[8:, 32:64] += np.float32(1e-6)
    actual[8:, 96:] = np.inf
    return element_evidence(compare("out[0]", actual, expected, None), actual, expected)


def _with_source(finding: Finding) -> Finding:
    """``finding`` with the excerpt of the bundled grid mutants' source it names."""
    source = kernel_excerpt(grid.acc_across_parallel_spec.kernel, finding)
    return dataclasses.replace(finding, evidence={**finding.evidence, "source": source}) if source else finding


def mismatch(kernel: str = "wrong_program_id", backend: str = "interpret") -> Finding:
    blocks = [[0.0, 0.0, 0.0, 0.0], [3.5, 1e-6, 0.0, float("inf")]]
    return _with_source(Finding(
        kind="mismatch", kernel=kernel, backend=backend, config={"rows": 16, "block_rows": 8},
        message="outputs differ beyond the tolerance\nout: 768/2048 elements bad, max abs error 3.5",
        evidence={"blame": {"messages": ["output 0 (output 0 of _row_sum_kernel): blocks (1, 0), (1, 1), (1, 3) bad"],
                            "output": 0, "block_shape": [8, 32], "block_errors": blocks,
                            "block_bad_count": [[0, 0, 0, 0], [256, 256, 0, 256]],
                            "writers": [[[1, 0], [[1, 0]]], [[1, 1], [[1, 1]]], [[1, 3], [[1, 3]]]]},
                  "elements": [_elements()]},
        reproducer=f"/tmp/pv/{kernel}-mismatch-{backend}.py", elapsed_s=1.2))


def race() -> Finding:
    return _with_source(Finding(
        kind="race", kernel="acc_across_parallel", backend="static", config={"rows": 32},
        message="_row_sum_kernel: block (0, 0) of output 0 is written at grid points (0, j) for j in 0..3, which "
                "differ along parallel dimension(s) j",
        evidence={"call": "_row_sum_kernel", "operand": "output 0", "block": [0, 0],
                  "grid_points": [[0, 0], [0, 1], [0, 2], [0, 3]]},
        reproducer="/tmp/pv/acc_across_parallel-race-static.py", elapsed_s=0.3))


def out_of_bounds() -> Finding:
    return _with_source(Finding(
        kind="out_of_bounds", kernel="rotated_index_map", backend="tpu_interpret", config={"n": 3},
        message="Out-of-bounds read of x_ref in _row_sum_kernel at block index (3,) of input 0, outside its 3 blocks",
        evidence={"operand": "input 0", "block": [3], "grid_points": [[2]]}, elapsed_s=2.0))


def verify_pass() -> Report:
    results = _cells("block_row_sum", ["tpu"], ["interpret", "tpu_interpret"], transforms=("vmap",))
    return Report(kernels=[{"name": "block_row_sum", "features": ["reduction"], "platforms": ["tpu"]}],
                  backends=["interpret", "tpu_interpret"], results=results, seed=7, profile="ci", seconds=3.0)


def verify_findings() -> Report:
    findings = [mismatch(), race(), out_of_bounds()]
    results = [*_cells("wrong_program_id", ["tpu"], ["interpret", "tpu_interpret"], fail={"interpret": "mismatch"}),
               *_cells("acc_across_parallel", ["tpu"], ["interpret", "tpu_interpret"]),
               *_cells("rotated_index_map", ["tpu"], ["interpret", "tpu_interpret"],
                       fail={"tpu_interpret": "out_of_bounds"}),
               *kernel_rows("acc_across_parallel", findings)]
    kernels = [{"name": k, "features": ["grid"], "platforms": ["tpu"]}
               for k in ("wrong_program_id", "acc_across_parallel", "rotated_index_map")]
    return Report(kernels=kernels, backends=["interpret", "tpu_interpret"], findings=findings, results=results,
                  seed=11, profile="dev", seconds=40.0)


def conformance() -> Report:
    """Nine bundled kernels over all fourteen backends: TPU kernels, GPU kernels, one of each
    with a transform whose long n/a reason repeats down a column."""
    kernels, results = [], []
    for i in range(6):
        name = f"tpu_kernel_{i}"
        kernels.append({"name": name, "features": ["tiling" if i % 2 else "reduction"], "platforms": ["tpu"]})
        na = dict.fromkeys(["tpu_interpret", *TPU[2:]], LONG_NA) if i == 1 else {}
        results += _cells(name, ["tpu"], ALL, transforms=("vmap",) if i in (1, 4) else (), na=na,
                          fail={"mosaic_tpu:v5e": "compile_error"} if i == 4 else None)
    for i in range(3):
        name = f"gpu_kernel_{i}"
        kernels.append({"name": name, "features": ["attention"], "platforms": ["gpu"]})
        results += _cells(name, ["gpu"], ALL, fail={"triton:h100": "mismatch"} if i == 2 else None)
    findings = [mismatch("gpu_kernel_2", "triton:h100"),
                _with_source(Finding(kind="compile_error", kernel="tpu_kernel_4", backend="mosaic_tpu:v5e", config={},
                                     message="Mosaic rejected _row_sum_kernel's block shape (8, 100): the last "
                                             "dimension must be a multiple of 128", elapsed_s=0.5))]
    return Report(kernels=kernels, backends=list(ALL), findings=findings, results=results, seed=0, profile="ci",
                  seconds=120.0, executor="local")


def fuzz_night_2() -> Report:
    report = verify_findings()
    first = report.findings[0]
    report.findings[0] = dataclasses.replace(first, evidence={**first.evidence, "replayed_from": "night 1"})
    report.run = {"units": 6, "retried": [{"unit": "slice 3", "cause": "worker killed"}],
                  "notes": ["night 2 of the failure database at /tmp/pv/fuzzdb"]}
    report.executor = "local"
    return report


def smith() -> Report:
    programs = [f"smith_{i:03d}" for i in range(5)]
    results = [r for p in programs for r in _cells(p, ["tpu"], ["interpret", "tpu_interpret"],
                                                   fail={"tpu_interpret": "mismatch"} if p == "smith_003" else None)]
    return Report(kernels=[{"name": p, "features": ["generated"], "platforms": ["tpu"]} for p in programs],
                  backends=["interpret", "tpu_interpret"], findings=[mismatch("smith_003", "tpu_interpret")],
                  results=results, seed=3, profile="dev", seconds=30.0, executor="local")


KINDS = {"verify_pass": verify_pass, "verify_findings": verify_findings, "fuzz_night_2": fuzz_night_2,
         "conformance": conformance, "smith": smith}


def comparison():
    """Conformance compared with the same run after two regressions: a cell that passed now
    fails, and one an upstream limitation now stops (n/a)."""
    from pallas_verify.reports.compare import compare_reports

    old, new = conformance(), conformance()
    old.results = [dataclasses.replace(r, status="pass", reason="") if r.status == "fail" else r for r in old.results]
    old.findings = []
    new.results = [dataclasses.replace(r, status="unsupported", reason=LONG_NA)
                   if r.kernel == "tpu_kernel_0" and r.backend == "tpu_interpret" else r for r in new.results]
    return compare_reports(old.to_dict(), new.to_dict(), old_path="old/report.json", new_path="new/report.json")
