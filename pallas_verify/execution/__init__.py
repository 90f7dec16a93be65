"""How work leaves this process: an Executor runs units of work elsewhere.

``EXECUTORS`` is the table of executors (the CLI's ``--executor`` choices); ``make``
builds one. ``local`` is a pool of worker processes on this host, ``ray`` runs each unit
as a task on a Ray cluster. Cases run in worker processes of their own (``isolation``);
spec files are imported in one first (``imports``). The local executor's workers and the
case workers are one kind of child process (``process``); no process a unit started
outlives it (``lifeline``). What a unit's end means is the campaign's business (``campaigns.units``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pallas_verify.execution.base import Done, Executor, Failure, Update, Work, emit, run_entry

__all__ = ["EXECUTORS", "Done", "Executor", "Failure", "Update", "Work", "emit", "make", "run_entry"]

#: --executor choices -> what they mean.
EXECUTORS: Mapping[str, str] = {
    "local": "worker processes on this host (--workers of them)",
    "ray": "one Ray task per unit on the cluster at --ray-address (default: start a private local one)",
}


def make(name: str, *, workers: int | None = None, address: str | None = None) -> Executor:
    """The executor called ``name``; InvalidArgument naming the choices otherwise."""
    from pallas_verify.errors import InvalidArgument

    if name == "local":
        if address is not None:
            raise InvalidArgument(f"ray_address={address!r} is only for executor='ray'; drop it or add --executor ray.")
        from pallas_verify.execution.local import LocalExecutor

        return LocalExecutor(workers or 1)
    if name == "ray":
        from pallas_verify.execution.cluster import RayExecutor

        return RayExecutor(address, workers)
    raise InvalidArgument(f"executor={name!r} is not an executor; choose from {', '.join(EXECUTORS)}.")
