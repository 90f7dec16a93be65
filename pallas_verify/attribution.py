"""Whose fault a failed run is: the one rule that names an interpreter's exception JAX's.

An exception a backend raises while running an example is an *upstream limitation*
(the cell is ``n/a`` with the reason, not a finding) when all four hold:

1. the backend is one of JAX's interpreters (a backend that executes), and the error is
   an exception (not a crash or a hang): a compiler's refusal is the kernel's
   ``compile_error``, since the chip cannot take the kernel;
2. the error is no signal of the sanitizer itself (a race, an out-of-bounds access, an
   uninitialized read, a revisit, a deadlock, a semaphore left or waited wrongly): those
   are what the interpreters exist to catch, and always stay findings;
3. the raising frame and every caller up to Pallas's machinery that runs the kernel are
   JAX's (``_jax_compat.upstream_frame``): no line of the kernel, of its index maps or
   of its reference is on the way, so nothing the kernel did raised it; and
4. another interpreter runs the very same example (config, inputs, transform), in its
   sanitizing mode (``witness_mode``: races detected, out-of-bounds reads raised, NaN
   fill, one core), and judges it clean against the reference. (The witness's own
   search judges every example it draws with its metamorphic reruns too; a witness run
   skips them.)

When no witness runs the example clean, the error stays the kernel's ``exception``
finding, so an upstream-looking error can never hide a kernel bug, with one exception:
when every other interpreter fails the same example inside JAX too (rules 1 to 3 hold for
each one's error), or no other interpreter here serves the kernel's platforms, no
interpreter here can run the kernel at all. The cell is then n/a,
"no interpreter here can run this kernel", naming each interpreter's error: nothing here
judged the kernel, and nothing it did raised (only the static check and the compile
targets check it).

Each such limitation is recorded once per kernel and backend (``Upstream``), with the
upstream error, its frame, the backend that ran the example clean, and a standalone
reproducer in plain jax (``reports.upstream``).

What the rule cannot decide stays in ``_jax_compat``'s table (``LIMITATIONS``), which
is consulted first: an upstream failure that no interpreter runs clean (semaphores
returned from a pallas_call, jax's ragged paged attention), and one whose text is a
sanitizer signal (TPU interpret mode's revisit check, which ignores a BlockSpec's
``RevisitMode.ANY``). docs/spec.md lists them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pallas_verify import _jax_compat
from pallas_verify.case import Case, ErrorInfo, Outcome
from pallas_verify.errors import PallasVerifyError
from pallas_verify.findings import SANITIZER_KINDS

if TYPE_CHECKING:
    from pallas_verify.backends.base import Backend

__all__ = ["SANITIZER_KINDS", "Upstream", "attribute", "internal_error", "internal_failure", "sanitizer_signal",
           "upstream_frame", "witness_mode", "witnesses"]

# Sanitizer texts error_kind does not name: a read of uninitialized memory, a semaphore
# signalled, waited or left wrongly (TPU and GPU interpret modes).
_SANITIZER_TEXT = (
    (re.compile(r"uninitiali[sz]ed (read|memory|value)", re.IGNORECASE), "uninitialized_read"),
    (re.compile(r"semaphore .*(non-zero|negative|overflow|count)|(signal|wait).* semaphore", re.IGNORECASE),
     "semaphore_leak"),
)


def sanitizer_signal(error: ErrorInfo) -> str | None:
    """The sanitizer finding kind ``error`` is a signal of, or None."""
    text = f"{error.type}: {error.message}"
    kind = _jax_compat.error_kind(text)
    if kind is not None:
        return kind
    return next((kind for pattern, kind in _SANITIZER_TEXT if pattern.search(text)), None)


def internal_error(error: ErrorInfo | None) -> str | None:
    """The cell's reason when ``error`` is pallas-verify's own failure (never the kernel's):
    raised by the tool's code, or by JAX's code the tool's reading of JAX internals called
    (``_jax_compat.tool_frame``), and neither a sanitizer signal nor a deliberate error of
    the tool's (a ``PallasVerifyError``: an invalid spec, a feature the installed JAX
    lacks). None otherwise."""
    if error is None or error.type in _deliberate() or sanitizer_signal(error) is not None:
        return None
    frame = _jax_compat.tool_frame(error.traceback)
    return None if frame is None else _internal(_first_line(error), str(frame))


def internal_failure(exc: Exception) -> str:
    """The cell's reason when pallas-verify's own code raised ``exc`` while judging an
    example in this process (the kernel's errors come back in its Outcome, never raised)."""
    import traceback

    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return _internal(f"{type(exc).__name__}: {exc}", f"{where.filename}:{where.lineno} in {where.name}" if where else "")


def _internal(error: str, frame: str) -> str:
    at = f", raised at {frame}" if frame else ""
    return (f"internal error: pallas-verify's own code failed ({error}{at}) on JAX {_jax_compat.jax_version()}; "
            "this is no finding against the kernel. Please report it with the report's traceback")


def _deliberate() -> frozenset[str]:
    """The names of the tool's own exception classes: raised on purpose, with a message."""
    found, todo = set(), [PallasVerifyError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(found)


def upstream_frame(error: ErrorInfo | None) -> Any:
    """The JAX frame that raised ``error`` when rules 2 and 3 of the module docstring hold
    (JAX's code alone from the raise to the machinery running the kernel), else None."""
    if error is None or sanitizer_signal(error) is not None:
        return None
    return _jax_compat.upstream_frame(error.traceback)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Upstream:
    """An upstream limitation met by one kernel on one backend (the first example).

    Attributes:
      kernel, backend, transform: where it showed.
      error: the upstream error, ``Type: first line of the message``.
      frame: the JAX frame that raised it (``jax/_src/...py:LINE in FUNCTION``).
      site: the kernel's line jax names as the failing operation's source, if any.
      clean_on: the interpreter that ran the same example and judged it clean; None when
        none did because every other one fails it inside JAX too (``also_failing``: each
        one's error and frame), so no interpreter here can run the kernel.
      config, mode: the example's config and the failing backend's mode.
      inputs: the example's inputs (not written to JSON; the reproducer's ``.npz``).
      reproducer: the plain-jax reproducer script, once written.
    """

    kernel: str
    backend: str
    transform: str | None
    error: str
    frame: str
    site: str | None
    clean_on: str | None
    config: Mapping[str, Any]
    mode: Mapping[str, Any]
    inputs: tuple[Any, ...] = ()
    reproducer: str | None = None
    also_failing: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def reason(self) -> str:
        """The n/a cell's reason."""
        if self.clean_on is None:
            others = ("and so does every other interpreter on the same example (" + "; ".join(
                f"{name}: {error}" for name, error in self.also_failing.items()) + ")" if self.also_failing else
                "and no other interpreter here serves the kernel's platforms")
            return (f"no interpreter here can run this kernel: {self.backend} fails inside JAX ({self.error}, raised "
                    f"at {self.frame}), {others}, with no kernel code on the way (reproduced on JAX "
                    f"{_jax_compat.jax_version()}). Not judged here: only the static "
                    "check and the compile targets check it; see the kernel's upstream list for plain-jax "
                    "reproducers to report")
        return (f"upstream limitation: {self.backend} fails inside JAX on this kernel ({self.error}, raised at "
                f"{self.frame}, with no kernel code on the way), while {self.clean_on} runs the same example "
                f"and judges it clean (reproduced on JAX {_jax_compat.jax_version()}; see the kernel's upstream list for a "
                "plain-jax reproducer to report)")

    def explains(self, finding: Any) -> bool:
        """Whether ``finding`` is this same JAX failure, met on an example before any witness
        ran one clean (its search then ends n/a: one cell, one verdict)."""
        first = (str(finding.message).strip().splitlines() or [""])[0]
        return (finding.kind == "exception" and finding.backend == self.backend
                and finding.transform == self.transform and first[:200] == self.error[:200])

    def entry(self) -> dict[str, Any]:
        """The report's JSON record (``kernels[i]["upstream"]``)."""
        fields = ("backend", "transform", "error", "frame", "site", "clean_on", "also_failing", "config", "mode",
                  "reproducer")
        return {"jax_version": _jax_compat.jax_version(), **{f: getattr(self, f) for f in fields}}


def witnesses(spec: Any, failing: str) -> list[Any]:
    """The other interpreters that could run ``spec`` here: available, serving one of its
    platforms, not declared unsupported by it, cheapest first."""
    from pallas_verify.backends import registry

    return [b for b in registry.all_backends().values()
            if b.executes and b.name != failing and registry.skip_reason(spec, b) is None]


def witness_mode(backend: str) -> dict[str, Any]:
    """The mode the backend called ``backend`` witnesses in (its ``witness_mode()``)."""
    from pallas_verify.backends import registry

    return dict(registry.get(backend).witness_mode())


def attribute(case: Case, outcome: Outcome, backend: Backend, *, clean: Callable[[Case, Backend], bool],
              failed: Callable[[Case], ErrorInfo | None] = lambda case: None,
              seen: dict[str, Upstream]) -> str | None:
    """The n/a reason when ``outcome``'s error (of ``case`` on ``backend``) is an upstream
    limitation (module docstring), else None. ``clean(case, witness)`` runs a case on the
    witness backend and says whether it was judged clean; ``failed(case)`` is the error a
    witness's run of ``case`` raised, if any. When no witness runs the example clean but
    every one fails it inside JAX too (the frame rule, rules 1 to 3), no interpreter here
    can run the kernel: n/a as well, naming each. The first limitation per backend is
    recorded in ``seen``."""
    if not backend.executes or outcome.crashed or outcome.timed_out:
        return None
    frame = upstream_frame(outcome.error)
    if frame is None:
        return None
    assert outcome.error is not None
    site = _jax_compat.operation_site(outcome.error.traceback)
    met = functools.partial(Upstream, kernel=case.spec.name, backend=case.backend, transform=case.transform,
                            error=_first_line(outcome.error), frame=str(frame), site=None if site is None else str(site),
                            config=dict(case.config), mode=dict(case.mode), inputs=case.inputs)
    others = {}
    for witness in witnesses(case.spec, case.backend):
        as_witness = dataclasses.replace(case, backend=witness.name, mode=dict(witness.witness_mode()))
        if clean(as_witness, witness):
            found = met(clean_on=witness.name)
            seen.setdefault(case.backend, found)  # once per kernel and backend
            return found.reason
        others[witness.name] = failed(as_witness)
    if any(upstream_frame(error) is None for error in others.values()):
        return None  # a witness judged it, or failed it another way: the error stays the kernel's
    found = met(clean_on=None, also_failing={name: f"{_first_line(e)} (at {upstream_frame(e)})"
                                             for name, e in others.items() if e is not None})
    seen.setdefault(case.backend, found)
    return found.reason


def _first_line(error: ErrorInfo) -> str:
    line = (error.message.strip().splitlines() or [""])[0]
    return f"{error.type}: {line[:240]}" if line else error.type

