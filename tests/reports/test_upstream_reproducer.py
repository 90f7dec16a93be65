"""The plain-jax reproducer of an upstream limitation: the kernel's module pruned of its
spec, and the files a campaign unit ships back with its report."""

from __future__ import annotations

from pathlib import Path

from pallas_verify.campaigns.units import Units, ship
from pallas_verify.execution import Done, Work
from pallas_verify.reports.kernel_source import kernel_module, pruned_source
from pallas_verify.reports.report import Report

MODULE = '''"""A spec file."""
from __future__ import annotations
import functools
import jax.numpy as jnp
import pallas_verify as pv
from hypothesis import strategies as st
from reference_kernels._draw import without
import strategies as pvs

BLOCK = 128
SIZES = pvs.ragged_sizes(block=BLOCK)


def helper(x):
    return x * 2


def kernel(x, *, block=BLOCK):
    return helper(x) + block


def inputs(config):
    return st.just((jnp.zeros(3),))


@functools.lru_cache
def cached():
    return 1


SPEC = pv.KernelSpec(name="k", kernel=without(kernel, "n"), reference=kernel, configs=st.just({}), inputs=inputs)
OTHER = SPEC
'''


def test_the_pruned_module_keeps_the_kernel_and_loses_the_spec_and_its_imports():
    pruned = pruned_source(MODULE)
    namespace: dict = {}
    exec(compile(pruned, "pruned.py", "exec"), namespace)  # imports nothing of pallas-verify
    assert namespace["kernel"](1.0) == 130.0 and namespace["cached"]() == 1
    for gone in ("pv", "st", "without", "pvs", "SIZES", "SPEC", "OTHER"):
        assert gone not in namespace, gone
    assert "inputs" in namespace  # a function that uses a removed name only when called stays (never called)


def test_the_kernel_is_found_through_wrappers_and_lambdas_are_not():
    from reference_kernels.upstream import tests_tpu_dma

    found = kernel_module(tests_tpu_dma.JT_DYNAMIC_DMA.kernel)  # without(dynamic_dma, "rows", "dtype")
    assert found is not None and found.attribute == "dynamic_dma"
    assert found.accepts == ("array", "data", "index", "size")  # so the script drops rows and dtype
    assert "import pallas_verify" not in found.source and "KernelSpec" not in found.source
    assert kernel_module(lambda x: x) is None


def test_a_unit_ships_the_upstream_reproducer_and_the_driver_points_the_report_at_its_copy(tmp_path):
    work, into = tmp_path / "unit", tmp_path / "driver"
    work.mkdir()
    script = work / "k-upstream-interpret.py"
    for path in (script, script.with_suffix(".npz"), work / "k-upstream-interpret-kernel.py"):
        path.write_text(path.name)
    report = Report(kernels=[{"name": "k", "upstream": [{"backend": "interpret", "reproducer": str(script)}]}])
    shipped = ship(report, work)
    received = Units(executor=None, into=into, flat=True)._decode(Done(work=Work(entry="e", kind="verify"), value=shipped))
    (entry,) = received.report.kernels[0]["upstream"]
    assert entry["reproducer"] == str((into / script.name).resolve())
    assert sorted(p.name for p in into.iterdir()) == sorted(
        ["k-upstream-interpret.py", "k-upstream-interpret.npz", "k-upstream-interpret-kernel.py"])
    assert not work.exists()
    assert Path(entry["reproducer"]).read_text() == script.name


def test_the_text_and_markdown_reports_list_each_upstream_limitation_with_its_reproducer():
    from pallas_verify.reports.markdown import markdown
    from pallas_verify.reports.text import upstream_lines

    entry = {"backend": "interpret", "transform": None, "error": "TypeError: Shapes must be 1D",
             "frame": "jax/_src/state/discharge.py:519 in _index_array", "clean_on": "tpu_interpret",
             "config": {"rows": 8}, "reproducer": "/out/k-upstream-interpret.py"}
    report = Report(kernels=[{"name": "k", "upstream": [entry]}])
    first, second = upstream_lines(report.kernels[0])
    assert first.startswith("upstream limitation on interpret: TypeError: Shapes must be 1D raised at "
                            "jax/_src/state/discharge.py:519 in _index_array; tpu_interpret runs the same example clean")
    assert second.endswith("python /out/k-upstream-interpret.py")
    assert "## Upstream limitations" in markdown(report) and "k-upstream-interpret.py" in markdown(report)
