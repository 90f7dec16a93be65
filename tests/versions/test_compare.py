"""``pallas-verify compare``: every category of change between two reports, the facts
compared, the exit status, and files that are not reports (a usage error naming them)."""

from __future__ import annotations

import json
import textwrap

import pytest
from _report_dicts import finding, report  # tests/versions/_report_dicts.py

from pallas_verify import cli
from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.compare import (
    CATEGORIES,
    Comparison,
    classify,
    compare_files,
    compare_reports,
    load_report,
    report_jax_version,
)
from pallas_verify.reports.compare_text import summary_lines
from pallas_verify.reports.report import running_jax_version


@pytest.mark.parametrize(("old", "new", "category"), [
    ("pass", "fail", "new failure"),
    ("unsupported", "fail", "new failure"),
    ("skipped", "fail", "new failure"),
    (None, "fail", "new failure"),
    ("fail", "pass", "fixed"),
    ("fail", "fail", "still failing"),
    ("pass", "unsupported", "new n/a"),
    ("fail", "unsupported", "new n/a"),
    ("unsupported", "pass", "n/a gone"),
    (None, "pass", "added"),
    (None, "skipped", "added"),
    ("fail", None, "removed"),
    ("pass", None, "removed"),
    ("fail", "skipped", "not comparable"),
    ("pass", "skipped", "not comparable"),
    ("skipped", "pass", "not comparable"),
    ("interrupted", "fail", "not comparable"),
    ("not_reached", "fail", "not comparable"),
    ("fail", "not_reached", "not comparable"),
    ("pass", "interrupted", "not comparable"),
    ("error", "fail", "not comparable"),
    ("unsupported", "skipped", "not comparable"),
    ("pass", "pass", None),
    ("unsupported", "unsupported", None),
    ("skipped", "skipped", None),
])
def test_each_pair_of_statuses_has_one_category(old, new, category):
    assert classify(old, new) == category


OLD = report({
    ("add", "interpret"): "pass",
    ("add", "interpret+vmap"): "fail: mismatch",
    ("mm", "interpret"): "fail: mismatch",
    ("mm", "tpu_interpret"): "fail: race",
    ("soft", "interpret"): "pass",
    ("soft", "tpu_interpret"): "unsupported: TPU interpret mode cannot run it",
    ("gone", "interpret"): "pass",
    ("late", "interpret"): "not_reached: the budget ran out before it ran",
    ("same", "interpret"): "pass",
}, [finding("mismatch", "add", transform="vmap"), finding("mismatch", "mm"),
    finding("race", "mm", "tpu_interpret", "race on o_ref\nat line 3")], jax_version="0.11.2")
NEW = report({
    ("add", "interpret"): "fail: exception",
    ("add", "interpret+vmap"): "pass",
    ("mm", "interpret"): "fail: mismatch, out_of_bounds",
    ("mm", "tpu_interpret"): "fail: race",
    ("soft", "interpret"): "unsupported: an upstream limitation",
    ("soft", "tpu_interpret"): "pass",
    ("late", "interpret"): "pass",
    ("same", "interpret"): "pass",
    ("fresh", "interpret"): "pass",
}, [finding("exception", "add", message="AttributeError: module has no attribute 'reciprocal'\nTraceback"),
    finding("mismatch", "mm"), finding("out_of_bounds", "mm", "interpret", "block index 3 outside\nmore"),
    finding("race", "mm", "tpu_interpret", "race on o_ref\nat line 4")], jax_version="0.12.0.1", profile="dev")


