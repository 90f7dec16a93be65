"""The Ray executor: each unit of work is one Ray task, placed by the hardware it needs.

Ray schedules; this module only asks. A unit needing a chip asks for its resources
(``placement.ray_request``); one that no alive node offers ends at once with a
``Failure("unplaceable")`` naming what is missing, never left pending. Other ends map
onto the local executor's: a task past its ``limit_s`` is force-cancelled (``overran``),
one whose worker process died is ``died``, one whose node died (or whose result was lost
with it) is ``node``; what to do about each is the campaign's decision. A unit's
``emit`` goes through a small mailbox actor the driver reads at every poll, ahead of the
unit's end. ``cancel`` force-cancels every task in flight (the case workers a task
started follow it: ``lifeline``). Every unit reports the node that ran it.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Mapping
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.execution.base import Done, Executor, Failure, Update, Work, host, run_entry
from pallas_verify.execution.isolation import PARALLEL_RUNS_ENV
from pallas_verify.execution.placement import RayRequest, ray_request
from pallas_verify.execution.process import import_path

__all__ = ["RayExecutor"]

_OFFERS_EVERY_S = 2.0


def _task(work: Work, mailbox: Any) -> dict[str, Any]:
    """The body of every Ray task: the worker side of ``run_entry`` plus where it ran."""
    import ray

    from pallas_verify._env import configure

    configure()
    os.environ[PARALLEL_RUNS_ENV] = str(os.cpu_count() or 1)  # Ray runs a task per CPU of the node
    node = f"{host()}:{ray.get_runtime_context().get_node_id()[:8]}"

    def send(value: Any) -> None:  # delivered before the task ends: the driver reads updates first
        ray.get(mailbox.put.remote(work.uid, value, node))

    value, failure = run_entry(work, sink=send)
    return {"value": value, "failure": failure, "node": node}


class _Mailbox:
    """Updates of running units (an actor on the driver's cluster; no CPU reserved)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, Any, str]] = []

    def put(self, uid: int, value: Any, node: str) -> None:
        self.items.append((uid, value, node))

    def take(self) -> list[tuple[int, Any, str]]:
        items, self.items = self.items, []
        return items


@dataclasses.dataclass
class _Flight:
    work: Work
    started: float


class RayExecutor(Executor):
    """Units as Ray tasks on the cluster at ``address`` (None: start a private local one).

    ``workers``: tasks in flight at once; None: the cluster's CPU count.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InvalidArgument("executor='ray' needs Ray: install the 'cluster' extra "
                                  "(pip install 'pallas-verify[cluster]').") from None
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            self._init(address)
        self._remote = ray.remote(max_retries=0)(_task)
        self._mailbox: Any = None
        self._workers = workers
        self._flights: dict[Any, _Flight] = {}
        self._offers: tuple[float, list[Mapping[str, float]]] = (0.0, [])

    def _init(self, address: str | None) -> None:
        kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        target = address
        if address is None and not os.environ.get("RAY_ADDRESS"):
            # A fresh local instance: loopback only (Ray's single-host mode, read from this
            # variable by the processes it starts and from its constant here), and workers
            # import what we import: they inherit the PYTHONPATH its processes start with
            # (a runtime_env would make Ray start new workers for it, beside the ones it
            # starts ahead of the first task, which then sit unused).
            from ray._private import ray_constants

            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
            ray_constants.ENABLE_RAY_CLUSTER = False
            kwargs.update(_node_ip_address="127.0.0.1", include_dashboard=False)
            target = "local"  # never a stale cluster another run left behind in /tmp/ray
        pythonpath = os.environ.get("PYTHONPATH")
        try:
            if target == "local":
                os.environ["PYTHONPATH"] = import_path()
            with warnings.catch_warnings():
                # Ray starts its processes with fork+exec; jax's warning about fork in a
                # threaded process does not apply to a child that execs at once.
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                self._ray.init(address=target, **kwargs)
        except (ConnectionError, RuntimeError, ValueError, self._ray.exceptions.RayError) as exc:
            why = _first(exc).split(". ")[0]
            if target == "local":
                raise InvalidArgument(f"ray_address=None: could not start a local Ray instance ({why}); start "
                                      "one with `ray start --head` and pass --ray-address HOST:6379.") from None
            raise InvalidArgument(f"ray_address={address!r}: cannot join the Ray cluster ({why}); start it "
                                  "with `ray start --head` or pass its address, e.g. --ray-address HOST:6379; a "
                                  "token-protected cluster also needs RAY_AUTH_MODE=token and its token "
                                  "(RAY_AUTH_TOKEN_PATH, see docs/cluster.md).") from None
        finally:
            if pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = pythonpath

    # -- capacity and placement ------------------------------------------------------------

    def _nodes(self) -> list[Mapping[str, float]]:
        """Total resources of every alive node, refreshed every few seconds."""
        when, nodes = self._offers
        if time.monotonic() - when > _OFFERS_EVERY_S:
            nodes = [n["Resources"] for n in self._ray.nodes() if n.get("Alive")]
            self._offers = (time.monotonic(), nodes)
        return nodes

    def slots(self) -> int:
        if self._workers is not None:
            return self._workers
        return max(1, int(sum(n.get("CPU", 0.0) for n in self._nodes())))

    def offers(self, hardware: str) -> str | None:
        return self._missing(ray_request(hardware))

    def _missing(self, request: RayRequest) -> str | None:
        if any(request.fits(n) for n in self._nodes()):
            return None
        return f"no node of the Ray cluster offers {request.describe()}"

    def accepts(self, hardware: str | None) -> bool:
        """Room now for a unit needing ``hardware``: a free slot and, for a chip, a free chip."""
        if self.free() <= 0:
            return False
        if hardware is None:
            return True
        request = ray_request(hardware)
        chips = sum(n.get("TPU" if "TPU" in request.resources else "GPU", 0.0)
                    for n in self._nodes() if request.fits(n))
        busy = sum(1 for f in self._flights.values() if f.work.hardware == hardware)
        return busy < chips

    # -- running ---------------------------------------------------------------------------

    def submit(self, work: Work) -> None:
        if self._mailbox is None:
            self._mailbox = self._ray.remote(num_cpus=0)(_Mailbox).remote()
        request = ray_request(work.hardware)
        options: dict[str, Any] = {"num_cpus": request.num_cpus, "num_gpus": request.num_gpus,
                                   "resources": dict(request.resources)}
        if work.env:
            options["runtime_env"] = {"env_vars": dict(work.env)}
        ref = self._remote.options(**options).remote(work, self._mailbox)
        self._flights[ref] = _Flight(work=work, started=time.monotonic())

    def running(self) -> list[Work]:
        return [f.work for f in self._flights.values()]

    def poll(self, timeout_s: float) -> list[Done | Update]:
        ray = self._ray
        if not self._flights:
            return []
        refs = list(self._flights)
        ray.wait(refs, num_returns=1, timeout=timeout_s)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out: list[Done | Update] = self._updates()  # sent before the ends that follow
        out += [self._fetch(ref) for ref in ready]
        now = time.monotonic()
        for ref, flight in list(self._flights.items()):
            missing = self._missing(ray_request(flight.work.hardware)) if flight.work.hardware else None
            if missing is None and now - flight.started <= flight.work.limit_s:
                continue
            ray.cancel(ref, force=True)
            del self._flights[ref]
            failure = (Failure(cause="unplaceable", message=missing) if missing else
                       Failure(cause="overran", message=f"the Ray task did not finish the unit within "
                                                        f"{flight.work.limit_s:.0f} s"))
            out.append(Done(work=flight.work, failure=failure, seconds=now - flight.started))
        return out

    def _updates(self) -> list[Done | Update]:
        by_uid = {f.work.uid: f.work for f in self._flights.values()}
        try:
            items = self._ray.get(self._mailbox.take.remote(), timeout=30)
        except self._ray.exceptions.RayError:
            return []  # the mailbox is gone with its node: the units' ends still come
        return [Update(work=by_uid[uid], value=value, node=node) for uid, value, node in items if uid in by_uid]

    def _fetch(self, ref: Any) -> Done:
        ray = self._ray
        flight = self._flights.pop(ref)
        seconds = time.monotonic() - flight.started
        try:
            answer = ray.get(ref)
        except (ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError) as exc:
            failure = Failure(cause="node", message=f"the node running the unit left the cluster: {_first(exc)}")
        except ray.exceptions.WorkerCrashedError as exc:
            failure = Failure(cause="died", message=f"the Ray worker process running the unit died: {_first(exc)}")
        except ray.exceptions.TaskCancelledError:
            failure = Failure(cause="overran", message="the Ray task was cancelled")
        except ray.exceptions.RayError as exc:
            failure = Failure(cause="executor", message=f"{type(exc).__name__}: {_first(exc)}")
        else:
            return Done(work=flight.work, value=answer["value"], failure=answer["failure"], node=answer["node"],
                        seconds=seconds)
        return Done(work=flight.work, failure=failure, seconds=seconds)

    def cancel(self) -> list[Work]:
        stopped = self.running()
        for ref in self._flights:
            self._ray.cancel(ref, force=True)
        self._flights.clear()
        return stopped

    def close(self) -> None:
        self.cancel()
        self._mailbox = None
        if self._owned and self._ray.is_initialized():
            self._ray.shutdown()


def _first(exc: BaseException) -> str:
    """The first line of an exception's message."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
