"""The kernel's source a finding involves, with the lines it names marked.

The excerpt is the kernel function a finding names (its ``evidence["call"]``, or a
top-level function of the kernel's module named in the message or blame, such as
``_row_sum_kernel``), and, for what the static check found about an operand's blocks,
the function that calls ``pallas_call`` (its block specs and grid semantics). A line is
marked when the finding names it (``file.py:LINE`` in its message, log or traceback),
when it accesses a ref the message names (``o_ref``) or the ref of the operand the
finding names (``output 0``: the kernel's parameter after the inputs'), or, for a static finding about an
input's or output's blocks, when it holds the ``in_specs`` or ``out_specs`` and, for a
race, the ``dimension_semantics``. Written at the time of the finding into
``evidence["source"]``, so the report needs no source files to show it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from pallas_verify.findings import Finding

__all__ = ["MAX_LINES", "kernel_excerpt", "operand_ref"]

MAX_LINES = 60  # a function longer than this is cut around its marked lines
_SITE = re.compile(r"([\w./-]+\.py)[:\", line ]+(\d+)")


def _module_of(kernel: Callable[..., Any]) -> tuple[str, str, str] | None:
    """(file, source, the kernel's own function name) of the module defining ``kernel``."""
    fn: Any = kernel
    while isinstance(fn, functools.partial) or hasattr(fn, "__wrapped__"):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__wrapped__
    try:
        path = inspect.getsourcefile(fn)
        source = inspect.getsource(inspect.getmodule(fn))  # type: ignore[arg-type]
    except (TypeError, OSError):
        return None
    if not path:
        return None
    here = os.getcwd()
    shown = os.path.relpath(path, here) if path.startswith(here + os.sep) else path  # as the user ran it
    return shown, source, getattr(fn, "__name__", "")


def _text(finding: Finding) -> str:
    ev = finding.evidence
    parts = [finding.message, str(ev.get("call", "")), str(ev.get("log", "")), str(ev.get("traceback", ""))]
    blame = ev.get("blame")
    if isinstance(blame, Mapping):
        parts += [str(m) for m in blame.get("messages", [])]
    return "\n".join(parts)


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _named(functions: dict[str, ast.FunctionDef], finding: Finding, text: str) -> ast.FunctionDef | None:
    call = finding.evidence.get("call")
    if isinstance(call, str) and call in functions:
        return functions[call]
    found = [(m.start(), functions[m.group(0)]) for m in re.finditer(r"\b\w+\b", text) if m.group(0) in functions]
    return min(found, key=lambda f: f[0])[1] if found else None


def _refs_named(fn: ast.FunctionDef, text: str) -> set[str]:
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    if fn.args.vararg:
        params.append(fn.args.vararg.arg)
    return {p for p in params if re.search(rf"\b{re.escape(p)}\b", text)}


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]


def operand_ref(body: ast.FunctionDef, wrapper: ast.FunctionDef, operand: str) -> str | None:
    """The parameter of the kernel ``body`` that stands for ``operand`` (``"output 0"``,
    ``"input 1"``), where ``wrapper`` calls ``pallas_call(body, in_specs=[...])`` with a
    literal list of in_specs (the kernel takes the inputs' refs, then the outputs')."""
    found = re.fullmatch(r"(input|output) (\d+)", operand)
    if found is None:
        return None
    for call in (n for n in ast.walk(wrapper) if isinstance(n, ast.Call)):
        if not call.args or not isinstance(call.args[0], ast.Name) or call.args[0].id != body.name:
            continue
        specs = next((k.value for k in call.keywords if k.arg == "in_specs"), None)
        if not isinstance(specs, (ast.List, ast.Tuple)):
            return None
        index = int(found.group(2)) + (len(specs.elts) if found.group(1) == "output" else 0)
        params = _params(body)
        return params[index] if index < len(params) else None
    return None


def _marks(fn: ast.FunctionDef, lines: list[str], finding: Finding, text: str, path: str,
           wrapper: bool, refs: frozenset[str] = frozenset()) -> dict[int, str]:
    """Line number -> why, for the lines of ``fn`` the finding involves."""
    end = fn.end_lineno or fn.lineno
    marks: dict[int, str] = {}
    for m in _SITE.finditer(text):
        line = int(m.group(2))
        named = m.group(1)
        if (named.endswith(path) or path.endswith(named.lstrip("./"))) and fn.lineno <= line <= end:
            marks[line] = "named by the finding"
    if not wrapper:
        operand = str(finding.evidence.get("operand", ""))
        for ref in _refs_named(fn, text) | refs:
            why = f"accesses {ref}" + (f" ({operand})" if ref in refs and ref not in _refs_named(fn, text) else "")
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and n.id == ref and n.lineno not in marks:
                    marks[n.lineno] = why
        return marks
    operand = str(finding.evidence.get("operand", ""))
    wanted = {"out_specs": operand.startswith("output"), "in_specs": operand.startswith("input"),
              "dimension_semantics": finding.kind == "race"}
    for i in range(fn.lineno, end + 1):
        for word, want in wanted.items():
            if want and word in lines[i - 1] and i not in marks:
                marks[i] = {"out_specs": f"the block spec of {operand}", "in_specs": f"the block spec of {operand}",
                            "dimension_semantics": "the grid's dimension semantics"}[word]
    return marks


def _block(fn: ast.FunctionDef, lines: list[str], marks: dict[int, str]) -> dict[str, Any]:
    start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    end = fn.end_lineno or fn.lineno
    if end - start + 1 > MAX_LINES and marks:
        start = max(start, min(marks) - MAX_LINES // 2)
        end = min(end, start + MAX_LINES - 1)
    end = min(end, start + MAX_LINES - 1)
    return {"function": fn.name, "start": start, "lines": lines[start - 1:end],
            "marked": [[n, why] for n, why in sorted(marks.items()) if start <= n <= end]}


def kernel_excerpt(kernel: Callable[..., Any], finding: Finding) -> dict[str, Any] | None:
    """``{"path", "blocks": [{"function", "start", "lines", "marked": [[line, why], ...]}]}``
    for ``finding`` of ``kernel`` (the spec's kernel), or None when its source cannot be
    read or the finding names none of its module's functions."""
    module = _module_of(kernel)
    if module is None:
        return None
    path, source, own = module
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    functions, lines, text = _functions(tree), source.splitlines(), _text(finding)
    body = _named(functions, finding, text)
    if body is None:
        return None
    wrapper = functions.get(own) if own != body.name else None
    ref = operand_ref(body, wrapper, str(finding.evidence.get("operand", ""))) if wrapper else None
    refs = frozenset([ref] if ref else [])
    blocks = [_block(body, lines, _marks(body, lines, finding, text, path, wrapper=False, refs=refs))]
    if finding.backend == "static" and wrapper is not None:
        marks = _marks(wrapper, lines, finding, text, path, wrapper=True)
        if marks:
            blocks.append(_block(wrapper, lines, marks))
    return {"path": path, "blocks": blocks}
