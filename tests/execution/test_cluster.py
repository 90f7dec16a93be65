"""The Ray executor on a real multi-node Ray cluster on this host (loopback only).

The nodes advertise fake chips: one a TPU v5e (``TPU`` and its accelerator type), one an
H100 (a GPU and its accelerator type), the head only CPUs. One cluster serves the module.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.faultkit import children_of, descendants
from pallas_verify.campaigns.fuzz import FuzzOptions, fuzz
from pallas_verify.execution import Done, Update, Work

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray_cluster")]

MUTANT = "reference_kernels.mutants.grid:rotated_index_map_spec"
TWIN = "reference_kernels.mutants.grid:block_copy_spec"


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray", reason="the 'cluster' extra (ray) is not installed")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    patch = pytest.MonkeyPatch()
    # Ray then binds every node to loopback (the constant is read at import, children read the variable).
    patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    patch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    # A dead node is noticed within about 3 s instead of Ray's default 15 s.
    health = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 3}
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False,
                                                          "_system_config": health})
    tpu = nodes.add_node(num_cpus=1, resources={"TPU": 1, "accelerator_type:TPU-V5LITEPOD": 1})
    gpu = nodes.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:H100": 1})
    try:
        ray.init(address=nodes.address, log_to_driver=False)
        nodes.wait_for_nodes()
        assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in ray.nodes())
        name = socket.gethostname()
        yield SimpleNamespace(nodes=nodes, tpu=f"{name}:{tpu.node_id[:8]}", gpu=f"{name}:{gpu.node_id[:8]}", host=name)
    finally:
        ray.shutdown()
        nodes.shutdown()
        patch.undo()


def _cells(out) -> dict:
    data = json.loads((out / "report.json").read_text())
    return data, {(k["name"], b): r for k in data["kernels"] for b, r in k["results"].items()}


def _wait(executor, want: int) -> list:
    got, deadline = [], time.monotonic() + 120
    while sum(isinstance(d, Done) for d in got) < want and time.monotonic() < deadline:
        got += executor.poll(0.5)
    return got


def test_ray_units_end_and_send_updates_as_locally(cluster):
    from pallas_verify.execution.cluster import RayExecutor

    with RayExecutor() as executor:
        for name, limit in (("echo", 60.0), ("hang", 3.0), ("abort", 60.0), ("fail", 60.0), ("chatty", 60.0)):
            executor.submit(Work(entry=f"_entries:{name}", kind="test", params={"value": 7}, limit_s=limit))
        got = _wait(executor, 5)
    done = {d.work.entry: d for d in got if isinstance(d, Done)}
    assert done["_entries:echo"].value["echo"] == 7
    assert done["_entries:echo"].value["parallel_runs"] == str(os.cpu_count())  # a task per CPU
    assert done["_entries:echo"].node.startswith(cluster.host + ":")
    assert done["_entries:hang"].failure.cause == "overran"
    assert done["_entries:abort"].failure.cause == "died"
    assert "Ray worker process running the unit died" in done["_entries:abort"].failure.message
    assert done["_entries:fail"].failure.cause == "raised"
    assert "planted failure" in done["_entries:fail"].failure.message
    chatty = [d for d in got if d.work.entry == "_entries:chatty"]
    assert [type(d) for d in chatty] == [Update, Update, Done]
    assert [d.value for d in chatty] == [{"step": 1}, {"step": 2}, {"done": 7}]


def test_cells_land_only_on_nodes_with_their_chip_and_absent_chips_are_skipped(cluster, tmp_path):
    spec = str(Path(__file__).with_name("portable_add.py")) + "::ADD_ONE"
    report = fuzz(FuzzOptions(targets=(spec,), seed=3, slice_examples=1,
                              backends=("interpret", "mosaic_tpu:v5e", "triton:h100", "mosaic_tpu:v6e"),
                              hardware="require", executor="ray", workers=None, budget_s=300, max_slices=3,
                              out_dir=tmp_path),
                  stream=io.StringIO())
    data, cells = _cells(tmp_path)
    assert data["executor"] == "ray"
    assert not report.interrupted
    assert cells["add_one", "mosaic_tpu:v5e"]["node"] == cluster.tpu, cells
    assert cells["add_one", "triton:h100"]["node"] == cluster.gpu, cells
    assert cells["add_one", "interpret"]["status"] == "pass"
    assert cells["add_one", "interpret"]["node"]
    v6e = cells["add_one", "mosaic_tpu:v6e"]
    assert v6e["status"] == "skipped"
    assert "needs a real tpu:v6e; no node of the Ray cluster offers" in v6e["reason"]
    assert "accelerator_type:TPU-V6E" in v6e["reason"]


class _Log(io.StringIO):
    """A progress stream that remembers when each line arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.lines += [(time.monotonic(), line) for line in text.splitlines() if line.strip()]
        return super().write(text)


