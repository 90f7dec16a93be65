"""Reports of each kind a run writes (verify passing, verify with findings of several
kinds, a fuzz night, conformance over every backend, smith, the JAX-version matrix), built
as the commands build them, for the HTML page's tests."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

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
                  "grid_points": [[0, 0], [0, 1], [0, 2], [0, 3]], "grid": [2, 4],
                  "semantics": ["parallel", "parallel"], "block_counts": [2, 1]},
        reproducer="/tmp/pv/acc_across_parallel-race-static.py", elapsed_s=0.3))


def out_of_bounds() -> Finding:
    return _with_source(Finding(
        kind="out_of_bounds", kernel="rotated_index_map", backend="static", config={"n": 3},
        message="_row_sum_kernel: the index_map of input 0 gives block (3, 0), outside the (3, 1) blocks of its array "
                "(shape (24, 128), block (8, 128)), at grid points (2,). Clamp the index or shrink the grid.",
        evidence={"call": "_row_sum_kernel", "operand": "input 0", "block": [3, 0], "grid_points": [[2]], "grid": [3],
                  "semantics": ["arbitrary"], "block_counts": [3, 1]}, elapsed_s=2.0))


def verify_pass() -> Report:
    results = _cells("block_row_sum", ["tpu"], ["interpret", "tpu_interpret"], transforms=("vmap",))
    return Report(kernels=[{"name": "block_row_sum", "features": ["reduction"], "platforms": ["tpu"]}],
                  backends=["interpret", "tpu_interpret"], results=results, seed=7, profile="ci", seconds=3.0)


def verify_findings() -> Report:
    findings = [mismatch(), race(), out_of_bounds()]
    results = [*_cells("wrong_program_id", ["tpu"], ["interpret", "tpu_interpret"], fail={"interpret": "mismatch"}),
               *_cells("acc_across_parallel", ["tpu"], ["interpret", "tpu_interpret"]),
               *_cells("rotated_index_map", ["tpu"], ["interpret", "tpu_interpret"]),
               *kernel_rows("acc_across_parallel", findings), *kernel_rows("rotated_index_map", findings)]
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


NIGHT_1 = 1_750_000_000.0  # 2025-06-15 15:06 UTC


def _night_1(report: Report, tril: Finding) -> Report:
    """The first night of ``report``'s kernels and block_tril: the mismatch, the race and
    block_tril's mismatch found, rotated_index_map clean."""
    mismatch_, race_, _ = report.findings
    results = [*_cells("wrong_program_id", ["tpu"], ["interpret", "tpu_interpret"], fail={"interpret": "mismatch"}),
               *_cells("acc_across_parallel", ["tpu"], ["interpret", "tpu_interpret"]),
               *_cells("rotated_index_map", ["tpu"], ["interpret", "tpu_interpret"]),
               *_cells("block_tril", ["tpu"], ["interpret", "tpu_interpret"], fail={"tpu_interpret": "mismatch"}),
               *kernel_rows("acc_across_parallel", [race_])]
    return Report(kernels=report.kernels, backends=report.backends, results=results,
                  findings=[mismatch_, race_, tril], seed=10)


def fuzz_night_2() -> Report:
    """The second fuzz night over one failure database (``campaigns.nights``): night 1 found
    the mismatch, the race and a mismatch in block_tril; by night 2 block_tril is fixed, the
    mismatch's replay still reproduces, the search finds the race again and the
    out-of-bounds access is new."""
    from pallas_verify.campaigns.fuzzdb import FailureDatabase, signature
    from pallas_verify.campaigns.nights import Night

    report = verify_findings()
    report.kernels.append({"name": "block_tril", "features": ["grid"], "platforms": ["tpu"]})
    report.results += _cells("block_tril", ["tpu"], ["interpret", "tpu_interpret"])
    tril = mismatch("block_tril", "tpu_interpret")
    with tempfile.TemporaryDirectory() as tmp:
        db = FailureDatabase(Path(tmp) / "db")
        first = Night(db, now=NIGHT_1)
        night_1 = _night_1(report, tril)
        for f in night_1.findings:
            db.add(f, signature(f), seen=first.seen(signature(f)))
        first.end(night_1)
        second = Night(db, now=NIGHT_1 + 86400)
        entries = {k.finding.kernel: db.root / k.entry for k in second.known.values()}
        second.replayed(entries["block_tril"], "fixed")
        second.replayed(entries["wrong_program_id"], "still reproduces")
        first_finding = report.findings[0]
        report.findings[0] = dataclasses.replace(first_finding, evidence={
            **first_finding.evidence, "replayed_from": f"/srv/pv-fuzz/db/{entries['wrong_program_id'].name}"})
        night = second.section(report, final=True)
    report.run = {"finished": True, "ended": "budget", "units": 6, "slices": 5,
                  "retried": [{"unit": "slice 3", "cause": "worker killed"}], "lost": [], "notes": [],
                  "nights": {**night, "db": "/srv/pv-fuzz/db"}}
    report.executor, report.seed = "local", 11
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


