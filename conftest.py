"""Repo-wide pytest configuration: environment before jax, Hypothesis profiles."""

from __future__ import annotations

import os

from pallas_verify._env import COMPILE_CACHE_ENV, configure
from pallas_verify.passes import PASS_CACHE_ENV

configure()  # before anything imports jax
# The project's own tests compile and search everything anew: no persistent compilation
# cache and no kept passes, in this process or in any process a test starts, unless a test
# turns them on itself.
os.environ[COMPILE_CACHE_ENV] = "off"
os.environ[PASS_CACHE_ENV] = "off"

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from pallas_verify.profiles import suite_settings  # noqa: E402

pytest_plugins = ["pytester"]  # the plugin's own tests run pytest inside pytest

# The project's own tests: the engine's ci and dev budgets (deterministic in CI, a little
# more exploratory locally), with Hypothesis's own output and example database.
settings.register_profile("pv-ci", suite_settings("ci"))
settings.register_profile("pv-dev", suite_settings("dev"))
settings.load_profile("pv-ci" if os.environ.get("CI") else os.environ.get("PV_TEST_PROFILE", "pv-dev"))


# The suite's core, which `make test-jax` runs under every other supported JAX release:
# the engine and its attribution of errors, the interpreter backends' params, the plugin,
# the catalog on the interpreters, fuzz and conformance smoke runs (marked `jax_matrix` by
# where they live).
JAX_MATRIX = (
    "tests/engine/test_engine.py", "tests/engine/test_attribution.py", "tests/engine/test_upstream_limitations.py",
    "tests/jax_compat/test_versions.py", "tests/jax_compat/test_error_classification.py",
    "tests/plugin/test_plugin.py", "tests/catalog/test_catalog.py",
    "tests/campaigns/test_conformance.py", "tests/campaigns/test_fuzz.py", "tests/cli/test_verify_cli.py",
    "tests/versions/test_compare.py",
)


def _where(path) -> str:
    return os.path.relpath(str(path), os.path.dirname(__file__)).replace(os.sep, "/")


def pytest_ignore_collect(collection_path, config):
    """Under `-m jax_matrix` (another JAX release), modules outside the core are not even
    imported: some read APIs that release lacks at import time."""
    if config.getoption("markexpr", "") != "jax_matrix" or collection_path.is_dir():
        return None
    where = _where(collection_path)
    return True if where.startswith("tests/") and not where.startswith(JAX_MATRIX) else None


def pytest_collection_modifyitems(config, items):
    missing = None
    if any(item.get_closest_marker("gpu_interpret") for item in items):
        from pallas_verify.backends.interpreters import GpuInterpret

        missing = GpuInterpret().available()  # JAX 0.10 has no GPU interpret mode
    for item in items:
        if _where(item.path).startswith(JAX_MATRIX):
            item.add_marker(pytest.mark.jax_matrix)
        if missing and item.get_closest_marker("gpu_interpret"):
            item.add_marker(pytest.mark.skip(reason=missing))
    # The slow tests first: xdist's workers then share the long ones from the start instead
    # of one worker finishing a long test alone at the end.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


class _LoadGroups:
    """``--dist loadgroup`` sends the tests of one ``xdist_group`` (one Ray cluster, one Redis
    server, one shared search) to one worker by the ``@group`` suffix xdist puts on their node
    ids. xdist 3.8 writes the suffixed id to ``item._nodeid``, which pytest 9 no longer reads
    (it derives the node id from ``item._id``), so each group was split over the workers.
    After xdist's own hook, this carries xdist's id over to where pytest reads it; where the
    two agree (pytest 8, or an xdist that sets ``_id`` itself) it changes nothing."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        for item in items:
            grouped = vars(item).get("_nodeid")
            if grouped is not None and grouped != item.nodeid:
                from _pytest.nodeid import NodeId  # pytest 9's; only pytest 9 gets here

                item._id = NodeId.parse(grouped)


def pytest_configure(config):
    config.pluginmanager.register(_LoadGroups(), "pv-loadgroups")
