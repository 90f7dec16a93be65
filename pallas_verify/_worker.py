"""Entry point of a worker process (``execution.process.Child``):
``python -m pallas_verify._worker ROLE READ_FD WRITE_FD``, ROLE ``cases`` (cases, imports and
traces, for ``execution.isolation.Worker``) or ``units`` (units of work, for the local
executor: ``execution.local.serve``); and of the fork server that forks them
(``python -m pallas_verify._worker forks FD``: ``execution.forkserverd``)."""

from __future__ import annotations

import sys
import traceback
from typing import TYPE_CHECKING

from pallas_verify.case import Case, ErrorInfo, Outcome

if TYPE_CHECKING:
    from pallas_verify.execution.process import Channel


def _ready() -> None:
    """Before the first request, while the parent is busy with its own start: the
    persistent compilation cache (where the environment turns it on), and the imports
    every case and trace needs."""
    from pallas_verify._jax_compat import compile_cache

    compile_cache.enable()
    preload()


def preload() -> None:
    """The imports every case and trace needs: a worker's first work, and a front end's
    before it starts its workers, which are then forks that have them (``execution.forked``)."""
    import jax.experimental.pallas  # noqa: F401

    import pallas_verify.backends.registry
    import pallas_verify.grid.tasks  # noqa: F401


def _serve(parent: Channel) -> None:
    _ready()
    from pallas_verify.backends import registry
    from pallas_verify.loader import import_answer, load_spec

    specs: dict[str, object] = {}
    while True:
        try:
            request = parent.recv()
        except (EOFError, OSError):
            return
        missing = [p for p in request.get("sys_path", []) if p not in sys.path]
        sys.path[:0] = missing
        if request.get("task") == "import":  # a spec file imported here first (execution.imports)
            parent.send(import_answer(request["ref"]))
            continue
        if request.get("task") == "modules":  # the files this process has loaded (passes.keep)
            from pallas_verify.passes import loaded_files

            parent.send(loaded_files())
            continue
        try:
            spec = specs.get(request["spec"]) or specs.setdefault(request["spec"], load_spec(request["spec"]))
            if "task" in request:  # tracing for the static check or blame (pallas_verify.tracer)
                from pallas_verify.grid.tasks import serve

                parent.send(serve(spec, request))
                continue
            case = Case(
                spec=spec,
                config=request["config"],
                inputs=request["inputs"],
                backend=request["backend"],
                mode=request["mode"],
                transform=request["transform"],
            )
            outcome = registry.get(case.backend).run(case)
        except Exception as exc:  # a failure to load or run: report it, keep serving
            outcome = Outcome(error=ErrorInfo(type=type(exc).__name__, message=str(exc), traceback=traceback.format_exc()),
                              compiled_only=_compiles_only(request.get("backend")))
        parent.send(outcome)


def _compiles_only(backend: str | None) -> bool:
    """Whether ``backend`` only compiles here (its failure is then a ``compile_error``)."""
    from pallas_verify.backends import registry

    try:
        return not registry.get(str(backend)).executes
    except Exception:  # an unknown backend: its error says so
        return False


def serve_role(role: str, read_fd: int, write_fd: int) -> None:
    """Serve ``role`` on the pipe to the parent until it closes (a spawned worker's main, and
    a forked one's: ``execution.forked``); ``forks``: be the fork server, on the socket
    ``read_fd`` (``execution.forkserverd``)."""
    from pallas_verify.execution.process import connect_parent, name_process

    if role == "forks":  # the fork server (execution.forkserverd), on its socket: no thread, no pipe
        from pallas_verify.execution.forkserverd import serve

        name_process("pv-fork-server")
        serve(read_fd, preload)
        return
    name_process(f"pv-worker-{role}")
    # It follows its parent (a worker whose parent died is not left running) and ignores
    # a terminal's Ctrl-C: the parent decides what stops.
    role, channel = connect_parent([role, str(read_fd), str(write_fd)])
    if role == "units":
        from pallas_verify.execution.local import serve

        serve(channel)
    else:
        _serve(channel)


if __name__ == "__main__":
    serve_role(sys.argv[1], int(sys.argv[2]), int(sys.argv[-1]))  # the fork server: ``forks FD``
