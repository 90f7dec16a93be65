"""A spec's kernel as plain-jax source: its module with the spec-only statements cut out.

A reproducer sent upstream must run without pallas-verify. The kernel usually lives in
the module that also builds its ``KernelSpec`` (and imports ``pallas_verify``,
``strategies``, ``hypothesis``); ``kernel_module`` returns that module's source with
every import of those packages removed, and every top-level statement that uses what
they bound while the module loads (the spec, its strategies), so the rest imports with
jax alone. It also names the function to call and the config keys it takes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["KernelModule", "kernel_module", "pruned_source"]

#: Top-level packages whose imports only a spec needs.
SPEC_ONLY = frozenset({"pallas_verify", "strategies", "hypothesis", "reference_kernels"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelModule:
    """The kernel's module, pruned to plain jax.

    Attributes:
      path: the original module's file.
      source: its source without the spec-only statements.
      attribute: the module attribute to call (``name`` or ``Class.name``).
      accepts: the config keys the callable takes, or None when it takes any.
    """

    path: str
    source: str
    attribute: str
    accepts: tuple[str, ...] | None


def kernel_module(kernel: Callable[..., Any]) -> KernelModule | None:
    """``kernel`` (or what it wraps: ``functools.wraps`` wrappers, partials without
    bound arguments) as an attribute of a module whose pruned source still defines it;
    None when it is not one (a lambda, a closure, a partial with bound values)."""
    for fn in _unwrapped(kernel):
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        name = getattr(fn, "__qualname__", "")
        if module is None or not getattr(module, "__file__", None) or "<" in name or _lookup(module, name) is not fn:
            continue
        try:
            source = pruned_source(inspect.getsource(module))
        except (OSError, SyntaxError, TypeError):
            return None
        if name.split(".")[0] in _bound(ast.parse(source).body):
            return KernelModule(path=str(module.__file__), source=source, attribute=name, accepts=_accepts(fn))
    return None


def _unwrapped(kernel: Any) -> list[Any]:
    chain, seen = [], set()
    while kernel is not None and id(kernel) not in seen:
        seen.add(id(kernel))
        chain.append(kernel)
        if isinstance(kernel, functools.partial):
            kernel = kernel.func if not kernel.args and not kernel.keywords else None
        else:
            kernel = getattr(kernel, "__wrapped__", None)
    return chain


def _lookup(module: Any, qualname: str) -> Any:
    value = module
    for part in qualname.split("."):
        value = getattr(value, part, None)
    return value


def _accepts(fn: Any) -> tuple[str, ...] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def pruned_source(source: str) -> str:
    """``source`` without imports of ``SPEC_ONLY`` packages and without the top-level
    statements that use their names (or a function that does) while the module loads."""
    tree = ast.parse(source)
    removed: set[str] = set()
    tainted: set[str] = set()  # top-level functions whose bodies use removed names
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _imports_spec_only(node):
            removed |= _bound([node])
            continue
        if _load_time_names(node) & (removed | tainted):
            removed |= _bound([node])
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _names(node) & (removed | tainted):
            tainted.add(node.name)
        kept.append(node)
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n"


def _imports_spec_only(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return not getattr(node, "level", 0) and any(m.split(".")[0] in SPEC_ONLY for m in modules)


def _bound(nodes: list[ast.stmt]) -> set[str]:
    """Names the statements bind at the top level."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _load_time_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement reads while the module loads (not inside function or
    lambda bodies, which run only when called)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts: list[ast.AST] = [*node.decorator_list, *node.args.defaults,
                                *(d for d in node.args.kw_defaults if d is not None)]
        return set().union(*(_names(p) for p in parts)) if parts else set()
    names: set[str] = set()
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Name):
            names.add(current.id)
        elif isinstance(current, ast.Lambda):
            stack.extend(current.args.defaults)
        elif isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names |= _load_time_names(current)
        else:
            stack.extend(ast.iter_child_nodes(current))
    return names
