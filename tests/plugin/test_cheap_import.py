"""The public API and the pytest plugin are cheap to import: nothing heavy until used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pallas_verify as pv
from pallas_verify import plugin, testing


def _loaded_after(code: str, cwd) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert run.returncode == 0, run.stdout + run.stderr
    return set(run.stdout.splitlines()[-1].split())


def test_importing_the_package_loads_neither_jax_pytest_nor_hypothesis(tmp_path):
    loaded = _loaded_after("import pallas_verify", tmp_path)
    assert not {"jax", "pytest", "hypothesis", "numpy"} & loaded
    assert sorted(m for m in loaded if m.startswith("pallas_verify")) == ["pallas_verify"]


def test_a_pytest_run_without_kernel_specs_does_not_load_the_engine(tmp_path):
    (tmp_path / "test_nothing.py").write_text("def test_one():\n    pass\n")
    loaded = _loaded_after("import pytest\nassert pytest.main(['-q', '-p', 'no:cacheprovider', '-p', "
                           "'pallas_verify', '-p', 'no:hypothesispytest']) == 0", tmp_path)
    ours = {m for m in loaded if m.startswith("pallas_verify")}
    assert "pallas_verify.plugin" in ours  # the plugin was active
    assert ours <= {"pallas_verify", "pallas_verify.plugin", "pallas_verify.testing", "pallas_verify._env",
                    "pallas_verify.choices", "pallas_verify._assert_rewrite",
                    "pallas_verify.backends", "pallas_verify.backends.families"}, ours
    assert not {"jax", "numpy", "hypothesis"} & loaded


def test_public_names_load_on_first_use_and_dir_lists_them():
    assert set(pv.__all__) <= set(dir(pv))
    from pallas_verify.spec import KernelSpec
    from pallas_verify.testing import kernel_test

    assert pv.KernelSpec is KernelSpec and pv.kernel_test is kernel_test
    for name in pv.__all__:
        assert getattr(pv, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'kernel_tests'"):
        _ = pv.kernel_tests


def test_kernel_test_is_still_importable_from_the_plugin():
    assert plugin.kernel_test is testing.kernel_test


def test_option_defaults_are_valid_choices_so_they_need_no_check():
    from pallas_verify.execution.sandbox import ISOLATE
    from pallas_verify.profiles import PROFILES

    options = testing.PluginOptions()
    assert options.profile in PROFILES and options.isolate in ISOLATE


def test_only_pallas_verifys_own_packages_are_taken_off_pytests_rewrite_list(tmp_path, monkeypatch):
    """A user's package named like one of pallas-verify's (``strategies``) keeps its rewrite."""
    import importlib

    from pallas_verify._assert_rewrite import _ours

    assert _ours("pallas_verify") and _ours("strategies") and _ours("reference_kernels")
    (tmp_path / "strategies").mkdir()
    (tmp_path / "strategies" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "strategies", raising=False)  # found anew, not as imported here
    importlib.invalidate_caches()
    assert not _ours("strategies")
    assert not _ours("hypothesis") and not _ours("no_such_package")
