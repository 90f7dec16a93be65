"""The pytest plugin: KernelSpecs collected per backend, failures with evidence, options."""

from __future__ import annotations

import json

import pytest

FAST = ("--pv-max-examples", "2", "--pv-isolate", "never", "-p", "no:cacheprovider")


def test_module_level_spec_is_one_item_per_default_backend(pytester, spec_file, spec_line):
    from pallas_verify.testing import DEFAULT_BACKENDS, DEFAULT_INTERPRETERS, default_backends

    assert default_backends() == DEFAULT_BACKENDS and DEFAULT_BACKENDS[:3] == DEFAULT_INTERPRETERS
    spec_file(spec_line("DOUBLE", "double"))
    # The ci profile's header (the seed it fixes) is said by the same collection.
    result = pytester.runpytest_subprocess("--collect-only", "--pv-profile", "ci")
    result.stdout.fnmatch_lines([
        "pallas-verify: seed=0 (deterministic profile: repeat with --pv-seed 0), profile=ci*",
        "*<Module test_kernels.py>",
        *(f"*<KernelItem double[[]{b}[]]>" for b in DEFAULT_BACKENDS),
        f"*= {len(DEFAULT_BACKENDS)} tests collected*",
    ])


def test_the_tools_modules_load_unrewritten_and_a_users_asserts_are_still_explained(pytester, spec_file, spec_line,
                                                                                     monkeypatch):
    from pallas_verify.execution.process import import_path

    # Found on sys.path, as from a wheel in site-packages (an editable install's own finder
    # is one pytest's hook never rewrites from).
    monkeypatch.setenv("PYTHONPATH", import_path())
    spec_file(spec_line("DOUBLE", "double"))
    pytester.makepyfile(test_loaders="""
        import sys

        import pallas_verify.engine, reference_kernels.elementwise, strategies.grids

        def test_the_tools_modules_are_plain():
            names = ("pallas_verify.engine", "reference_kernels.elementwise", "strategies.grids")
            loaders = {name: type(sys.modules[name].__loader__).__name__ for name in names}
            assert "AssertionRewritingHook" not in loaders.values(), loaders

        def test_a_users_assert():
            assert [1, 2] == [1, 3]
    """)
    result = pytester.runpytest_subprocess(*FAST, "--pv-backends", "interpret", "test_loaders.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*At index 1 diff: 2 != 3*"])  # the user's test module is rewritten


def test_header_prints_seed_profile_and_backends(pytester, spec_file, spec_line):
    spec_file(spec_line("DOUBLE", "double"))
    result = pytester.runpytest_subprocess("--collect-only", "--pv-seed", "7", "--pv-backends", "interpret")
    result.stdout.fnmatch_lines(["pallas-verify: seed=7 (repeat with --pv-seed 7), profile=dev, backends=interpret*"])
    # profile=ci (seed 0, deterministic): test_module_level_spec_is_one_item_per_default_backend


def test_correct_spec_passes_and_k_selects_one_backend(pytester, spec_file, spec_line):
    spec_file(spec_line("DOUBLE", "double"))
    from pallas_verify.testing import DEFAULT_BACKENDS

    result = pytester.runpytest_subprocess(*FAST, "-k", "double and interpret and not tpu and not gpu", "-v")
    result.stdout.fnmatch_lines(["*double[[]interpret[]] PASSED*"])
    result.assert_outcomes(passed=1, deselected=len(DEFAULT_BACKENDS) - 1)


def test_buggy_spec_fails_with_evidence_and_reproducer(pytester, spec_file, spec_line):
    spec_file(spec_line("SHIFTED", "double_shifted", shift=1))
    result = pytester.runpytest_subprocess("--pv-max-examples", "2", "--pv-backends", "interpret", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*double_shifted[[]interpret[]]*",
        "1 finding:",
        "[[]mismatch[]] double_shifted on interpret",
        "outputs differ from the reference:",
        "out: shape=(16, 128) dtype=float32: 2048/2048 bad*",
        "minimal config: {'block': 8}",
        "reproduce: python *double_shifted-mismatch-interpret.py",
    ])
    script = next(pytester.path.glob("pv-out/double_shifted-mismatch-interpret.py"))
    assert "test_kernels.py::SHIFTED'" in script.read_text()  # a top-level module loads by path


