"""``pallas-verify conformance --jax``: releases and environments named on the command line,
where each release's environment is found, the sentences and the exit status of the
matrix, a release that cannot start, and two real JAX releases whose Pallas APIs differ."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
from _report_dicts import finding, report  # tests/versions/_report_dicts.py

from pallas_verify import cli
from pallas_verify.campaigns.jaxenvs import cache_root, find_env, parse_envs, parse_releases
from pallas_verify.campaigns.versions import Matrix, Step, VersionRun, change_line
from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.compare import Change, compare_reports

ROOT = Path(__file__).parents[2]
INSTALLED = importlib.metadata.version("jax")


def test_releases_sort_oldest_first_each_once():
    assert parse_releases("0.12.0.1, 0.11.2,0.10.2,0.11.2") == ("0.10.2", "0.11.2", "0.12.0.1")


@pytest.mark.parametrize(("call", "message"), [
    (lambda: parse_releases(""), "--jax '' names no JAX release"),
    (lambda: parse_releases("0.11.2,latest"), "--jax 'latest' is not a JAX release number"),
    (lambda: parse_releases("0.12.0rc1"), "--jax '0.12.0rc1' is not a JAX release number"),
    (lambda: parse_envs(["0.11.2"], cwd=Path("/")), "--jax-env '0.11.2' is not VERSION=PATH"),
    (lambda: parse_envs(["0.11.2="], cwd=Path("/")), "--jax-env '0.11.2=' is not VERSION=PATH"),
    (lambda: parse_envs(["0.11.2=/no/such/venv"], cwd=Path("/")), "'/no/such/venv' is neither a Python executable"),
    (lambda: parse_envs([f"next={sys.executable}"], cwd=Path("/")), "--jax-env 'next' is not a JAX release number"),
])
def test_bad_releases_and_environments_are_named_with_the_fix(call, message):
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


def _fake_python(path: Path, script: str = "exit 1") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def test_an_environment_is_the_one_given_then_this_interpreter_then_venvs_then_the_cache(tmp_path):
    venv = _fake_python(tmp_path / ".venvs" / "jax-0.10.1" / "bin" / "python")
    cached = _fake_python(tmp_path / "cache" / "jax-0.11.1" / "bin" / "python")
    (cached.parents[1] / ".installed").write_text("jax==0.11.1\n")
    given = parse_envs([f"0.10.0={venv.parents[1]}", f"{INSTALLED}={venv}"], cwd=tmp_path)

    def found(version):
        env = find_env(version, given, cwd=tmp_path, cache=tmp_path / "cache", say=pytest.fail)
        return env.python, env.origin

    assert found("0.10.0") == (str(venv), "--jax-env")  # a venv folder stands for its bin/python
    assert found(INSTALLED) == (str(venv), "--jax-env")
    assert find_env(INSTALLED, {}, cwd=tmp_path, cache=tmp_path, say=pytest.fail).origin == "this interpreter"
    assert found("0.10.1") == (str(venv), ".venvs")
    assert found("0.11.1") == (str(cached), "cache")


def test_the_cache_follows_xdg_cache_home():
    assert cache_root({"XDG_CACHE_HOME": "/c"}) == Path("/c/pallas-verify/venvs")
    assert cache_root({}) == Path.home() / ".cache" / "pallas-verify" / "venvs"


def _step(old_cells, new_cells, old_findings=(), new_findings=()):
    return Step(old="0.11.2", new="0.12.0.1",
                comparison=compare_reports(report(old_cells, old_findings), report(new_cells, new_findings)))


def _run(version, status=0, report_path="r.json"):
    return VersionRun(jax=version, exit_status=status, report=report_path)


SAME = _step({("k", "interpret"): "pass"}, {("k", "interpret"): "pass"})
BROKE = _step({("k", "interpret"): "pass"}, {("k", "interpret"): "fail: exception"},
              new_findings=[finding("exception", "k", message="AttributeError: no 'reciprocal'")])
FAILS_ALIKE = _step({("k", "interpret"): "fail: mismatch"}, {("k", "interpret"): "fail: mismatch"},
                    [finding("mismatch", "k")], [finding("mismatch", "k")])
FIXED = _step({("k", "interpret"): "fail: exception"}, {("k", "interpret"): "pass"},
              [finding("exception", "k", message="boom\nTraceback ...")])
FAILS_OTHERWISE = _step({("k", "interpret"): "fail: mismatch"}, {("k", "interpret"): "fail: race"},
                        [finding("mismatch", "k")], [finding("race", "k")])
UNREACHED = _step({("k", "interpret"): "pass"}, {("k", "interpret"): "not_reached: the budget ran out"})


@pytest.mark.parametrize(("runs", "steps", "interrupted", "status"), [
    ([_run("0.11.2"), _run("0.12.0.1")], [SAME], False, 0),
    ([_run("0.11.2", 1), _run("0.12.0.1")], [SAME], False, 1),  # a release's run found something
    ([_run("0.11.2", 1), _run("0.12.0.1", 1)], [FAILS_ALIKE], False, 1),
    ([_run("0.11.2"), _run("0.12.0.1", 1)], [BROKE], False, 1),
    ([_run("0.11.2"), _run("0.12.0.1", 4)], [UNREACHED], False, 4),  # not comparable is no difference
    ([VersionRun(jax="0.10.2", error="cannot start: ..."), _run("0.11.2"), _run("0.12.0.1")], [SAME], False, 4),
    ([_run("0.11.2", 2, None), _run("0.12.0.1", 2, None)], [], False, 2),  # the command itself is wrong
    ([VersionRun(jax="0.10.2", error="cannot start"), _run("0.11.2", 2, None)], [], False, 1),
    ([_run("0.11.2"), VersionRun(jax="0.12.0.1", error="not run: stopped by SIGINT")], [], True, 130),
    ([_run("0.11.2", 1), VersionRun(jax="0.12.0.1", error="not run: stopped by SIGINT")], [], True, 1),
])
def test_the_exit_status_of_the_matrix(runs, steps, interrupted, status):
    assert Matrix(runs=tuple(runs), steps=tuple(steps), interrupted=interrupted).status == status


def _change(category, old, new, **more):
    return Change(kernel="k", cell="interpret", category=category, old=old, new=new, **more)


@pytest.mark.parametrize(("change", "sentence"), [
    (BROKE.changes[0], "works on 0.11.2, fails on 0.12.0.1: exception: AttributeError: no 'reciprocal'"),
    (FIXED.changes[0], "works on 0.12.0.1, fails on 0.11.2: exception: boom"),
    (_change("new failure", "unsupported", "fail"), "n/a on 0.11.2, fails on 0.12.0.1"),
    (FAILS_OTHERWISE.changes[0], "fails on both: mismatch: mismatch in k on 0.11.2; race: race in k on 0.12.0.1"),
    (_change("new n/a", "pass", "unsupported", why_new="JAX cannot run it"),
     "runs on 0.11.2 (pass), n/a on 0.12.0.1: JAX cannot run it"),
    (_change("n/a gone", "unsupported", "pass", why_old="JAX could not"),
     "runs on 0.12.0.1 (pass), n/a on 0.11.2: JAX could not"),
    (_change("added", None, "pass"), "only on 0.12.0.1 (pass)"),
    (_change("removed", "fail", None), "only on 0.11.2 (fail)"),
    (_change("not comparable", "pass", "not_reached", why_new="the budget ran out"),
     "pass on 0.11.2, not reached on 0.12.0.1 (not comparable): the budget ran out"),
])
def test_what_changed_between_two_releases_as_a_sentence(change, sentence):
    assert change_line(change, "0.11.2", "0.12.0.1") == sentence


@pytest.mark.parametrize(("args", "message"), [
    (["--jax", "0.x"], "--jax '0.x' is not a JAX release number"),
    (["--jax-env", "0.11.2=/no/such/python"], "'/no/such/python' is neither a Python executable"),
])
def test_a_bad_jax_option_exits_two_before_any_run(tmp_path, capsys, args, message):
    assert cli.main(["conformance", "spec.py", *args, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_release_that_cannot_import_pallas_verify_is_recorded_and_the_others_still_run(tmp_path, capsys,
                                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken = _fake_python(tmp_path / "broken" / "python",
                          "echo \"ModuleNotFoundError: No module named 'pallas_verify'\" >&2; exit 1")
    stale = _fake_python(tmp_path / "stale" / "python", "echo 0.8.1")  # imports fine, but runs jax 0.8.1
    status = cli.main(["conformance", "spec.py", "--jax-env", f"0.10.1={broken}", "--jax-env", f"0.11.1={stale}",
                       "--out", "out"])
    assert status == 4  # nothing found, but no release has a report
    out = capsys.readouterr().out
    assert f"jax 0.10.1: no report: cannot start: `import pallas_verify` fails under {broken} (--jax-env; exit 1):" in out
    assert "  ModuleNotFoundError: No module named 'pallas_verify'" in out
    assert f"jax 0.11.1: no report: cannot start: {stale} (--jax-env) runs jax 0.8.1, not 0.11.1; give " in out
    data = json.loads((tmp_path / "out" / "versions.json").read_text())
    assert [(r["jax"], r["report"], r["exit_status"]) for r in data["runs"]] == [("0.10.1", None, None),
                                                                                ("0.11.1", None, None)]
    assert data["comparisons"] == [] and data["exit_status"] == 4
    assert "fewer than two releases have a report" in out
    assert "No release has a report: nothing to draw." in (tmp_path / "out" / "versions.html").read_text()


@pytest.mark.slow
def test_an_environment_that_cannot_be_made_names_the_release_and_pips_last_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds nothing, at once
    assert cli.main(["conformance", "spec.py", "--jax", "0.10.1", "--out", "out"]) == 4
    out = capsys.readouterr().out
    folder = tmp_path / "cache" / "pallas-verify" / "venvs" / "jax-0.10.1"
    assert f"jax 0.10.1: {sys.executable} -m venv --clear {folder}" in out  # each step said as it runs
    assert "jax 0.10.1: no report: cannot start: making the environment of jax 0.10.1 failed: " in out
    assert "-m pip install --quiet jax==0.10.1 jaxlib==0.10.1 -e " in out and "exited 1:" in out
    assert "fix it, or give one: --jax-env 0.10.1=PATH" in out
    assert not (folder / ".installed").exists()


# A kernel per Pallas API that an older JAX release lacks: pltpu.reciprocal (not in 0.10.2,
# where it was pl.reciprocal) and jax.lax.polynomial (new in 0.12).
API_SPECS = textwrap.dedent('''
    import jax
    import numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    import pallas_verify as pv


    def _recip_body(x_ref, o_ref):
        o_ref[...] = pltpu.reciprocal(x_ref[...], approx=False)


    def _poly_body(x_ref, o_ref):
        o_ref[...] = jax.lax.polynomial(x_ref[...], [1.0, 2.0, 3.0])


    def _call(body):
        return lambda x: pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


    def positive(config):
        return st.integers(0, 2**32 - 1).map(
            lambda seed: (np.random.default_rng(seed).uniform(0.5, 4.0, (8, 128)).astype(np.float32),))


    RECIP = pv.KernelSpec(name="recip", kernel=_call(_recip_body), reference=lambda x: 1.0 / x,
                          configs=st.just({}), inputs=positive, platforms=("tpu",))
    POLY = pv.KernelSpec(name="poly", kernel=_call(_poly_body), reference=lambda x: 1.0 + x * (2.0 + x * 3.0),
                         configs=st.just({}), inputs=positive, platforms=("tpu",))
''')


#: The older releases, each with the kernel of API_SPECS it lacks the API of (and what the
#: next release up, which has it, says about it).
OLDER = {"0.10.2": ("recip", "module 'jax.experimental.pallas.tpu' has no attribute 'reciprocal'"),
         "0.11.2": ("poly", "module 'jax.lax' has no attribute 'polynomial'")}


@pytest.mark.slow
@pytest.mark.jax_versions
def test_two_jax_releases_whose_pallas_apis_differ(tmp_path, capsys, monkeypatch):
    """One matrix of three releases (each release run once): each consecutive two differ in
    one Pallas API, and the kernel using it works on the newer, fails on the older."""
    venvs = {older: ROOT / ".venvs" / f"jax-{older}" for older in OLDER}
    missing_venvs = [str(v.relative_to(ROOT)) for v in venvs.values() if not (v / ".installed").is_file()]
    if missing_venvs:
        pytest.skip(f"no {', '.join(missing_venvs)}: `make test-jax` (or make .venvs/jax-VERSION/.installed) "
                    "builds them")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "api_specs.py").write_text(API_SPECS)
    given = [arg for older, venv in venvs.items() for arg in ("--jax-env", f"{older}={venv}")]
    status = cli.main(["conformance", "api_specs.py", "--backends", "interpret", "--max-examples", "2", *given,
                       "--jax-env", f"{INSTALLED}={sys.executable}", "--out", "out"])
    out = capsys.readouterr().out
    assert status == 1, out
    said = " ".join(out.split())  # the sentence wraps at 100 columns
    data = json.loads((tmp_path / "out" / "versions.json").read_text())
    assert [(r["jax"], r["jax_version"], r["exit_status"]) for r in data["runs"]] == [
        ("0.10.2", "0.10.2", 1), ("0.11.2", "0.11.2", 1), (INSTALLED, INSTALLED, 0)]
    newer = {"0.10.2": "0.11.2", "0.11.2": INSTALLED}
    assert [(step["old_jax"], step["new_jax"]) for step in data["comparisons"]] == list(newer.items())
    for step, (older, (kernel, missing)) in zip(data["comparisons"], OLDER.items(), strict=True):
        assert (f"{kernel} interpret: works on {newer[older]}, fails on {older}: exception: AttributeError: "
                f"{missing}" in said), out
        fixed = next(c for c in step["changes"] if c["kernel"] == kernel)
        assert fixed["category"] == "fixed"
        assert fixed["was"] == [{"kind": "exception", "backend": "interpret", "message": f"AttributeError: {missing}"}]
    assert all(os.path.isfile(run["log"]) for run in data["runs"]) and (tmp_path / "out" / "versions.md").is_file()


def test_a_release_outside_the_supported_range_is_a_usage_error_naming_the_range():
    import re
    import tomllib
    from pathlib import Path

    from pallas_verify.campaigns.jaxenvs import SUPPORTED, parse_releases
    from pallas_verify.errors import InvalidArgument

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    [jax_dep] = [d for d in project["project"]["dependencies"] if re.match(r"jax\b", d)]
    low, high = (".".join(map(str, v)) for v in SUPPORTED)
    assert jax_dep == f"jax>={low},<{high}"  # the range the matrix accepts is the one pip installs against
    assert parse_releases("0.12.0.1,0.10.2") == ("0.10.2", "0.12.0.1")
    for bad in ("0.9.9", "0.13.0"):
        with pytest.raises(InvalidArgument, match=rf"--jax '{bad}' is not a JAX release pallas-verify supports: "
                                                  r"it runs on jax>=0.10,<0.13"):
            parse_releases(f"0.12.0.1,{bad}")
