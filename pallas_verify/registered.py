"""Kernel libraries that register their KernelSpecs: the ``pallas_verify.kernels``
entry-point group.

A library names, in its pyproject, either a module whose module-level KernelSpecs are
taken::

    [project.entry-points."pallas_verify.kernels"]
    mylib = "mylib.pv_specs"

or a callable that returns the names of such modules (a package with many)::

    mylib = "mylib.pv_specs:modules"

``pallas-verify fuzz`` and ``conformance`` take every registered spec when no spec file
is named. An entry point that cannot be loaded, a callable that does not return module
names, or a module that cannot be imported or defines no KernelSpec is listed as invalid
(``{"target": the entry point, "reason": why and the fix}``): never a crash, never
dropped.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from pallas_verify.errors import InvalidArgument, InvalidSpec
from pallas_verify.spec import KernelSpec

__all__ = ["GROUP", "PLANTED_GROUP", "Source", "registered_planted", "registered_sources", "registered_specs"]

#: The entry-point group kernel libraries register under.
GROUP = "pallas_verify.kernels"
#: The entry-point group planted-bug kernels register under (``conformance``'s sanitizer
#: rows): a callable returning objects each with ``spec`` (a KernelSpec), ``verdicts``
#: (backend -> the finding kinds it must report there) and ``expects`` (kinds).
PLANTED_GROUP = "pallas_verify.planted"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One module of KernelSpecs and the entry point that registered it.

    Attributes:
      entry: the entry point, as a report names it: ``NAME = VALUE (DIST VERSION)``.
      module: the module's import name.
    """

    entry: str
    module: str


def _entries(found: Iterable[importlib.metadata.EntryPoint] | None = None,
             group: str = GROUP) -> list[importlib.metadata.EntryPoint]:
    """The group's entry points, each once (an editable install seen twice on sys.path
    lists its entry points twice), sorted by name."""
    points = importlib.metadata.entry_points(group=group) if found is None else found
    unique = {(ep.name, ep.value): ep for ep in points}
    return [unique[key] for key in sorted(unique)]


def _label(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    owner = f" ({dist.name} {dist.version})" if dist is not None else ""
    return f"{ep.name} = {ep.value}{owner}"


def _fix(ep: importlib.metadata.EntryPoint, group: str = GROUP) -> str:
    dist = getattr(ep, "dist", None)
    name = dist.name if dist is not None else "the distribution that declares it"
    return (f"fix {ep.value!r} or the [project.entry-points.\"{group}\"] table of {name} and reinstall it, "
            f"or uninstall {name}")


def registered_sources(invalid: list[dict[str, str]]) -> list[Source]:
    """Every module the group's entry points name, in entry-point name order; an entry
    point that cannot be read is appended to ``invalid`` instead."""
    sources: list[Source] = []
    for ep in _entries():
        try:
            modules = _modules_of(ep)
        except InvalidArgument as exc:
            invalid.append({"target": f"entry point {_label(ep)}", "reason": str(exc)})
            continue
        sources += [Source(entry=_label(ep), module=m) for m in modules if m not in {s.module for s in sources}]
    return sources


def _modules_of(ep: importlib.metadata.EntryPoint) -> list[str]:
    """The module names one entry point stands for: its module, or what its callable returns."""
    from pallas_verify.loader import one_line

    try:
        target: ModuleType | Callable[[], Any] = ep.load()
    except Exception as exc:
        raise InvalidArgument(f"entry point {ep.name!r} of group {GROUP!r} cannot be loaded: {one_line(exc)}; "
                              f"{_fix(ep)}.") from exc
    if isinstance(target, ModuleType):
        return [target.__name__]
    if not callable(target):
        raise InvalidArgument(f"entry point {ep.name!r} = {ep.value!r} is a {type(target).__name__}; it must name a "
                              f"module of KernelSpecs or a callable returning module names; {_fix(ep)}.")
    try:
        names = target()
    except Exception as exc:
        raise InvalidArgument(f"entry point {ep.name!r} = {ep.value!r} raised when called: {one_line(exc)}; "
                              f"{_fix(ep)}.") from exc
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise InvalidArgument(f"entry point {ep.name!r} = {ep.value!r} returned {names!r}; it must return module "
                              f"names (a list of str); {_fix(ep)}.")
    names = list(names)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise InvalidArgument(f"entry point {ep.name!r} = {ep.value!r} returned {bad[0]!r} among its module names; "
                              f"each must be a module's import name (str); {_fix(ep)}.")
    return names


def registered_specs(invalid: list[dict[str, str]]) -> list[tuple[Source, KernelSpec]]:
    """(source, spec) of every module-level KernelSpec of every registered module; a module
    that cannot be imported or holds no KernelSpec, and a spec whose name an earlier module
    registered, are appended to ``invalid``."""
    from pallas_verify.loader import load_specs

    found: list[tuple[Source, KernelSpec]] = []
    owners: dict[str, str] = {}
    for source in registered_sources(invalid):
        target = f"{source.module} (entry point {source.entry})"
        try:
            specs = load_specs(source.module)
        except (InvalidArgument, InvalidSpec) as exc:
            invalid.append({"target": target, "reason": str(exc)})
            continue
        for spec in specs:
            first = owners.setdefault(spec.name, source.module)
            if first == source.module:
                found.append((source, spec))
            else:
                invalid.append({"target": target, "reason": (
                    f"KernelSpec name {spec.name!r} is registered by {first} already; a report keys its cells "
                    f"by name, so rename one of them (KernelSpec(name=...)).")})
    if not found and not invalid:
        raise InvalidArgument(f"no kernel library registers KernelSpecs under the entry-point group {GROUP!r}; "
                              "install one (this project's own catalog registers when installed: pip install -e .) "
                              "or name spec files or modules.")
    return found


def registered_planted(invalid: list[dict[str, str]]) -> list[Any]:
    """Every planted-bug kernel the ``PLANTED_GROUP`` entry points return, in entry-point
    name order; an entry point that cannot be loaded or called, or returns something
    without a KernelSpec ``spec``, is appended to ``invalid`` instead."""
    from pallas_verify.loader import one_line

    rows: list[Any] = []
    for ep in _entries(group=PLANTED_GROUP):
        try:
            found = list(ep.load()())
        except Exception as exc:
            invalid.append({"target": f"entry point {_label(ep)}", "reason": (
                f"entry point {ep.name!r} of group {PLANTED_GROUP!r} cannot be loaded and called: {one_line(exc)}; "
                f"{_fix(ep, PLANTED_GROUP)}.")})
            continue
        bad = [r for r in found if not isinstance(getattr(r, "spec", None), KernelSpec)]
        if bad:
            invalid.append({"target": f"entry point {_label(ep)}", "reason": (
                f"entry point {ep.name!r} returned {type(bad[0]).__name__}, which has no KernelSpec 'spec'; it must "
                f"return planted kernels (spec, verdicts, expects); {_fix(ep, PLANTED_GROUP)}.")})
            continue
        rows += found
    return rows
