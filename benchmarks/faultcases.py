"""The faults the ``faults`` section stages, one function each (a fresh folder in, an
``Outcome`` out). See ``faults`` for what each is checked for."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.faultkit import (
    RedisServer,
    Tagged,
    busy_unit_workers,
    children_of,
    command,
    descendants,
    fill,
    run_cli,
    small_folder,
    start_cli,
    wait_for,
)
from benchmarks.faultrun import (
    EXPECTED,
    HANG_SPEC,
    SPECS,
    Outcome,
    Watch,
    fuzz_here,
    in_thread,
    read_report,
)

__all__ = ["BAD_IMPORTS", "CASES"]

#: Spec files that exit, abort and hang when imported.
BAD_IMPORTS = {
    "exits.py": "import sys\nsys.exit(3)\n",
    "aborts.py": "import os\nos.abort()\n",
    "hangs_at_import.py": "import time\ntime.sleep(3600)\n",
}


def _status(report: object) -> int:
    from pallas_verify.exits import campaign_status

    return campaign_status(report)


def _run_here(name: str, tmp: Path, body: Callable[[Watch], object], watch: Watch, *, tag: Tagged | None = None,
              **outcome: object) -> Outcome:
    """Run ``body`` (a campaign in this process, tagged); the Outcome of its out folder."""
    tag, started = tag or Tagged(), time.perf_counter()
    with tag.here():
        report = body(watch)
    seconds = time.perf_counter() - started
    return Outcome(fault=name, exit=_status(report), seconds=seconds, report=read_report(tmp / "out"),
                   stderr=watch.getvalue(), orphans=tag.orphans(), **outcome)  # type: ignore[arg-type]


def redis_killed(tmp: Path, *, next_night: bool = True) -> Outcome:
    """Redis SIGKILLed once the driver checked it: units go on with a local database;
    the next night, Redis back, merges their examples back."""
    from pallas_verify.campaigns.exampledb import fallback_dir

    with RedisServer(tmp) as server:
        watch = Watch(on_line=lambda line: server.kill() if line.startswith("pallas-verify fuzz:") else None)
        outcome = _run_here("redis killed mid-run", tmp, lambda w: fuzz_here(tmp / "out", db=server.url, stream=w,
                                                                             max_slices=3), watch)
        notes = " ".join((outcome.report or {}).get("run", {}).get("notes", []))
        outcome.extra = {"said_unreachable": "unreachable" in notes}
        if next_night:
            server.start()
            night2 = fuzz_here(tmp / "night2", db=server.url, max_slices=3)
            outcome.extra["merged_back_next_night"] = any("merged back" in n for n in night2.run["notes"])
    shutil.rmtree(fallback_dir(server.url), ignore_errors=True)  # this host's stand-in for that server
    return outcome


def redis_wrong_type(tmp: Path) -> Outcome:
    """Every example key of night 1 overwritten with a string: night 2 quarantines them."""
    import redis

    with RedisServer(tmp) as server:
        fuzz_here(tmp / "night1", db=server.url, max_slices=3)
        client = redis.Redis.from_url(server.url)
        keys = client.keys("hypothesis-example:*")
        for key in keys:
            client.delete(key)
            client.set(key, b"not a set")
        outcome = _run_here("wrong-typed Redis keys", tmp, lambda w: fuzz_here(tmp / "out", db=server.url, stream=w),
                            Watch())
        left = [k for k in client.keys("hypothesis-example:*") if client.type(k) != b"set"]
        aside = client.keys("pallas-verify:quarantine:*")
    outcome.extra = {"keys_planted": bool(keys), "moved_aside": bool(aside) and not left}
    return outcome


def failure_db_entries(tmp: Path) -> Outcome:
    """A corrupt failure-database entry, and one that cannot run on its third night."""
    db = tmp / "out" / "db"
    db.mkdir(parents=True)
    (db / "garbage-mismatch-interpret-00000000.json").write_text("{not json")
    stale = {"kind": "crash", "kernel": "block_copy", "backend": "interpret", "message": "the worker process died",
             "config": {}, "reproducer": None, "cannot_run_nights": 2}
    (db / "block_copy-crash-interpret-11111111.json").write_text(json.dumps(stale))
    outcome = _run_here("corrupt and unrunnable failure-database entries", tmp,
                        lambda w: fuzz_here(tmp / "out", stream=w), Watch())
    notes = " ".join((outcome.report or {}).get("run", {}).get("notes", []))
    quarantine = db / "quarantine"
    outcome.extra = {"corrupt_quarantined": (quarantine / "garbage-mismatch-interpret-00000000.note").is_file(),
                     "unrunnable_retired": "retired block_copy-crash" in notes
                     and not (db / "block_copy-crash-interpret-11111111.json").exists()}
    return outcome


def out_refused(name: str, make: Callable[[Path], Path]) -> Callable[[Path], Outcome]:
    """The command refuses an output folder it cannot write, before any work."""

    def case(tmp: Path) -> Outcome:
        folder = tmp / "mnt"
        started = time.perf_counter()
        with make(folder) as out:
            tag = Tagged()
            run = run_cli(["fuzz", *SPECS, "--backends", "interpret", "--budget", "60s", "--out", str(out)],
                          cwd=tmp, env=tag.env())
        return Outcome(fault=name, exit=run.returncode, seconds=time.perf_counter() - started, stderr=run.stderr,
                       orphans=tag.orphans(), refusal=True, extra={"names_the_folder": "--out" in run.stderr})

    return case


def _read_only(folder: Path) -> object:
    return small_folder(folder, read_only=True)


class _Full:
    """A tmpfs filled to the last byte."""

    def __init__(self, folder: Path) -> None:
        self.mount = small_folder(folder, size_kb=64)

    def __enter__(self) -> Path:
        path = self.mount.__enter__()
        try:
            fill(path)
        except BaseException:
            self.mount.__exit__(None, None, None)
            raise
        return path

    def __exit__(self, *exc: object) -> None:
        self.mount.__exit__(*exc)


class _DevNull:
    def __init__(self, folder: Path) -> None:
        pass

    def __enter__(self) -> Path:
        return Path("/dev/null")

    def __exit__(self, *exc: object) -> None:
        pass


def disk_full_mid_run(tmp: Path) -> Outcome:
    """The output folder fills up after the first report was written."""
    with small_folder(tmp / "out", size_kb=2048) as out:
        filled: list[int] = []
        running = True

        def keep_full_once_written() -> None:  # whatever the run frees is taken again
            wait_for(lambda: (out / "report.json").exists(), 120, "the first report")
            while running:
                filled.append(fill(out))
                time.sleep(0.02)

        in_thread(keep_full_once_written)
        watch = Watch()
        tag, started = Tagged(), time.perf_counter()
        with tag.here():
            final = fuzz_here(out, stream=watch)
        running = False
        on_disk = read_report(out)
        empty = [p.name for p in (out / "db").glob("*") if p.is_file() and p.stat().st_size == 0] \
            if (out / "db").is_dir() else []
    return Outcome(fault="output folder full mid-run", exit=_status(final), seconds=time.perf_counter() - started,
                   report=on_disk, final=final.to_dict(), stderr=watch.getvalue(), printed=watch.findings(),
                   expected=frozenset(), orphans=tag.orphans(),
                   extra={"filled": bool(filled), "said_so": "cannot write the report" in watch.getvalue(),
                          "no_half_written_file": not empty, "found_everything": _found(final) >= EXPECTED})


def _found(report: object) -> set[tuple[str, str]]:
    return {(f.kind, f.kernel) for f in report.findings}  # type: ignore[attr-defined]


def hang_short_budget(tmp: Path) -> Outcome:
    """A kernel that hangs, a budget too short to shrink its timeout."""
    outcome = _run_here("hanging kernel, short budget", tmp, lambda w: fuzz_here(
        tmp / "out", targets=(HANG_SPEC,), stream=w, workers=1, budget_s=12.0, timeout_s=8.0, max_slices=None), Watch(),
        expected=frozenset({("timeout", "hangs")}), allowed=frozenset({("timeout", "hangs")}))
    cell = ((outcome.report or {}).get("kernels") or [{}])[0].get("results", {}).get("interpret", {})
    outcome.extra = {"cell_failed_not_unreached": cell.get("status") == "fail"}
    return outcome


def worker_killed(tmp: Path) -> Outcome:
    """SIGKILL of a unit's worker process while it runs a slice."""
    killed: list[int] = []

    def kill_one() -> None:
        wait_for(busy_unit_workers, 120, "a unit's worker process running a unit")
        pid = busy_unit_workers()[0]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    in_thread(kill_one)
    outcome = _run_here("SIGKILL of a unit's worker", tmp, lambda w: fuzz_here(tmp / "out", stream=w), Watch())
    retried = (outcome.report or {}).get("run", {}).get("retried", [])
    outcome.extra = {"killed": bool(killed), "retried_not_charged": any(r["cause"] == "worker killed" for r in retried)}
    return outcome


