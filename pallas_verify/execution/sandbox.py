"""The case sandbox: where the cases of one spec run, and for how long.

One isolation policy decides, for a backend or for tracing the kernel (``isolated``):
``isolate="auto"`` runs in a worker process whenever the spec can be loaded by reference
(so a hang is a ``timeout`` and an abort a ``crash``, and the run goes on) and in this
process otherwise; ``"always"`` requires a worker; ``"never"`` stays in this process
except for backends that must isolate (compilers that may abort). A compiler family gets a
worker whose targets compile one after another in it (Mosaic GPU fixes its target at its
first compile in a process: a worker that compiled for one GPU is replaced for the next),
one such worker at a time, handed on from one spec to the next (``isolation.hand_on``); interpreters
share one long-lived worker per slot (``isolation.shared_worker``). The interpreters' workers use the
persistent compilation cache where it is on (``_jax_compat.compile_cache``); a compiler's
does not, its compile being the check. A case's time limit adapts to the cases seen so
far (``caselimit``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pallas_verify import choices
from pallas_verify._env import COMPILE_CACHE_ENV
from pallas_verify.case import UNSUPPORTED, Case, ErrorInfo, Outcome
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution.caselimit import CaseLimit
from pallas_verify.execution.isolation import Pending, Worker, hand_on, handed, shared_worker

if TYPE_CHECKING:
    from pallas_verify.backends.base import Backend

__all__ = ["ISOLATE", "Running", "Sandbox", "compiler_slot"]

ISOLATE: tuple[str, ...] = tuple(choices.ISOLATE)


def compiler_slot(backend: Backend) -> str:
    """The worker process an isolating backend's cases run in: one per compiler family (its
    compile-only targets compile one after another in one process; Mosaic GPU's only until
    one compiles: ``Sandbox._compiler``); one of its own for a target whose real chip is
    attached."""
    family = getattr(backend, "family", None)
    if family is None or backend.executes:
        return backend.name
    return family


def _fixes_target(backend: Backend) -> bool:
    """Whether a compile for ``backend`` fixes its worker's target for the process's life:
    Mosaic GPU keeps the GPU architecture of its first compile (``backends.lowering``)."""
    return getattr(backend, "family", None) == "mosaic_gpu" and not backend.executes


@dataclasses.dataclass
class Running:
    """A case submitted to run: in a worker (``pending``), already decided (``outcome``),
    or to run in this process when collected."""

    case: Case
    backend: Backend
    worker: Worker | None = None
    pending: Pending | None = None
    outcome: Outcome | None = None
    fresh: bool = False  # a compiler's worker process started for it (its start is in its time)


class Sandbox:
    """Runs the cases of the spec named ``spec_ref`` (None: it has no reference a worker
    could load) on any backend, under the ``isolate`` policy (module docstring)."""

    def __init__(self, name: str, spec_ref: str | None, *, timeout_s: float, isolate: str,
                 seen: Callable[[Case, Outcome], Any] | None = None) -> None:
        if isolate not in ISOLATE:
            raise InvalidArgument(f"isolate={isolate!r} must be one of {ISOLATE}.")
        if isolate == "always" and spec_ref is None:
            raise InvalidArgument(
                f"isolate='always' needs KernelSpec {name!r} at module level (FILE.py::NAME or "
                "MODULE:NAME) so a worker process can load it; define it at module level or use isolate='auto'."
            )
        self.name, self.spec_ref, self.timeout_s, self.isolate = name, spec_ref, timeout_s, isolate
        self.limit = CaseLimit(ceiling=timeout_s)
        self._seen = seen  # hears of every outcome collected (the runner counts grid schedules)
        self._workers: dict[str, Worker] = {}

    def isolated(self, backend: Backend | None = None) -> bool:
        """Whether ``backend``'s cases (None: tracing the kernel) leave this process."""
        if backend is not None and backend.isolate:
            return True
        return self.isolate == "always" or (self.isolate == "auto" and self.spec_ref is not None)

    def tracer(self, slot: str) -> Worker | None:
        """The worker the kernel is traced in (the static check, blame), None: this process."""
        return shared_worker(slot) if self.isolated() else None

    def run(self, case: Case, backend: Backend) -> Outcome:
        """Run one case on ``backend``, in a worker process when isolation applies."""
        return self.collect(self.submit(case, backend))

    def submit(self, case: Case, backend: Backend, slot: str = "interpreters") -> Running:
        """Start ``case`` in its worker process and return at once (when isolation applies;
        otherwise it runs in ``collect``): the caller works meanwhile, then collects.
        Interpreters run in the shared worker of ``slot``."""
        if not self.isolated(backend):
            return Running(case, backend)
        if self.spec_ref is None:
            return Running(case, backend, outcome=Outcome(error=self._no_ref_error(backend),
                                                          compiled_only=not backend.executes))
        # compilers: a process per family (see _compiler); interpreters: one long-lived process
        # for every spec and backend
        worker = self._compiler(backend) if backend.isolate else shared_worker(slot)
        fresh = backend.isolate and worker.pid is None
        return Running(case, backend, worker, worker.submit_case(self.spec_ref, case), fresh=fresh)

    def collect(self, running: Running) -> Outcome:
        """The Outcome of a submitted case, collected once (a second call returns it again)."""
        if running.outcome is None:
            running.outcome = self._collect(running)
            error = running.outcome.error
            if running.worker is not None and _fixes_target(running.backend) and getattr(error, "type", None) != UNSUPPORTED:
                running.worker.fixed = running.backend.name  # it may have compiled: its target is set
            if self._seen is not None:
                self._seen(running.case, running.outcome)
        return running.outcome

    def _collect(self, running: Running) -> Outcome:
        if running.worker is None or running.pending is None:
            return running.backend.run(running.case)
        outcome = running.worker.collect(running.pending, timeout_s=self.timeout_s,
                                         idle_after_s=self.limit.idle_after(fresh=running.fresh))
        if outcome.timed_out:
            limit = self.limit.describe(fresh=running.fresh)
            return dataclasses.replace(outcome, diagnostics=f"{outcome.diagnostics} ({limit})")
        self.limit.record(outcome.seconds, finished=outcome.crashed is None)
        return outcome

    def _compiler(self, backend: Backend) -> Worker:
        """The worker process ``backend`` compiles in: its family's, whose targets compile in it
        one after another instead of each paying a process start, kept from the spec before
        where it compiled for the same family. A Mosaic GPU worker serves targets until one
        compiles (a case it judges unsupported compiles nothing); after that, another target
        gets a new process. The compile is the check itself: no compile is read back from the
        persistent cache. One runs at a time: another's start stops it."""
        slot = compiler_slot(backend)
        for other in [s for s in self._workers if s != slot]:
            self._workers.pop(other).close()
        if slot not in self._workers:
            self._workers[slot] = handed(slot) or Worker(timeout_s=self.timeout_s, env={COMPILE_CACHE_ENV: "off"})
        worker = self._workers[slot]
        if worker.fixed not in (None, backend.name):
            worker.close()  # it starts again, a new process, at the submit
        return worker

    def release(self, backend: Backend, then: Backend | None = None) -> None:
        """Stop the worker process an isolating ``backend`` compiled in, unless ``then`` (the
        backend run next) compiles in it too; the shared interpreter workers live on."""
        shared = then is not None and then.isolate and compiler_slot(then) == compiler_slot(backend)
        if not backend.isolate or shared:
            return
        worker = self._workers.pop(compiler_slot(backend), None)
        if worker is None:
            return
        if then is None and worker.running:  # the spec's last backend: the next spec may compile in it
            hand_on(compiler_slot(backend), worker)
        else:
            worker.close()

    def close(self) -> None:
        for slot in list(self._workers):
            self._workers.pop(slot).close()

    def _no_ref_error(self, backend: Backend) -> ErrorInfo:
        return ErrorInfo(type="InvalidSpec", message=(
            f"backend {backend.name} runs cases in a worker process, which loads KernelSpec {self.name!r} by "
            "reference; define the spec at module level so it has one (FILE.py::NAME or MODULE:NAME)."))
