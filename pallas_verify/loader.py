"""Finding KernelSpecs by reference: ``path/to/file.py::NAME`` or ``package.module:NAME``.

A reference is what lets a worker process, a reproducer or a later night's replay load
the same spec again.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pallas_verify.errors import InvalidArgument, InvalidSpec
from pallas_verify.spec import KernelSpec

__all__ = ["import_answer", "load_spec", "load_specs", "one_line", "spec_ref"]

_REFS: dict[int, str] = {}


def _import_file(path: Path) -> ModuleType:
    path = path.resolve()
    name = f"_pv_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise InvalidArgument(f"cannot import {str(path)!r}: not a Python file.")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise InvalidArgument(f"spec file {str(path)!r} cannot be imported: {one_line(exc, path)}; "
                              "fix the file and run again.") from exc
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(str(path.parent))
    return module


def _module(where: str) -> ModuleType:
    if where.endswith(".py") or "/" in where:
        path = Path(where)
        if not path.is_file():
            raise InvalidArgument(f"spec file {where!r} does not exist.")
        return _import_file(path)
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        raise InvalidArgument(f"cannot import module {where!r}: {exc}.") from exc
    except Exception as exc:
        raise InvalidArgument(f"module {where!r} cannot be imported: {one_line(exc)}; "
                              "fix the module and run again.") from exc


def one_line(exc: BaseException, path: Path | None = None) -> str:
    """``Type: message`` on one line, with where it was raised in ``path`` when known."""
    import traceback

    message = " ".join(str(exc).split()) or "(no message)"
    where = ""
    if isinstance(exc, SyntaxError):
        message = " ".join((exc.msg or "").split())
        where = f" at line {exc.lineno}" if exc.lineno else ""
    elif path is not None:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
        where = f" at line {lines[-1]}" if lines else ""
    return f"{type(exc).__name__}{where}: {message}"


def _split(ref: str) -> tuple[str, str | None]:
    if "::" in ref:
        where, name = ref.split("::", 1)
        return where, name
    if ":" in ref:
        where, name = ref.rsplit(":", 1)
        return where, name
    return ref, None


def load_specs(ref: str) -> list[KernelSpec]:
    """Every KernelSpec ``ref`` names: one for ``FILE::NAME``, all for a bare module/file."""
    where, name = _split(ref)
    module = _module(where)
    if name is None:
        found = [(n, v) for n, v in vars(module).items() if isinstance(v, KernelSpec)]
        if not found:
            raise InvalidArgument(f"{ref!r} defines no module-level KernelSpec; define one at module level "
                                  "(e.g. SPEC = pv.KernelSpec(...)) or name it as FILE.py::NAME.")
    else:
        found = [_named(module, where, name)]
    for attr, value in found:
        if not isinstance(value, KernelSpec):
            raise InvalidSpec(f"{where}::{attr} is a {type(value).__name__}, not a pallas_verify.KernelSpec.")
        _REFS[id(value)] = _ref_for(module, where, attr)
    return [v for _, v in found]


def _named(module: ModuleType, where: str, name: str) -> tuple[str, Any]:
    """The (variable, value) ``name`` refers to: the module-level KernelSpec of that variable,
    else the one whose ``name`` field it is (``FILE::segment_sum`` for ``SEGMENT_SUM =
    pv.KernelSpec(name="segment_sum", ...)``), else the attribute (checked by the caller)."""
    value = getattr(module, name, None)
    if isinstance(value, KernelSpec):
        return name, value
    specs = [(n, v) for n, v in vars(module).items() if isinstance(v, KernelSpec)]
    by_name = [(n, v) for n, v in specs if v.name == name]
    if by_name:
        return by_name[0]
    listed = ", ".join(n if v.name == n else f"{n} (name {v.name!r})" for n, v in specs) or "none"
    if value is None and not hasattr(module, name):
        raise InvalidArgument(f"{where!r} has no attribute {name!r} and no KernelSpec named so; its KernelSpecs: "
                              f"{listed}.")
    if not specs:
        return name, value
    raise InvalidSpec(f"{where}::{name} is a {type(value).__name__}, not a pallas_verify.KernelSpec; its "
                      f"KernelSpecs: {listed}.")
def import_answer(ref: str) -> dict[str, Any]:
    """What importing ``ref`` gives, as plain data (the worker side of a spec file imported
    in a separate process first, ``execution.imports``): ``{"specs": [names]}`` or
    ``{"error": the one-line reason}``."""
    try:
        return {"specs": [s.name for s in load_specs(ref)]}
    except Exception as exc:
        return {"error": str(exc)}


def load_spec(ref: str) -> KernelSpec:
    """The one KernelSpec ``ref`` names."""
    specs = load_specs(ref)
    if len(specs) != 1:
        names = [s.name for s in specs]
        raise InvalidArgument(f"{ref!r} holds {len(specs)} KernelSpecs {names}; name one as {ref}::NAME.")
    return specs[0]


def _ref_for(module: ModuleType, where: str, attr: str) -> str:
    if module.__name__.startswith("_pv_"):
        return f"{Path(where).resolve()}::{attr}"
    return f"{module.__name__}:{attr}"


def spec_ref(spec: KernelSpec) -> str | None:
    """A reference that loads ``spec`` again in another process, or None if none exists.

    Specs loaded by reference remember it; otherwise the module that constructed the
    spec, then the modules of its kernel and reference (a wrapper such as
    ``functools.wraps`` may name another library's module there), are searched for a
    module-level attribute holding this very spec.
    """
    if id(spec) in _REFS:
        return _REFS[id(spec)]
    for module in _candidate_modules(spec):
        for attr, value in vars(module).items():
            if value is spec:
                file = getattr(module, "__file__", None)
                if _by_path(module):
                    return f"{Path(file).resolve()}::{attr}" if file else None
                return f"{module.__name__}:{attr}"
    return None


def _by_path(module: ModuleType) -> bool:
    """Refer to a module by its file when its name alone may be ambiguous elsewhere.

    Scripts, ``__main__`` and top-level test modules (``test_kernels``: the same name can
    stand in many folders) load by path; modules inside a package load by name.
    """
    return "." not in module.__name__ and not hasattr(module, "__path__")


def _candidate_modules(spec: KernelSpec) -> list[ModuleType]:
    names = dict.fromkeys([spec.module, getattr(spec.kernel, "__module__", None),
                           getattr(spec.reference, "__module__", None)])
    return [sys.modules[n] for n in names if n in sys.modules]