def test_backend_of_another_platform_is_collected_as_skipped(pytester, spec_file, spec_line):
    spec_file(spec_line("GPU_ONLY", "gpu_only", platforms=("gpu",)))
    result = pytester.runpytest_subprocess(*FAST, "--pv-backends", "tpu_interpret", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.re_match_lines([r"SKIPPED \[1\] test_kernels.py(:\d+)?: tpu_interpret serves \['tpu'\]; the kernel targets \['gpu'\]"])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--pv-backends", "tpu_interprett"), "*backend='tpu_interprett' is not a known backend*tpu_interpret*"),
        (("--pv-backends", ","), "*--pv-backends names no backend*"),
        (("--pv-profile", "nightlyy"), "*profile='nightlyy' is not one of ('dev', 'ci', 'nightly')*"),
        (("--pv-max-examples", "0"), "*--pv-max-examples=0 must be a positive integer*"),
        (("--pv-isolate", "sometimes"), "*--pv-isolate='sometimes' is not one of*"),
    ],
)
def test_bad_options_are_usage_errors(pytester, option, message):
    result = pytester.runpytest_subprocess(*option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_report_dir_gets_json_html_and_junit(pytester, spec_file, spec_line):
    spec_file(spec_line("DOUBLE", "double", platforms=("tpu",)),
              spec_line("SHIFTED", "double_shifted", shift=1, platforms=("tpu",)))
    result = pytester.runpytest_subprocess(*FAST, "--pv-backends", "interpret,gpu_interpret", "--pv-report", "rep",
                                "--pv-shrink-budget", "5")
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.fnmatch_lines(["pallas-verify report: *rep/report.html (JSON: *rep/report.json)"])
    data = json.loads((pytester.path / "rep" / "report.json").read_text())
    cells = {(k["name"], b): r["status"] for k in data["kernels"] for b, r in k["results"].items()}
    assert cells[("double", "interpret")] == "pass"
    assert cells[("double_shifted", "interpret")] == "fail"
    assert cells[("double_shifted", "gpu_interpret")] == "skipped"
    assert [f["kind"] for f in data["findings"]] == ["mismatch"]
    assert (pytester.path / "rep" / "report.junit.xml").is_file()
    assert "double_shifted" in (pytester.path / "rep" / "report.html").read_text()


def test_kernel_test_verifies_a_spec_built_in_a_function(pytester, spec_file, spec_line):
    spec_file(extra='''

def test_built_here():
    spec = pv.KernelSpec(name="inner_shifted", kernel=_make(1), reference=reference, configs=CONFIGS,
                         inputs=inputs)
    pv.kernel_test(spec, backends=["interpret"])


def test_built_here_and_correct():
    spec = pv.KernelSpec(name="inner", kernel=_make(0), reference=reference, configs=CONFIGS, inputs=inputs)
    report = pv.kernel_test(spec, backends=["interpret"])
    assert [r.status for r in report.results] == ["pass"]
''', stem="inner")
    result = pytester.runpytest_subprocess(*FAST)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*KernelFindingsError: 1 finding:*", "*[[]mismatch[]] inner_shifted on interpret"])


@pytest.mark.slow
def test_xdist_runs_items_in_workers_and_merges_the_report(pytester, spec_file, spec_line):
    spec_file(spec_line("DOUBLE", "double"), spec_line("SHIFTED", "double_shifted", shift=1))
    result = pytester.runpytest_subprocess(*FAST, "-n", "2", "--pv-backends", "interpret,tpu_interpret",
                                           "--pv-report", "rep", "--pv-shrink-budget", "5", "--pv-seed", "3")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    data = json.loads((pytester.path / "rep" / "report.json").read_text())
    assert data["seed"] == 3
    assert sorted((f["kernel"], f["backend"]) for f in data["findings"]) == [
        ("double_shifted", "interpret"), ("double_shifted", "tpu_interpret")]
    assert len([b for k in data["kernels"] for b in k["results"]]) == 4
    assert not (pytester.path / "rep" / ".parts").exists()


def test_a_pass_no_sanitizer_judged_is_said_in_the_terminal_summary(pytester, spec_file, spec_line):
    spec_file(spec_line("DOUBLE", "double", platforms=("tpu",)))
    result = pytester.runpytest_subprocess(*FAST, "--pv-backends", "interpret")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pallas-verify: double judged without a sanitizer on tpu: tpu_interpret did not "
                                 "judge it (not among the backends run): no race, out-of-bounds or*"])
    both = pytester.runpytest_subprocess(*FAST, "--pv-backends", "interpret,tpu_interpret")
    both.assert_outcomes(passed=2)
    assert "judged without a sanitizer" not in both.stdout.str()


def test_compiles_are_kept_across_sessions_unless_told_not_to(pytester, spec_file, spec_line, monkeypatch, tmp_path):
    from pallas_verify._env import COMPILE_CACHE_ENV

    spec_file(spec_line("DOUBLE", "double"))
    monkeypatch.setenv(COMPILE_CACHE_ENV, str(tmp_path / "off"))
    args = ("--pv-max-examples", "1", "--pv-backends", "interpret", "-p", "no:cacheprovider")
    pytester.runpytest_subprocess(*args, "--pv-no-compile-cache").assert_outcomes(passed=1)
    assert not (tmp_path / "off").exists()
    monkeypatch.setenv(COMPILE_CACHE_ENV, str(tmp_path / "kept"))
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    kept = {p.name.split("-")[0] for p in (tmp_path / "kept").rglob("jit_*-cache")}
    assert {"jit_kernel", "jit_reference"} <= kept  # the kernel's (in the worker), the reference's (here)


def test_a_seeded_pass_is_kept_and_reused_until_a_file_changes(pytester, spec_file, spec_line, monkeypatch, tmp_path):
    from pallas_verify.passes import PASS_CACHE_ENV

    spec_file(spec_line("DOUBLE", "double"))
    monkeypatch.setenv(PASS_CACHE_ENV, str(tmp_path / "passes"))
    args = ("--pv-max-examples", "1", "--pv-backends", "interpret", "--pv-profile", "ci", "-p", "no:cacheprovider")
    kept = "pallas-verify: 1 passed as kept passes*"
    first = pytester.runpytest_subprocess(*args)
    first.assert_outcomes(passed=1)
    assert "kept passes" not in first.stdout.str()
    again = pytester.runpytest_subprocess(*args, "--pv-report", "rep")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines([kept])
    [kept] = json.loads((pytester.path / "rep" / "report.json").read_text())["run"]["kept"]
    assert kept["kernels"] == ["double"] and kept["backends"] == ["interpret"]
    assert "kept passes" not in pytester.runpytest_subprocess(*args, "--pv-no-pass-cache").stdout.str()
    spec_file(spec_line("SHIFTED", "double_shifted", shift=1))  # the test module edited: a bug planted
    pytester.runpytest_subprocess(*args).assert_outcomes(failed=1)
