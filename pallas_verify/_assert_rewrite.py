"""pytest's assertion rewriting, kept off pallas-verify's own packages.

pytest rewrites the asserts of every module of a plugin's distribution: here the tool,
its catalog and its strategies, about 110 modules a session imports. That costs about
0.3 s per session wherever bytecode is not written (PYTHONDONTWRITEBYTECODE, a read-only
install), and once per pytest release elsewhere, and explains nothing: their asserts are
the tool's invariants, whose failure it reports as its own error. A user's tests,
conftests and the helpers they register with ``pytest.register_assert_rewrite`` are
rewritten as before. Cheap to import: the plugin loads it in every session.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["not_rewritten"]

# The top-level packages of pallas-verify's distribution (pyproject.toml).
_OWN_PACKAGES = frozenset({"pallas_verify", "reference_kernels", "strategies"})


def not_rewritten(pluginmanager: Any) -> None:
    """Take pallas-verify's own packages off the list of ``pluginmanager``'s rewrite hook,
    so that they load as plain modules from here on. Where pytest's hook keeps no such
    list (another release of it), nothing changes."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked, cache = getattr(hook, "_must_rewrite", None), getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(marked, set) and isinstance(cache, dict):
        marked.difference_update(name for name in _OWN_PACKAGES & marked if _ours(name))
        cache.clear()


def _ours(package: str) -> bool:
    """Whether the top-level ``package`` found here is pallas-verify's own, beside
    ``pallas_verify`` (a user's package of the same name, e.g. ``strategies``, is not)."""
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    home = Path(__file__).resolve().parents[1]
    return found is not None and found.origin is not None and Path(found.origin).resolve().parents[1] == home