def _release(jax: str, folder: Path, *, fail: dict[str, str] | None = None,
             na: dict[str, str] | None = None, findings: tuple[Finding, ...] = ()) -> tuple[str, Report]:
    """One release's conformance report of four kernels on three backends, written under
    ``folder/jax-VERSION`` as a release's run writes it."""
    backends = ["interpret", "tpu_interpret", "gpu_interpret"]
    results = [*_cells("recip", ["tpu"], backends, fail=fail), *_cells("poly", ["tpu"], backends),
               *_cells("scale_shift", ["tpu", "gpu"], backends, transforms=("vmap",), na=na),
               *_cells("flash_attention", ["tpu"], backends, fail={"interpret": "mismatch"} if jax >= "0.12" else None)]
    kernels = [{"name": k, "features": [], "platforms": ["tpu", "gpu"] if k == "scale_shift" else ["tpu"]}
               for k in ("recip", "poly", "scale_shift", "flash_attention")]
    report = Report(kernels=kernels, backends=backends, results=results, findings=list(findings), seed=0,
                    profile="ci", seconds=40.0, jax_version=jax)
    path = report.write_json(folder / f"jax-{jax}" / "report.json")
    return str(path), report


def versions(folder: Path):
    """``conformance --jax 0.10.1,0.10.2,0.11.2,0.12.0.1`` as it leaves ``folder``: 0.10.1's
    environment could not be made; recip fails on 0.10.2 (pltpu.reciprocal is missing) and
    works from 0.11.2; on 0.12.0.1 flash_attention mismatches and scale_shift's vmap on
    tpu_interpret is n/a."""
    import collections
    import itertools

    from pallas_verify.campaigns.versions import Matrix, Step, VersionRun
    from pallas_verify.reports.compare import compare_reports, load_report

    missing = Finding(kind="exception", kernel="recip", backend="interpret", config={},
                      message="AttributeError: module 'jax.experimental.pallas.tpu' has no attribute 'reciprocal'")
    made = [_release("0.10.2", folder, fail={"interpret": "exception", "tpu_interpret": "exception"},
                     findings=(missing, dataclasses.replace(missing, backend="tpu_interpret"))),
            _release("0.11.2", folder),
            _release("0.12.0.1", folder, na={"tpu_interpret": LONG_NA}, findings=(mismatch("flash_attention"),))]
    runs = [VersionRun(jax="0.10.1", error="cannot start: making the environment of jax 0.10.1 failed: pip install "
                                           "jax==0.10.1 jaxlib==0.10.1 exited 1")]
    for (path, report), status in zip(made, (1, 0, 1), strict=True):
        cells = collections.Counter(r.status for r in report.results)
        runs.append(VersionRun(jax=report.jax_version, python=".venvs/jax/bin/python", origin=".venvs", report=path,
                               jax_version=report.jax_version, exit_status=status, seconds=40.0, cells=dict(cells)))
    steps = tuple(Step(old=a.jax, new=b.jax, comparison=compare_reports(load_report(a.report), load_report(b.report),
                                                                        old_path=a.report, new_path=b.report))
                  for a, b in itertools.pairwise(runs[1:]))
    return Matrix(runs=tuple(runs), steps=steps)
