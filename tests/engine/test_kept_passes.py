"""What a kept pass depends on (``pallas_verify.passes``): its key, the files it read, and
which reports are kept at all."""

from __future__ import annotations

import os

import pytest

from pallas_verify import passes
from pallas_verify.reports.report import BackendResult, Report


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(passes.PASS_CACHE_ENV, str(tmp_path / "passes"))
    return tmp_path


def _report(status: str = "pass", **kernel) -> Report:
    return Report(backends=["interpret"], kernels=[{"name": "k", **kernel}], seed=0, profile="ci",
                  results=[BackendResult(kernel="k", backend="interpret", status=status, examples=2)])


def _key(**options) -> passes.Key:
    return passes.Key.of("verify", "spec.py", {"seed": 0, **options})


def test_the_key_changes_with_options_seed_and_the_variables_jax_reads(monkeypatch):
    assert _key() == _key()
    assert len({_key(), _key(seed=1), _key(max_examples=3)}) == 3
    assert passes.Key.of("plugin", "spec.py", {"seed": 0}) != _key()
    base = _key()
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_math=true")
    flagged = _key()
    assert flagged != base
    monkeypatch.setenv(passes.PASS_CACHE_ENV, "elsewhere")  # where caches live is no input
    assert _key() == flagged


def test_a_pass_is_reused_while_its_files_are_unchanged(cache):
    mine = cache / "kernel.py"
    mine.write_text("A = 1\n")
    key = _key()
    assert passes.reuse(key) is None
    assert passes.keep(key, _report(), [str(mine)])
    kept = passes.reuse(key)
    assert kept is not None and kept.report["kernels"][0]["name"] == "k"
    assert passes.reuse(_key(seed=1)) is None
    mine.write_text("A = 1\n")  # rewritten unchanged: new times, the same content
    assert passes.reuse(key) is not None
    mine.write_text("A = 2\n")
    assert passes.reuse(key) is None
    mine.write_text("A = 1\n")
    assert passes.reuse(key) is not None
    mine.unlink()
    assert passes.reuse(key) is None


def test_an_edit_that_puts_the_modification_time_back_is_seen(cache):
    mine = cache / "kernel.py"
    mine.write_text("A = 1\n")
    key = _key()
    passes.keep(key, _report(), [str(mine)])
    before = mine.stat()
    mine.write_text("A = 3\n")  # the same size
    os.utime(mine, ns=(before.st_atime_ns, before.st_mtime_ns))  # the change time still moves
    assert passes.reuse(key) is None


def test_only_a_clean_pass_whose_output_is_the_report_is_kept(cache):
    key = _key()
    assert passes.keepable(_report("skipped"))
    for report in (_report("fail"), _report("error"), _report("interrupted"),
                   _report(upstream=[{"backend": "interpret", "reproducer": "out/r.py"}]), Report()):
        assert not passes.keepable(report)
        assert not passes.keep(key, report, [])
    assert not passes.keep(key, _report(), None)  # the files read are not known: nothing kept
    assert passes.reuse(key) is None


def test_off_keeps_and_reuses_nothing(cache, monkeypatch):
    monkeypatch.setenv(passes.PASS_CACHE_ENV, "off")
    assert passes.passes_dir() is None
    assert not passes.keep(_key(), _report(), [])
    assert passes.reuse(_key()) is None
