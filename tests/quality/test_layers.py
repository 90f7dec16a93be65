"""Imports point one way: down the layers of docs/design.md.

Every module of pallas_verify belongs to one layer (the longest matching prefix below);
a module may import one of its own layer or a lower one, never a higher one. The imports
are read from the source (inside functions too), as tools/import_cycles.py reads them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import pallas_verify

ROOT = Path(pallas_verify.__file__).parent

#: Layers, lowest first: (name, module prefixes). docs/design.md says what each owns.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("model", ("errors", "exits", "choices", "keys", "spec", "findings", "signatures", "precision", "tolerance",
               "case", "loader", "registered", "profiles", "interrupts", "reports.report", "backends.families",
               "_env")),
    ("jax facts", ("_jax_compat", "reference")),
    ("judging and running one case", ("oracles", "grid", "transforms", "backends", "attribution")),
    ("leaving the process", ("execution",)),
    ("one example", ("tracer", "reruns", "runner")),
    ("reports", ("reports",)),
    ("one spec", ("search", "rounds", "causes", "engine")),
    ("campaigns", ("campaigns",)),
    ("front ends", ("testing", "plugin", "cli", "cli_args", "_worker", "")),  # "": the package's __init__ (the public API)
]

#: Imports allowed against the direction, each with its reason.
EXCEPTIONS = {
    # The path reproducer scripts written before replay moved import ``reproduce`` from;
    # nothing in the package imports this module.
    ("reports.reproduce", "campaigns.replay"),
}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix("__init__").rstrip(".")] = path
    return mods


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".") or prefix == "") and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


def _imports(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules ``module`` imports (``from pallas_verify import x``: module x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("pallas_verify"):
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [s for s in subs if s.removeprefix("pallas_verify.") in mods] or [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("pallas_verify")]
        for name in names:
            name = name.removeprefix("pallas_verify").lstrip(".")
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name != module:
                found.add(name)
    return found


def upward_imports() -> list[str]:
    mods = _modules()
    bad = []
    for module, path in sorted(mods.items()):
        for target in sorted(_imports(module, path, mods)):
            if _layer(target) > _layer(module) and (module, target) not in EXCEPTIONS:
                bad.append(f"{module or 'pallas_verify'} ({LAYERS[_layer(module)][0]}) imports "
                           f"{target or 'pallas_verify'} ({LAYERS[_layer(target)][0]})")
    return bad


def test_every_module_has_a_layer():
    assert all(_layer(m) >= 0 for m in _modules())


def test_no_module_imports_a_higher_layer():
    assert upward_imports() == []


@pytest.mark.parametrize(("importer", "imported"), [("keys", "runner"), ("runner", "engine"), ("engine", "campaigns.fuzz")])
def test_an_upward_import_is_caught(importer, imported, monkeypatch):
    mods = _modules()
    real = _imports

    def planted(module, path, known):
        return real(module, path, known) | ({imported} if module == importer else set())

    monkeypatch.setattr(sys.modules[__name__], "_imports", planted)
    assert any(line.startswith(f"{importer} (") and f"imports {imported} (" in line for line in upward_imports())
    assert importer in mods and imported in mods
