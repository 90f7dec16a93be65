"""The Backend protocol: what every way of running or compiling a kernel provides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from hypothesis import strategies as st

from pallas_verify.case import Case, Outcome

__all__ = ["Backend"]


@runtime_checkable
class Backend(Protocol):
    """One way to run or compile a ``pallas_call``.

    Attributes:
      name: registry name, e.g. ``"tpu_interpret"`` or ``"mosaic_tpu:v5e"``.
      platforms: kernel platforms it serves (``"tpu"``, ``"gpu"``).
      executes: True when ``run`` produces outputs (interpreters, real chips); False
        for compile-only backends on this machine.
      isolate: True when cases must run in a worker process (compilers that may abort).
      reruns_shapes: True when the shape-invariance rerun applies to its runs
        (``oracles/shape_invariance.py``): a correct kernel's rows come out bitwise the
        same inside a longer array.
      arithmetic: what computes its outputs: ``"xla"`` for the interpreters (the kernel's
        jaxpr compiled by XLA for jax's device, one math library and one rounding per
        operation), the compiler family (``"triton"``, ``"mosaic_gpu"``, ``"mosaic_tpu"``)
        for a real chip. Only backends of one arithmetic are held bitwise to each other
        (``oracles.divergence``): a chip's exp, rsqrt and reduction order are its own.
    """

    name: str
    platforms: frozenset[str]
    executes: bool
    isolate: bool
    reruns_shapes: bool
    arithmetic: str

    def available(self) -> str | None:
        """None when usable here, else the reason (printed as the skip reason)."""
        ...

    def modes(self) -> st.SearchStrategy[Mapping[str, Any]]:
        """The knobs drawn per example (``st.just({})`` when there are none)."""
        ...

    def run(self, case: Case) -> Outcome:
        """Run or compile the case; never raises for a kernel's own failure. A backend that
        compiles without executing says so in the outcome (``Outcome.compiled_only``)."""
        ...

    def variants(self, mode: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Metamorphic reruns of a case run in ``mode``: (finding kind, mode with the knob
        that kind is about changed), under which a correct kernel gives bitwise-identical
        outputs; ``[]`` when there are none."""
        ...

    def witness_mode(self) -> dict[str, Any]:
        """The mode it runs an example in to witness another backend's upstream limitation
        (``attribution``); ``{}``: its defaults."""
        ...

    def recompiles(self, mode: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
        """Whether a run in ``variant`` compiles anew after one in ``mode`` (False only
        where the two differ in knobs the backend applies at run time)."""
        ...

    def interpret_source(self, mode: Mapping[str, Any]) -> str | None:
        """The ``interpret=`` value a run in ``mode`` uses, as plain-jax source (for
        reproducers); None for a backend that does not interpret (a compiler)."""
        ...
