"""The terminal matrix of `demo` and `conformance`: one line per kernel, each reason once."""

from __future__ import annotations

import io

from pallas_verify.findings import Finding
from pallas_verify.reports.matrix import matrix_lines, reason_lines, tally
from pallas_verify.reports.report import BackendResult, Report
from pallas_verify.reports.text import print_matrix

BACKENDS = ["interpret", "tpu_interpret", "mosaic_tpu:v4", "mosaic_tpu:v5e", "triton:a100"]
VMAP_NA = "TPU interpret mode cannot run jax.vmap of this pallas_call"


def _cell(kernel, backend, status, reason="", transform=None):
    return BackendResult(kernel=kernel, backend=backend, status=status, reason=reason, transform=transform)


def _report() -> Report:
    results = []
    for transform in (None, "vmap"):
        results += [
            _cell("add", "interpret", "pass", transform=transform),
            _cell("add", "tpu_interpret", "unsupported" if transform else "pass", VMAP_NA if transform else "",
                  transform=transform),
            _cell("add", "mosaic_tpu:v4", "pass", "compiled only (no device attached)", transform=transform),
            _cell("add", "mosaic_tpu:v5e", "pass", "compiled only (no device attached)", transform=transform),
            _cell("add", "triton:a100", "skipped", "triton:a100 serves ['gpu']; the kernel targets ['tpu']",
                  transform=transform),
        ]
    results += [
        _cell("gpu_only", "interpret", "fail", "mismatch"),
        _cell("gpu_only", "tpu_interpret", "skipped", "tpu_interpret serves ['tpu']; the kernel targets ['gpu']"),
        _cell("gpu_only", "mosaic_tpu:v4", "skipped", "mosaic_tpu:v4 serves ['tpu']; the kernel targets ['gpu']"),
        _cell("gpu_only", "triton:a100", "pass", "compiled only (no device attached)"),
    ]  # gpu_only has no mosaic_tpu:v5e cell
    kernels = [{"name": "add", "features": [], "platforms": ["tpu"]},
               {"name": "gpu_only", "features": [], "platforms": ["gpu"]}]
    finding = Finding(kind="mismatch", kernel="gpu_only", backend="interpret", message="outputs differ")
    return Report(kernels=kernels, backends=list(BACKENDS), results=results, findings=[finding], seconds=2.0)


def _at(line: str, start: int) -> str:
    return line[start:].split()[0] if line[start:].strip() else ""


def test_one_line_per_kernel_and_transform_under_a_header_of_backend_names():
    lines = matrix_lines(_report())
    top, sub, add, add_vmap, gpu_only = lines
    assert top.split() == ["kernel", "interpret", "tpu_interpret", "mosaic_tpu:", "triton:"]
    assert sub.split() == ["v4", "v5e", "a100"]
    assert add.split() == ["add", "PASS", "PASS", "PASS", "PASS", "skip"]
    assert add_vmap.split() == ["+vmap", "PASS", "n/a", "PASS", "PASS", "skip"]
    assert gpu_only.split() == ["gpu_only", "FAIL", "skip", "skip", "-", "PASS"]
    # Aligned: every cell starts where its backend's name starts in the header.
    starts = [top.index("interpret"), top.index("tpu_interpret"), sub.index("v4"), sub.index("v5e"), sub.index("a100")]
    assert [_at(add_vmap, s) for s in starts] == ["PASS", "n/a", "PASS", "PASS", "skip"]
    assert [_at(gpu_only, s) for s in starts] == ["FAIL", "skip", "skip", "-", "PASS"]


def test_each_reason_once_with_the_cells_it_covers():
    text = "\n".join(reason_lines(_report()))
    assert text.count(VMAP_NA) == 1 and "add+vmap on tpu_interpret" in text
    # The same reason on several backends (each message names its backend) is one entry.
    assert text.count("the backend serves ['tpu']; the kernel targets ['gpu']") == 1
    assert "gpu_only on tpu_interpret, mosaic_tpu:v4" in text  # not all of mosaic_tpu: no "mosaic_tpu:*"
    assert text.count("compiled only (no device attached)") == 1
    assert "add, add+vmap on mosaic_tpu:*; gpu_only on triton:a100" in text  # a whole family is family:*
    assert "mismatch" not in text  # a failure's reason is its findings, printed with them
    order = [line.split()[0] for line in text.splitlines() if not line.startswith(" ")]
    assert order == ["n/a", "skip", "skip", "pass"]