def ray_worker_killed(tmp: Path) -> Outcome:
    """SIGKILL of the Ray worker process running a slice (``ray::_task``), on a private
    local Ray instance: retried, never a finding, its case workers gone with it."""
    tag, killed = Tagged(), []

    def kill_a_task_worker() -> None:
        def busy() -> list[int]:
            return [pid for pid in tag.alive() if command(pid).startswith(b"ray::_task") and children_of(pid)]

        wait_for(busy, 180, "a Ray task running a slice")
        pid = busy()[0]
        killed.append((pid, descendants(pid)))  # its case workers, and their fork server where it has one
        os.kill(pid, signal.SIGKILL)

    in_thread(kill_a_task_worker)
    outcome = _run_here("SIGKILL of a Ray task's worker", tmp, lambda w: fuzz_here(tmp / "out", stream=w,
                                                                                  executor="ray"), Watch(), tag=tag)
    retried = (outcome.report or {}).get("run", {}).get("retried", [])
    outcome.extra = {"killed": bool(killed), "retried_not_charged": any(r["cause"] == "worker killed" for r in retried),
                     "case_workers_gone": bool(killed) and not any(Path(f"/proc/{p}").exists() and command(p)
                                                                   for p in killed[0][1])}
    return outcome


def broken_spec_files(tmp: Path) -> Outcome:
    """Spec files that exit, abort and hang at import, beside good ones."""
    for name, text in BAD_IMPORTS.items():
        (tmp / name).write_text(text)
    tag, started = Tagged(), time.perf_counter()
    run = run_cli(["fuzz", *BAD_IMPORTS, *SPECS, "--backends", "interpret", "--budget", "120s", "--max-slices", "3",
                   "--workers", "2", "--slice-examples", "2", "--seed", "1", "--out", "out"], cwd=tmp, env=tag.env())
    errors = [line for line in run.stderr.splitlines() if line.startswith("pallas-verify: error:")]
    said = {name: any(name in line for line in errors) for name in BAD_IMPORTS}
    return Outcome(fault="spec files that exit, abort, hang at import", exit=run.returncode,
                   seconds=time.perf_counter() - started, report=read_report(tmp / "out"), stderr=run.stderr,
                   orphans=tag.orphans(), extra={"exit_2": run.returncode == 2, "one_line_each": all(said.values())
                                                 and len(errors) == len(BAD_IMPORTS)})