def test_a_node_removed_mid_campaign_loses_no_finding(cluster, tmp_path):
    doomed = cluster.nodes.add_node(num_cpus=2)
    cluster.nodes.wait_for_nodes()
    log, removed, ended = _Log(), [], threading.Event()

    def remove_after_the_first_finding() -> None:
        while not any(line.startswith("[mismatch]") for _, line in log.lines):
            if ended.wait(0.2):
                return
        removed.append(time.monotonic())
        cluster.nodes.remove_node(doomed)

    remover = threading.Thread(target=remove_after_the_first_finding)
    remover.start()
    try:
        report = fuzz(FuzzOptions(targets=(MUTANT, TWIN), backends=("interpret", "tpu_interpret"), seed=11,
                                  slice_examples=2, executor="ray", workers=4, budget_s=600, max_slices=12,
                                  shrink_budget_s=0, out_dir=tmp_path),
                      stream=log)
    finally:
        ended.set()
    remover.join()
    data, cells = _cells(tmp_path)
    assert removed, "the node was never removed"
    assert not data["interrupted"]
    before = {line.split(" (")[0] for t, line in log.lines if t < removed[0] and line.startswith("[")}
    after = {f"[{f['kind']}] {f['kernel']} on {f['backend']}" for f in data["findings"]}
    assert before and before <= after, log.getvalue()
    assert {("rotated_index_map", "mismatch")} <= {(f.kernel, f.kind) for f in report.findings}
    assert all(r["status"] in ("pass", "fail") and r["examples"] > 0 for r in cells.values()), cells


def test_the_same_seed_and_slices_give_the_same_findings_locally_and_on_ray(cluster, tmp_path):
    def findings(executor: str) -> set:
        report = fuzz(FuzzOptions(targets=(MUTANT, TWIN), backends=("interpret",), seed=5, slice_examples=2,
                                  workers=2, budget_s=300, max_slices=4, executor=executor,
                                  shrink_budget_s=0, out_dir=tmp_path / executor),
                      stream=io.StringIO())
        return {(f.kind, f.kernel, f.backend) for f in report.findings}

    local, ray = findings("local"), findings("ray")
    assert local == ray
    assert ("mismatch", "rotated_index_map", "interpret") in local


def test_sigint_cancels_outstanding_tasks_and_still_writes_a_complete_report(cluster, tmp_path):
    ended, log = threading.Event(), _Log()

    def interrupt() -> None:  # a few seconds into the run, while units run
        while not any(line.startswith("pallas-verify fuzz:") for _, line in log.lines):
            if ended.wait(0.1):
                return
        if not ended.wait(3.0):
            os.kill(os.getpid(), signal.SIGINT)  # fuzz's own handler takes it while it runs

    threading.Thread(target=interrupt).start()
    try:
        started = time.monotonic()
        report = fuzz(FuzzOptions(targets=(MUTANT, TWIN), backends=("interpret", "tpu_interpret"), seed=2,
                                  executor="ray", workers=4, budget_s=600, out_dir=tmp_path), stream=log)
    finally:
        ended.set()
    assert report.interrupted
    assert time.monotonic() - started < 120  # the budget was 600 s: the running tasks were cancelled
    data, cells = _cells(tmp_path)
    assert data["interrupted"] is True and data["executor"] == "ray"
    assert set(cells) == {(k, b) for k in ("rotated_index_map", "block_copy") for b in ("interpret", "tpu_interpret")}


def test_conformance_units_on_ray_record_their_nodes(cluster, tmp_path):
    from pallas_verify.campaigns.conformance import run_conformance
    from pallas_verify.execution.cluster import RayExecutor
    from pallas_verify.loader import load_spec

    with RayExecutor() as executor:
        report = run_conformance([load_spec(str(Path(__file__).with_name("portable_add.py")) + "::ADD_ONE")],
                                 backends="interpret", max_examples=2, out_dir=tmp_path, progress=lambda _: None,
                                 executor=executor)
    assert report.executor == "ray"
    assert [r.status for r in report.results] == ["pass"]
    assert report.results[0].node.startswith(cluster.host + ":")


def _task_workers(cluster) -> list[int]:
    """Ray worker processes of this cluster running a pallas-verify task now."""
    raylets = [p.process.pid for node in cluster.nodes.list_all_nodes()
               for p in node.all_processes.get("raylet", [])]
    found = []
    for raylet in raylets:
        for pid in children_of(raylet):
            if _running_a_task(pid):
                found.append(pid)
    return found


def _running_a_task(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::_task")
    except OSError:
        return False


def test_a_ray_worker_killed_mid_task_is_retried_never_a_finding_and_leaves_no_case_worker(cluster, tmp_path):
    killed: dict[str, list[int]] = {}

    def kill_a_task_worker() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for pid in _task_workers(cluster):
                kids = descendants(pid)  # its case workers (and their fork server where it has one)
                # A task that has started its case workers, still running it now: a worker
                # that finished its task keeps its case workers but is idle, and killing it
                # loses nothing to retry.
                if kids and _running_a_task(pid):
                    os.kill(pid, signal.SIGKILL)
                    killed.update(task=[pid], case_workers=kids)
                    return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_task_worker)
    killer.start()
    # Slices of 4 examples: a unit runs for seconds, far longer than the killer takes from
    # seeing it busy to killing it.
    report = fuzz(FuzzOptions(targets=(MUTANT, TWIN), backends=("interpret",), seed=5, slice_examples=4,
                              executor="ray", workers=2, budget_s=300, max_slices=4, shrink_budget_s=0,
                              out_dir=tmp_path),
                  stream=io.StringIO())
    killer.join()
    assert killed, "no task worker was seen running"
    assert not [f for f in report.findings if f.kind in ("crash", "exception")], report.findings
    assert ("mismatch", "rotated_index_map") in {(f.kind, f.kernel) for f in report.findings}
    assert any(r["cause"] == "worker killed" for r in report.run["retried"]), (killed, report.run["retried"],
                                                                               report.run["lost"])
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{pid}").exists() for pid in killed["case_workers"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in killed["case_workers"] if Path(f"/proc/{pid}").exists()
            and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, "the killed task's case workers outlived it"
