"""The kernel's source a finding involves, its named lines marked, and the page showing it."""

from __future__ import annotations

import dataclasses
import inspect

from pallas_verify.findings import Finding
from pallas_verify.reports.excerpt import kernel_excerpt, operand_ref
from pallas_verify.reports.html import html_page
from pallas_verify.reports.report import Report
from reference_kernels.mutants import grid

KERNEL = grid.acc_across_parallel_spec.kernel  # a partial of block_row_sum, whose body is _row_sum_kernel
FIRST = inspect.getsourcelines(grid._row_sum_kernel)[1]


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_race_on_a_named_ref_marks_the_lines_that_access_it():
    finding = Finding(kind="race", kernel="acc_across_parallel", backend="tpu_interpret",
                      message="data race detected by the interpreter:\nRACE DETECTED on o_ref (output 0 of "
                              "_row_sum_kernel, the whole array in HBM)")
    source = kernel_excerpt(KERNEL, finding)
    assert source["path"] == "reference_kernels/mutants/grid.py"  # under the working directory: relative
    [block] = source["blocks"]
    assert (block["function"], block["start"]) == ("_row_sum_kernel", FIRST)
    assert block["lines"][0] == "def _row_sum_kernel(x_ref, o_ref):"
    marked = dict(block["marked"])
    assert set(marked) == {_line(grid._row_sum_kernel, "o_ref[...] = jnp.zeros"),
                           _line(grid._row_sum_kernel, "o_ref[...] += x_ref")}  # not its parameter list
    assert set(marked.values()) == {"accesses o_ref"}


def test_a_static_race_on_an_output_marks_its_block_spec_and_the_grid_semantics():
    finding = Finding(kind="race", kernel="acc_across_parallel", backend="static",
                      message="_row_sum_kernel: block (0, 0) of output 0 is written at grid points (0, j) for j "
                              "in 0..3, which differ along parallel dimension(s) j",
                      evidence={"call": "_row_sum_kernel", "operand": "output 0", "block": [0, 0]})
    body, wrapper = kernel_excerpt(KERNEL, finding)["blocks"]
    # output 0 is o_ref: block_row_sum calls pallas_call(_row_sum_kernel, in_specs=[one spec])
    assert dict(body["marked"]) == {_line(grid._row_sum_kernel, "o_ref[...] = jnp.zeros"): "accesses o_ref (output 0)",
                                    _line(grid._row_sum_kernel, "o_ref[...] +="): "accesses o_ref (output 0)"}
    assert wrapper["function"] == "block_row_sum"
    assert dict(wrapper["marked"]) == {_line(grid.block_row_sum, "out_specs="): "the block spec of output 0",
                                       _line(grid.block_row_sum, "dimension_semantics"):
                                           "the grid's dimension semantics"}


def test_a_line_the_finding_names_by_file_and_number_is_marked():
    line = _line(grid._row_sum_kernel, "jnp.zeros_like")
    finding = Finding(kind="out_of_bounds", kernel="acc_across_parallel", backend="interpret",
                      message=f"IndexError: Out-of-bounds masked store at {inspect.getsourcefile(grid)}:{line} "
                              "(_row_sum_kernel)")
    [block] = kernel_excerpt(KERNEL, finding)["blocks"]
    assert dict(block["marked"]) == {line: "named by the finding"}


def test_an_operand_is_the_kernel_parameter_after_the_inputs():
    import ast

    tree = {n.name: n for n in ast.parse(inspect.getsource(grid)).body if isinstance(n, ast.FunctionDef)}
    body, wrapper = tree["_row_sum_kernel"], tree["block_row_sum"]
    assert operand_ref(body, wrapper, "input 0") == "x_ref"
    assert operand_ref(body, wrapper, "output 0") == "o_ref"
    assert operand_ref(body, wrapper, "output 1") is None  # no such parameter
    assert operand_ref(body, tree["_revisit_kernel"], "output 0") is None  # not the caller of this kernel


def test_a_finding_that_names_no_function_of_the_module_has_no_excerpt():
    finding = Finding(kind="mismatch", kernel="acc_across_parallel", backend="interpret", message="outputs differ")
    assert kernel_excerpt(KERNEL, finding) is None
    assert kernel_excerpt(lambda x: x, finding) is None


def test_the_page_shows_the_excerpt_with_the_marked_lines_highlighted():
    finding = Finding(kind="race", kernel="acc_across_parallel", backend="tpu_interpret",
                      message="RACE DETECTED on o_ref (output 0 of _row_sum_kernel)")
    finding = dataclasses.replace(finding, evidence={"source": kernel_excerpt(KERNEL, finding)})
    page = html_page(Report(kernels=[{"name": "acc_across_parallel"}], backends=["tpu_interpret"], findings=[finding]))
    assert "<h3>source: _row_sum_kernel" in page
    assert page.count('<mark title="accesses o_ref">') == 2
    assert "o_ref[...] += x_ref[...]" in page


def test_the_terminal_names_the_marked_lines_and_the_worst_elements_not_their_json():
    from pallas_verify.reports.text import finding_text
    from tests.reports import _pages

    mismatch, race, _ = _pages.verify_findings().findings
    text = finding_text(race)
    assert (f"source: reference_kernels/mutants/grid.py:{_line(grid._row_sum_kernel, 'o_ref[...] +=')} "
            "(_row_sum_kernel): o_ref[...] += x_ref[...]  <- accesses o_ref (output 0)") in text
    assert '"blocks"' not in text
    text = finding_text(mismatch)
    assert "worst elements of out[0] (error in units of the float32 table's tolerance" in text
    assert "  (8, 96): kernel inf, reference 0.09428432, NaN/inf" in text
    assert '"errors"' not in text