def bad_numbers(tmp: Path) -> Outcome:
    """--timeout -1 and nan, --budget 0, --workers 0: refused up front."""
    tag, started, runs = Tagged(), time.perf_counter(), []
    for option, value in (("--timeout", "-1"), ("--timeout", "nan"), ("--budget", "0"), ("--workers", "0")):
        runs.append(run_cli(["fuzz", *SPECS, "--out", "out", option, value], cwd=tmp, env=tag.env()))
    return Outcome(fault="bad numeric options", exit=max(r.returncode for r in runs),
                   seconds=time.perf_counter() - started, stderr="\n".join(r.stderr for r in runs),
                   orphans=tag.orphans(), refusal=True,
                   extra={"every_one_exit_2": all(r.returncode == 2 for r in runs), "no_report": not (tmp / "out"
                                                                                                      / "report.json").exists()})


def two_campaigns(tmp: Path) -> Outcome:
    """A second campaign on the folder of a running one."""
    tag, started = Tagged(), time.perf_counter()
    args = ["fuzz", *SPECS, "--backends", "interpret", "--max-slices", "3", "--workers", "2", "--slice-examples", "2",
            "--seed", "1", "--out", "out"]
    first = start_cli(args, cwd=tmp, env=tag.env())
    wait_for(lambda: (tmp / "out" / ".pallas-verify.lock").exists() and (tmp / "out" / ".pallas-verify.lock")
             .read_text().startswith("pid"), 120, "the first campaign's lock")
    second = run_cli([*args[:-1], "out"], cwd=tmp, env=tag.env())
    _out, _err = first.communicate(timeout=300)
    report = read_report(tmp / "out")
    return Outcome(fault="two campaigns on one folder", exit=second.returncode, seconds=time.perf_counter() - started,
                   stderr=second.stderr, orphans=tag.orphans(), refusal=True,
                   extra={"names_the_holder": f"pid {first.pid}" in second.stderr,
                          "first_kept_its_report": report is not None and first.returncode == 1
                          and {(f["kind"], f["kernel"]) for f in report["findings"]} >= EXPECTED})


