"""Imports point one way: down the layers of docs/design.md; JAX's internals are read in
one package.

Every module of pallas_verify belongs to one layer (the longest matching prefix below);
a module may import one of its own layer or a lower one, never a higher one. The imports
are read from the source (inside functions too), as tools/import_cycles.py reads them.

Only ``pallas_verify/_jax_compat/`` reads ``jax._src`` (imports it, names it in an
``importlib.import_module`` call, or reaches it as ``jax._src``) or a pallas_call equation
(compares a primitive's name with ``"pallas_call"``, reads its Pallas params): it is the
one package a new JAX release touches.
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
    ("jax facts", ("_jax_compat", "matrix_units", "reference")),
    ("judging and running one case", ("oracles", "grid", "transforms", "backends", "attribution")),
    ("leaving the process", ("execution",)),
    ("one example", ("tracer", "reruns", "runner")),
    ("reports", ("reports",)),
    ("one spec", ("search", "rounds", "causes", "engine")),
    ("campaigns", ("campaigns",)),
    ("front ends", ("testing", "plugin", "cli", "cli_args", "_worker", "")),  # "": the package's __init__ (the public API)
]

#: The one package that may read JAX's internals.
SEAM = "_jax_compat"

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


#: Params only a Pallas kernel equation has.
PALLAS_PARAMS = frozenset({"grid_mapping", "compiler_params", "input_output_aliases", "meshes"})


def _internal(name: str) -> bool:
    return name == "jax._src" or name.startswith("jax._src.")


def jax_internal_reads(source: str) -> list[str]:
    """Where ``source`` reads ``jax._src``: ``line N: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Import):
            what = next((f"import {a.name}" for a in node.names if _internal(a.name)), None)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if _internal(module) or (module == "jax" and any(a.name == "_src" for a in node.names)):
                what = f"from {module} import ..."
        elif isinstance(node, ast.Attribute) and node.attr == "_src" and isinstance(node.value, ast.Name) \
                and node.value.id == "jax":
            what = "jax._src"
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
            what = next((f"import_module({a.value!r})" for a in node.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str) and _internal(a.value)), None)
        elif isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value == "pallas_call"
                                                   for c in (node.left, *node.comparators)):
            what = 'a comparison with "pallas_call"'
        elif (key := _params_key(node)) in PALLAS_PARAMS:
            what = f"params[{key!r}]"
        if what is not None:
            found.append(f"line {node.lineno}: {what}")
    return found


def _params_key(node: ast.AST) -> str | None:
    """``key`` of ``X.params[key]`` or ``X.params.get(key, ...)``, else None."""
    if isinstance(node, ast.Subscript):
        owner, key = node.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        owner, key = node.func.value, node.args[0]
    else:
        return None
    named = isinstance(owner, ast.Attribute) and owner.attr == "params"
    return key.value if named and isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def jax_internals_outside_the_seam() -> list[str]:
    return [f"{module or 'pallas_verify'} ({path.relative_to(ROOT.parent)}) {where}"
            for module, path in sorted(_modules().items())
            if module != SEAM and not module.startswith(SEAM + ".")
            for where in jax_internal_reads(path.read_text())]


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


def test_only_the_seam_reads_jax_internals():
    assert jax_internals_outside_the_seam() == []
    assert any(jax_internal_reads(path.read_text()) for module, path in _modules().items() if module.startswith(SEAM))


@pytest.mark.parametrize("source", [
    "import jax._src.core",
    "from jax._src import config",
    "from jax._src.pallas.mosaic import core as tpu_core",
    "from jax import _src",
    "import jax\nx = jax._src.core",
    "import importlib\nimportlib.import_module('jax._src.tpu_info')",
    "calls = [e for e in eqns if e.primitive.name == 'pallas_call']",
    "params = eqn.params.get('compiler_params')",
    "gm = eqn.params['grid_mapping']",
])
def test_a_read_of_jax_internals_is_caught(source):
    assert jax_internal_reads(source)


@pytest.mark.parametrize("source", [
    "import jax.extend.core", "from jax.experimental import pallas as pl", '"""raised at jax/_src/api.py"""',
    "RACE_LOGGERS = ('jax._src.pallas.mosaic.interpret.race_detection_state',)",
    "precision = eqn.params.get('precision')", "work.params['files']",
])
def test_public_jax_and_text_naming_its_files_are_not_reads(source):
    assert jax_internal_reads(source) == []
