"""The tracer service: the kernel traced where its Python cannot hurt the run.

The static grid check and blame both trace the kernel (``grid.tasks``), which runs the
author's Python: it may hang, abort or raise. Where the sandbox isolates (``Sandbox.tracer``)
the trace runs in a shared worker process, so a hang becomes a ``timeout`` and an abort a
``crash`` and the run goes on; without a worker (a spec built inside a function has no
reference one could load) it runs in this process, where only exceptions can be caught.

Each request returns a future (``Traced``): the static check of an example starts before
the example runs and is read after, so where a core is spare (``static_tracer_slot``) a
worker of its own traces while another runs the kernel. The static check is traced once
per config and input shapes (a bounded cache); blame only for the findings a run reports,
from the ``BlameInputs`` that travel with the failing example.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from pallas_verify.execution.isolation import Pending, Worker, static_tracer_slot
from pallas_verify.execution.sandbox import Sandbox
from pallas_verify.findings import Finding
from pallas_verify.grid import tasks
from pallas_verify.keys import Lru, config_key, shapes_key
from pallas_verify.oracles import static
from pallas_verify.spec import KernelSpec

__all__ = ["BlameInputs", "Traced", "Tracer"]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class BlameInputs:
    """What blame maps for one finding of one example: the example's (extended) inputs, a
    mask of bad elements per output (None: a good output) and their errors (None: unknown)."""

    inputs: tuple[np.ndarray, ...]
    masks: tuple[np.ndarray | None, ...]
    errors: tuple[np.ndarray | None, ...]


class Traced(Generic[T]):  # noqa: UP046  (no PEP 695 syntax: tools on Python 3.11 parse this package)
    """The answer of a trace under way: ``result()`` waits for it (once)."""

    def __init__(self, answer: Callable[[], T]) -> None:
        self._answer: Callable[[], T] | None = answer
        self._value: T | None = None

    def result(self) -> T:
        if self._answer is not None:
            self._value, self._answer = self._answer(), None
        return self._value  # type: ignore[return-value]


@dataclasses.dataclass
class _Task:
    """One task: sent to a worker (which works meanwhile), or done in this process when its
    answer is asked for."""

    spec: KernelSpec
    request: dict[str, Any]
    worker: Worker | None
    timeout_s: float
    pending: Pending | None = None

    def answer(self) -> Any:
        if self.pending is None:
            return tasks.serve(self.spec, self.request)
        assert self.worker is not None
        return self.worker.collect(self.pending, timeout_s=self.timeout_s)


class Tracer:
    """The tracing of one spec's kernel, for its runner.

    Attributes:
      notes: "static check skipped for <call>: <reason>", each once.
      checked, kernelless: the configs (and input shapes) the static check traced, and
        those of them that ran no Pallas kernel at all.
      dot_roundings: per config (and input shapes) traced, what its kernels round dot
        operands to (``grid.dots``).
    """

    def __init__(self, spec: KernelSpec, sandbox: Sandbox, *, cache_size: int = 256) -> None:
        self.spec, self.sandbox = spec, sandbox
        self.notes: list[str] = []
        self.checked: set[str] = set()
        self.kernelless: dict[str, Mapping[str, Any]] = {}  # key -> its config
        self.dot_roundings: dict[str, frozenset[str]] = {}
        self._static: Lru[str, Traced[list[Finding]]] = Lru(maxsize=cache_size)

    def static(self, config: Mapping[str, Any], inputs: Sequence[np.ndarray]) -> Traced[list[Finding]]:
        """The static grid check's findings of one example, traced once per config and
        input shapes; parts it cannot analyse go to ``notes``."""
        key = config_key(config) + repr(shapes_key(inputs))
        cached = self._static.get(key)
        if cached is not None:
            return cached
        slot = static_tracer_slot()
        task = self._start("static", slot, config=dict(config), inputs=tuple(inputs))

        def findings() -> list[Finding]:
            done = static.static_result(self.spec.name, config, task.answer())
            self.notes.extend(n for n in done.notes if n not in self.notes)
            self.checked.add(key)
            if done.no_kernel:
                self.kernelless[key] = dict(config)
            self.dot_roundings[key] = done.dot_roundings
            return done.findings

        traced = Traced(findings)
        self._static.put(key, traced)
        if slot == "interpreters":  # the cases' worker (or this process): done before it gets the case
            traced.result()
        return traced

    def rounds_dot_operands(self, config: Mapping[str, Any], inputs: Sequence[np.ndarray], rounding: str) -> bool:
        """Whether the kernel, on this config and these input shapes, rounds its dot
        operands to ``rounding`` (``grid.dots``: a wider float to a narrow dtype right before
        a dot, or ``"tf32"`` for a float32 dot at default precision), as its static check
        traced it (waited for; False where that trace failed)."""
        self.static(config, inputs).result()
        return rounding in self.dot_roundings.get(config_key(config) + repr(shapes_key(inputs)), ())

    def blame(self, finding: Finding, inputs: BlameInputs | None) -> Finding:
        """``finding`` with its bad elements mapped to output blocks and grid points (and,
        where its run had several cores, the core that wrote them); as it is without
        ``inputs`` (a finding blame cannot map)."""
        from pallas_verify.backends.schedule import cores_named

        if inputs is None:
            return finding
        answer = self._start("blame", "interpreters", config=dict(finding.config), inputs=tuple(inputs.inputs),
                             transform=finding.transform, masks=list(inputs.masks), errors=list(inputs.errors)).answer()
        blamed = static.blamed(finding, answer)
        ran, writers = blamed.evidence.get("grid_schedule"), blamed.evidence.get("blame", {}).get("writers")
        named = cores_named(ran, writers) if ran and writers else None
        if named is None:
            return blamed
        return dataclasses.replace(blamed, message=f"{blamed.message}\n{named}",
                                   evidence={**blamed.evidence, "cores": named})

    def _start(self, task: str, slot: str, **payload: Any) -> _Task:
        request = {"task": task, "spec": self.sandbox.spec_ref, **payload}
        worker = self.sandbox.tracer(slot)
        if worker is None or self.sandbox.spec_ref is None:
            return _Task(self.spec, request, None, self.sandbox.timeout_s)
        return _Task(self.spec, request, worker, self.sandbox.timeout_s, worker.submit(request))