def _terminated(name: str, args: list[str], when: str, *, stream: str,
                sig: signal.Signals = signal.SIGTERM) -> Callable[[Path], Outcome]:
    """SIGTERM (a cancelled CI job) or SIGINT (Ctrl-C) once a line starting with ``when``
    is printed."""

    def case(tmp: Path) -> Outcome:
        tag, started = Tagged(), time.perf_counter()
        proc = start_cli(args, cwd=tmp, env=tag.env())
        pipe = proc.stdout if stream == "stdout" else proc.stderr
        assert pipe is not None
        seen: list[str] = []
        for line in pipe:
            seen.append(line)
            if line.startswith(when):
                proc.send_signal(sig)
                break
        out, err = proc.communicate(timeout=300)
        text = "".join(seen) + (out if stream == "stdout" else err)
        stderr = err if stream == "stdout" else "".join(seen) + err
        report = read_report(tmp / "out")
        printed = Watch()
        printed.write(text)
        return Outcome(fault=name, exit=proc.returncode, seconds=time.perf_counter() - started, report=report,
                       stderr=stderr, printed=printed.findings(), expected=frozenset(), orphans=tag.orphans(),
                       extra={"interrupted": bool(report and report["interrupted"]),
                              "status_says_so": proc.returncode in (1, 130) and proc.returncode != 143,
                              "no_stack_dump": "Fatal Python error" not in stderr and "SIGTERM received" not in stderr})

    return case


def driver_killed(tmp: Path) -> Outcome:
    """The driver itself SIGKILLed (an OOM kill, a runner lost) after its first unit: the
    report written after that unit stays, its workers do not outlive it, the lock goes."""
    from pallas_verify.campaigns.output import CampaignOutput

    tag, started = Tagged(), time.perf_counter()
    proc = start_cli(_FUZZ_FOREVER, cwd=tmp, env=tag.env())
    wait_for(lambda: ((read_report(tmp / "out") or {}).get("run") or {}).get("units", 0) >= 1, 180,
             "the report after the first unit")
    printed = Watch()
    proc.kill()
    _, err = proc.communicate(timeout=60)
    printed.write(err)
    report = read_report(tmp / "out")
    try:
        with CampaignOutput(tmp / "out", command="fuzz"):
            released = True
    except Exception:
        released = False
    return Outcome(fault="driver SIGKILLed", exit=proc.returncode, seconds=time.perf_counter() - started,
                   report=report, stderr="", expected=frozenset(), orphans=tag.orphans(),
                   extra={"report_of_the_run_so_far": bool(report) and report["run"]["finished"] is False,
                          "lock_released": released})


_FUZZ_FOREVER = ["fuzz", *SPECS, "--backends", "interpret", "--budget", "10m", "--workers", "2", "--slice-examples", "2",
                 "--out", "out"]

CASES: dict[str, Callable[[Path], Outcome]] = {
    "redis_killed": redis_killed,
    "redis_wrong_type": redis_wrong_type,
    "failure_db_entries": failure_db_entries,
    "out_read_only": out_refused("read-only output folder", _read_only),
    "out_full": out_refused("full output folder", _Full),
    "out_dev_null": out_refused("--out /dev/null", _DevNull),
    "disk_full_mid_run": disk_full_mid_run,
    "hang_short_budget": hang_short_budget,
    "worker_killed": worker_killed,
    "ray_worker_killed": ray_worker_killed,
    "broken_spec_files": broken_spec_files,
    "bad_numbers": bad_numbers,
    "two_campaigns": two_campaigns,
    "fuzz_sigterm": _terminated("SIGTERM to fuzz", _FUZZ_FOREVER, "[", stream="stderr"),
    "fuzz_sigint": _terminated("SIGINT to fuzz", _FUZZ_FOREVER, "[", stream="stderr", sig=signal.SIGINT),
    "driver_killed": driver_killed,
    "conformance_sigterm": _terminated("SIGTERM to conformance", [
        "conformance", "--kernels", "scale_shift,ragged_add,softmax,matmul_f32", "--backends", "interpret",
        "--max-examples", "2", "--workers", "1", "--out", "out"], "[1/", stream="stdout"),
}