def test_every_category_from_two_reports():
    comparison = compare_reports(OLD, NEW)
    got = {(c.kernel, c.cell): c.category for c in comparison.changes}
    assert got == {("add", "interpret"): "new failure", ("add", "interpret+vmap"): "fixed",
                   ("mm", "interpret"): "still failing", ("mm", "tpu_interpret"): "still failing",
                   ("soft", "interpret"): "new n/a", ("soft", "tpu_interpret"): "n/a gone",
                   ("gone", "interpret"): "removed", ("late", "interpret"): "not comparable",
                   ("fresh", "interpret"): "added"}
    assert comparison.unchanged == 1  # same/interpret
    [regression] = comparison.regressions
    assert [s.text() for s in regression.now] == ["exception: AttributeError: module has no attribute 'reciprocal'"]
    [fixed] = comparison.of("fixed")
    assert [s.text() for s in fixed.was] == ["mismatch: mismatch in add"] and fixed.now == ()
    grown, same = comparison.of("still failing")
    assert grown.kinds_changed and [s.text() for s in grown.appeared] == ["out_of_bounds: block index 3 outside"]
    assert not same.kinds_changed and same.appeared == ()  # matched by kind: a new message is no new finding
    assert comparison.of("new n/a")[0].why_new == "an upstream limitation"
    assert comparison.of("n/a gone")[0].why_old == "TPU interpret mode cannot run it"
    assert comparison.status == 1


def test_the_facts_of_both_runs():
    comparison = compare_reports(OLD, NEW)
    assert (comparison.fact("jax_version").old, comparison.fact("jax_version").new) == ("0.11.2", "0.12.0.1")
    assert comparison.fact("profile").differs and not comparison.fact("seed").differs
    lines = summary_lines(comparison)
    assert "jax_version: 0.11.2 -> 0.12.0.1" in lines and "profile: ci -> dev" in lines
    assert "seed: 0" not in lines  # a fact alike in both is not said (but the JAX release)
    assert " ".join(line.strip() for line in lines[-2:]) == (  # wrapped at 100 columns
        "1 new failure, 1 fixed, 2 still failing, 1 new n/a, 1 n/a gone, 1 added, 1 removed, 1 not comparable; "
        "1 cells unchanged")
    assert all(len(line) <= 100 for line in lines)


@pytest.mark.parametrize(("top", "version"), [
    ({"jax_version": "0.12.0.1"}, "0.12.0.1"),
    ({"jax": "0.11.2"}, "0.11.2"),
    ({"kernels": [{"name": "k", "upstream": [{"backend": "interpret", "jax_version": "0.10.2"}]}]}, "0.10.2"),
    ({}, None),
])
def test_the_jax_release_a_report_ran_on(top, version):
    assert report_jax_version({"kernels": [], **top}) == version


BROKEN = report({("k", "interpret"): "fail: mismatch"}, [finding("mismatch", "k")])
MENDED = report({("k", "interpret"): "pass", ("k", "tpu_interpret"): "unsupported: no TPU interpret here"})


def test_nothing_new_failing_exits_zero_and_a_report_compared_to_itself_has_no_changes():
    mended = compare_reports(BROKEN, MENDED)
    assert [c.category for c in mended.changes] == ["fixed", "added"] and mended.status == 0
    assert [c.category for c in compare_reports(MENDED, BROKEN).changes] == ["new failure", "removed"]
    itself = compare_reports(OLD, OLD)
    assert [c.category for c in itself.changes] == ["still failing"] * 3 and itself.status == 0


def test_a_comparison_reads_back_from_its_json():
    comparison = compare_reports(OLD, NEW, old_path="a.json", new_path="b.json")
    data = json.loads(json.dumps(comparison.to_dict()))
    assert Comparison.from_dict(data) == comparison
    assert data["counts"] == dict.fromkeys(CATEGORIES, 1) | {"still failing": 2} and data["exit_status"] == 1


@pytest.mark.parametrize(("content", "problem"), [
    (None, "does not exist"),
    ("{not json", "cannot be read as JSON"),
    ("[1, 2]", "it holds a JSON list, not an object"),
    ('{"version": 2, "kernels": [], "findings": []}', "its 'version' is 2, not 1"),
    ('{"version": 1, "findings": []}', "it has no 'kernels' list"),
    ('{"version": 1, "kernels": [{"name": "k"}], "findings": [{"kind": "race"}]}', "it has no 'findings' list"),
])
def test_a_file_that_is_not_a_report_is_named_with_what_is_wrong(tmp_path, content, problem):
    path = tmp_path / "x.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidArgument, match=problem) as caught:
        load_report(path)
    assert str(path) in str(caught.value) and "give a report.json written by" in str(caught.value)


