"""Entry point of a worker process: ``python -m pallas_verify._worker READ_FD WRITE_FD``."""

from __future__ import annotations

import sys
import traceback
from multiprocessing.connection import Connection

from pallas_verify.case import Case, ErrorInfo, Outcome


def _serve(read_fd: int, write_fd: int) -> None:
    from pallas_verify.execution.lifeline import follow_parent

    follow_parent()  # a worker whose parent died (killed, cancelled) is not left running
    from pallas_verify.backends import registry
    from pallas_verify.loader import import_answer, load_spec

    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    specs: dict[str, object] = {}
    while True:
        try:
            request = inbox.recv()
        except EOFError:
            return
        missing = [p for p in request.get("sys_path", []) if p not in sys.path]
        sys.path[:0] = missing
        if request.get("task") == "import":  # a spec file imported here first (execution.imports)
            outbox.send(import_answer(request["ref"]))
            continue
        try:
            spec = specs.get(request["spec"]) or specs.setdefault(request["spec"], load_spec(request["spec"]))
            if "task" in request:  # tracing for the static check or blame (pallas_verify.tracer)
                from pallas_verify.grid.tasks import serve

                outbox.send(serve(spec, request))
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
        outbox.send(outcome)


def _compiles_only(backend: str | None) -> bool:
    """Whether ``backend`` only compiles here (its failure is then a ``compile_error``)."""
    from pallas_verify.backends import registry

    try:
        return not registry.get(str(backend)).executes
    except Exception:  # an unknown backend: its error says so
        return False


if __name__ == "__main__":
    import signal

    # A Ctrl-C on the terminal reaches the whole process group: the parent decides what
    # stops (it keeps what finished, then closes its workers), not each worker on its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _serve(int(sys.argv[1]), int(sys.argv[2]))