def test_print_matrix_shows_findings_and_counts_after_the_matrix():
    out = io.StringIO()
    print_matrix(_report(), file=out)
    text = out.getvalue()
    assert text.index("kernel") < text.index(VMAP_NA) < text.index("[mismatch] gpu_only on interpret")
    assert text.rstrip().endswith("1 finding in 2.0 s (8 PASS, 1 FAIL, 1 n/a, 4 skip)")
    assert "SKIPPED" not in text and "UNSUPPORTED" not in text


def test_tally_counts_cells_by_status():
    assert tally(_report().results) == "8 PASS, 1 FAIL, 1 n/a, 4 skip"
    assert tally([]) == "no cells"


def test_a_lone_family_member_keeps_its_family_in_the_header():
    report = Report(backends=["mosaic_gpu:h100"], results=[_cell("k", "mosaic_gpu:h100", "pass")],
                    kernels=[{"name": "k", "features": [], "platforms": ["gpu"]}])
    top, sub, row = matrix_lines(report)
    assert top.split() == ["kernel", "mosaic_gpu:"] and sub.split() == ["h100"]
    assert _at(row, sub.index("h100")) == "PASS"


def test_kernel_notes_follow_the_reasons():
    report = _report()
    report.kernels[0] = {**report.kernels[0], "static_skipped": ["static check skipped for k: no grid"]}
    out = io.StringIO()
    print_matrix(report, file=out)
    assert "note  add: static check skipped for k: no grid" in out.getvalue().splitlines()


def test_a_matrix_wider_than_100_columns_is_split_by_platform_with_the_backends_that_ran_nothing_folded():
    from tests.reports import _pages

    report = _pages.conformance()  # 14 backends: one table would be 121 columns wide
    lines = matrix_lines(report)
    assert max(map(len, lines)) <= 100
    tpu, gpu = lines.index(next(x for x in lines if x.startswith("tpu kernels"))), lines.index("") + 1
    assert lines[tpu] == "tpu kernels (folded, nothing ran on them: gpu_interpret, triton:*, mosaic_gpu:*)"
    assert lines[gpu] == "gpu kernels (folded, nothing ran on them: tpu_interpret, mosaic_tpu:*)"
    assert lines[tpu + 1].split() == ["kernel", "interpret", "tpu_interpret", "mosaic_tpu:"]
    assert lines[tpu + 3].split() == ["tpu_kernel_4", "PASS", "PASS", "PASS", "FAIL", "PASS", "PASS", "PASS"]  # failures first
    assert lines[gpu + 3].split()[0] == "gpu_kernel_2"
    assert sum(x.split()[0].startswith(("tpu_kernel", "gpu_kernel", "+vmap")) for x in lines if x.strip()) == 11
    assert all(len(x) <= 100 for x in reason_lines(report))


def test_a_group_still_too_wide_is_in_parts_and_the_whole_terminal_matrix_fits_100_columns():
    from tests.reports import _pages

    report = _pages.conformance()
    report.kernels.append({"name": "both", "features": ["portable"], "platforms": ["gpu", "tpu"]})
    report.results += [_cell("both", b, "pass") for b in _pages.ALL]  # every backend serves it: nothing folds
    report.kernels[0]["static_skipped"] = ["static check skipped for anonymous: " + "a long reason " * 20]
    lines = matrix_lines(report)
    assert max(map(len, lines)) <= 100
    group = lines[lines.index("gpu + tpu kernels") + 1:]
    group = group[:next((i for i, x in enumerate(group) if " kernels" in x), len(group))]  # to the next group
    headers = [x.split() for x in group if x.startswith("kernel ")]
    assert len(headers) == 2  # in two parts, each with the kernel column
    assert [h for part in headers for h in part if h != "kernel"] == [
        "interpret", "tpu_interpret", "gpu_interpret", "mosaic_tpu:", "triton:", "mosaic_gpu:"]
    assert sum(x.split()[0] == "both" for x in group if x.strip()) == 2  # its row in each part
    out = io.StringIO()
    print_matrix(report, file=out)
    printed = out.getvalue().splitlines()
    matrix = printed[:next(i for i, x in enumerate(printed) if x.startswith("["))]  # then the findings
    assert max(map(len, matrix)) <= 100  # the feature table and the notes too
    assert "feature" in out.getvalue() and "portable" in out.getvalue()