def test_a_run_folder_stands_for_its_report(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.json").write_text(json.dumps(OLD))
    assert compare_files(tmp_path / "run", tmp_path / "run" / "report.json").changes[0].category == "still failing"
    with pytest.raises(InvalidArgument, match=r"is a folder without a report\.json"):
        load_report(tmp_path)


def test_the_cli_exits_two_naming_the_file_that_is_not_a_report(tmp_path, capsys):
    (tmp_path / "old.json").write_text(json.dumps(OLD))
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    assert cli.main(["compare", str(tmp_path / "old.json"), str(tmp_path / "notes.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pallas-verify: error: {str(tmp_path / 'notes.json')!r} is not a report: its 'version'")


def test_the_cli_writes_compare_json_and_md_and_exits_one_on_a_regression(tmp_path, capsys):
    (tmp_path / "old.json").write_text(json.dumps(OLD))
    (tmp_path / "new.json").write_text(json.dumps(NEW))
    assert cli.main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--out", str(tmp_path / "c")]) == 1
    out = capsys.readouterr().out
    assert "new failure (1):\n  add interpret: pass -> fail: exception: AttributeError: module has no attribute" in out
    data = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert data == compare_files(tmp_path / "old.json", tmp_path / "new.json").to_dict()
    assert "## new failure (1)" in (tmp_path / "c" / "compare.md").read_text()
    page = (tmp_path / "c" / "compare.html").read_text()
    assert '<h2 class="bad">new failure (1)</h2>' in page
    assert ('<tr><th>add</th><td>interpret</td><td><span class="b pass">PASS</span> &rarr; '
            '<span class="b fail">FAIL</span></td>') in page
    (tmp_path / "broken.json").write_text(json.dumps(BROKEN))
    (tmp_path / "mended.json").write_text(json.dumps(MENDED))
    assert cli.main(["compare", str(tmp_path / "broken.json"), str(tmp_path / "mended.json")]) == 0
    assert "fixed (1):\n  k interpret: fail -> pass (was mismatch: mismatch in k)" in capsys.readouterr().out


SPEC = textwrap.dedent('''
    import jax
    import numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl

    import pallas_verify as pv


    def _body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * {factor}


    def scale(x):
        return pl.pallas_call(_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


    def inputs(config):
        return st.integers(0, 2**32 - 1).map(
            lambda seed: (np.random.default_rng(seed).standard_normal((8, 128)).astype(np.float32),))


    SCALE = pv.KernelSpec(name="scale", kernel=scale, reference=lambda x: x * 2, configs=st.just({{}}),
                          inputs=inputs, platforms=("tpu",))
''')


@pytest.mark.slow
def test_compare_two_real_verify_runs(tmp_path, capsys):
    """A kernel right in one run and wrong in the next: the comparison says what broke."""
    for name, factor in (("before", 2), ("after", 3)):
        (tmp_path / f"{name}.py").write_text(SPEC.format(factor=factor))
        cli.main(["verify", str(tmp_path / f"{name}.py"), "--backends", "interpret", "--max-examples", "2",
                  "--seed", "0", "--out", str(tmp_path / name)])
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "before"), str(tmp_path / "after")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"old: {tmp_path / 'before' / 'report.json'}", f"new: {tmp_path / 'after' / 'report.json'}"]
    assert lines[2] == f"jax_version: {running_jax_version()}"  # written by every run, the same in both
    assert lines[3] == "new failure (1):" and lines[4].startswith("  scale interpret: pass -> fail: mismatch: ")
