"""Kernel libraries register their specs under the ``pallas_verify.kernels`` entry points:
a third party's module is found by conformance and fuzz planning without being named, and
an entry point that cannot be loaded is reported as invalid, by its name, with the fix."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pallas_verify.backends import registry
from pallas_verify.campaigns.conformance import registered_specs
from pallas_verify.campaigns.plan import FuzzOptions, fuzz_specs
from pallas_verify.errors import InvalidArgument
from pallas_verify.registered import GROUP, registered_sources

SPECS = textwrap.dedent('''
    import numpy as np
    from hypothesis import strategies as st
    from jax.experimental import pallas as pl
    import jax
    import pallas_verify as pv

    def _body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    def double(x):
        return pl.pallas_call(_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    FAKE_DOUBLE = pv.KernelSpec(name="fakelib_double", kernel=double, reference=lambda x: x * 2,
                                configs=st.just({}),
                                inputs=lambda c: st.integers(1, 9).map(lambda n: (np.ones(n, np.float32),)))
''')


def _distribution(root: Path, name: str, entry_points: dict[str, str], files: dict[str, str]) -> Path:
    """A installed-looking distribution under ``root``: its dist-info and its modules."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


@pytest.fixture
def fakelib(tmp_path, monkeypatch):
    """fakelib registers a module; fakepkg a callable listing two modules (one without
    specs); broken names a module that does not exist."""
    root = _distribution(tmp_path / "site", "fakelib", {"fakelib": "fakelib_specs"}, {"fakelib_specs.py": SPECS})
    _distribution(root, "fakepkg", {"fakepkg": "fakepkg:modules"}, {
        "fakepkg/__init__.py": "def modules():\n    return ['fakelib_specs', 'fakepkg.empty']\n",
        "fakepkg/empty.py": "X = 1\n"})
    _distribution(root, "brokenlib", {"broken": "brokenlib_missing.specs"}, {})
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in ("fakelib_specs", "fakepkg", "fakepkg.empty"):
        sys.modules.pop(name, None)


def test_a_registered_module_and_a_callables_modules_are_sources(fakelib):
    invalid: list[dict[str, str]] = []
    sources = {s.module: s.entry for s in registered_sources(invalid)}
    assert sources["fakelib_specs"] == "fakelib = fakelib_specs (fakelib 1.0)"
    assert sources["fakepkg.empty"] == "fakepkg = fakepkg:modules (fakepkg 1.0)"
    assert "reference_kernels.matmul" in sources  # this project's catalog registers the same way
    [broken] = [i for i in invalid if "broken" in i["target"]]
    assert broken["target"] == "entry point broken = brokenlib_missing.specs (brokenlib 1.0)"
    assert "entry point 'broken' of group 'pallas_verify.kernels' cannot be loaded: ModuleNotFoundError" in broken["reason"]
    assert "reinstall it, or uninstall brokenlib" in broken["reason"]


def test_conformance_finds_a_third_party_spec_and_reports_what_did_not_load(fakelib):
    invalid: list[dict[str, str]] = []
    specs = registered_specs("fakelib_*", invalid)
    assert [s.name for s in specs] == ["fakelib_double"]
    targets = [i["target"] for i in invalid]
    assert "entry point broken = brokenlib_missing.specs (brokenlib 1.0)" in targets
    [empty] = [i for i in invalid if i["target"].startswith("fakepkg.empty")]
    assert empty["target"] == "fakepkg.empty (entry point fakepkg = fakepkg:modules (fakepkg 1.0))"
    assert "defines no module-level KernelSpec" in empty["reason"]
    with pytest.raises(InvalidArgument, match=r"broken = brokenlib_missing\.specs .*cannot be loaded"):
        registered_specs("fakelib_*")  # without a list to record them in, it raises


def test_fuzz_planning_finds_a_third_party_spec(fakelib):
    invalid: list[dict[str, str]] = []
    found = fuzz_specs(FuzzOptions(kernels="fakelib_*"), invalid)
    assert [(ref, spec.name) for ref, spec in found] == [("fakelib_specs:FAKE_DOUBLE", "fakelib_double")]
    assert any(i["target"].startswith("entry point broken") for i in invalid)


@pytest.mark.parametrize(("value", "said"), [
    ("fakebad:NOT_CALLABLE", "is a int; it must name a module of KernelSpecs or a callable returning module names"),
    ("fakebad:returns_a_string", "returned 'fakelib_specs'; it must return module names (a list of str)"),
    ("fakebad:returns_none_among", "returned None among its module names"),
    ("fakebad:raises", "raised when called: RuntimeError: no specs today"),
])
def test_an_entry_point_that_gives_no_module_names_is_invalid_with_the_fix(tmp_path, monkeypatch, value, said):
    root = _distribution(tmp_path, "fakebad", {"bad": value}, {"fakebad.py": textwrap.dedent('''
        NOT_CALLABLE = 3
        def returns_a_string(): return "fakelib_specs"
        def returns_none_among(): return ["fakelib_specs", None]
        def raises(): raise RuntimeError("no specs today")
    ''')})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "fakebad", raising=False)
    invalid: list[dict[str, str]] = []
    registered_sources(invalid)
    [bad] = [i for i in invalid if i["target"].startswith("entry point bad ")]
    assert said in bad["reason"] and "fix 'fakebad:" in bad["reason"]


def test_a_spec_name_registered_twice_is_invalid_the_first_kept(tmp_path, monkeypatch, fakelib):
    twin = SPECS.replace("FAKE_DOUBLE", "TWIN")
    root = _distribution(tmp_path / "twin", "fakelib_twin", {"zz_twin": "fakelib_twin_specs"},
                         {"fakelib_twin_specs.py": twin})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "fakelib_twin_specs", raising=False)
    invalid: list[dict[str, str]] = []
    assert [s.module for s in registered_specs("fakelib_*", invalid)] == ["fakelib_specs"]
    [twin_entry] = [i for i in invalid if i["target"].startswith("fakelib_twin_specs")]
    assert twin_entry["reason"].startswith("KernelSpec name 'fakelib_double' is registered by fakelib_specs already")


def test_nothing_registered_says_how_to_register(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    with pytest.raises(InvalidArgument, match="no kernel library registers KernelSpecs under the entry-point group"):
        registered_specs()


def test_a_kernel_whose_library_is_absent_is_skipped_saying_so():
    from reference_kernels.thirdparty._library import needs

    @needs("no-such-dist", "no_such_package_here")
    def kernel(x):
        return x

    spec = registered_specs("ragged_add")[0]
    assert registry.skip_reason(spec, registry.get("interpret")) is None
    absent = dataclasses.replace(spec, kernel=kernel)
    skip = registry.skip_reason(absent, registry.get("interpret"))
    assert skip == registry.Skip("skipped", "the kernel's library no-such-dist is not installed")


@pytest.mark.slow
def test_conformance_runs_a_registered_spec_and_lists_a_broken_entry_point(fakelib, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fakelib), *sys.path])}
    run = subprocess.run(
        [sys.executable, "-m", "pallas_verify.cli", "conformance", "--kernels", "fakelib_*", "--backends",
         "interpret", "--max-examples", "2", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 2, run.stdout + run.stderr  # an invalid entry point is a usage error
    assert "[1/1] fakelib_double: 1 PASS" in run.stdout
    assert "entry point broken = brokenlib_missing.specs (brokenlib 1.0)\n  INVALID SPEC: entry point 'broken'" in run.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [k["name"] for k in report["kernels"]] == ["fakelib_double"]
    assert any(i["target"].startswith("entry point broken") for i in report["invalid_specs"])


def test_planted_kernels_register_too_and_a_broken_entry_point_is_named(tmp_path, monkeypatch):
    from pallas_verify.campaigns.sanitizer import planted_rows
    from pallas_verify.registered import PLANTED_GROUP, registered_planted

    info = tmp_path / "plantlib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plantlib\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{PLANTED_GROUP}]\nplantlib = plantlib_rows:rows\nbroken = nowhere:rows\n")
    (tmp_path / "plantlib_rows.py").write_text(SPECS + textwrap.dedent('''
        import types

        def rows():
            return [types.SimpleNamespace(spec=FAKE_DOUBLE, verdicts={"interpret": ["mismatch"]}, expects=("mismatch",))]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    invalid: list[dict[str, str]] = []
    found = registered_planted(invalid)
    assert "fakelib_double" in [row.spec.name for row in found]  # beside this project's own mutants
    assert [i["target"] for i in invalid] == ["entry point broken = nowhere:rows (plantlib 1.0)"]
    assert "cannot be loaded and called" in invalid[0]["reason"] and "[project.entry-points" in invalid[0]["reason"]
    with pytest.raises(InvalidArgument, match="broken = nowhere:rows"):
        planted_rows("fakelib_*")
