"""What a campaign's unit of work does in a worker, and the example database it shares.

A worker may be another process here or a Ray task on another host, so a unit carries
everything it needs (spec by reference, seed, database address, a replay's files) and
sends back everything the driver keeps: the report as a dict and the bytes of every
reproducer it wrote. The driver alone writes reports and the failure database.

The example database is Hypothesis's: a directory (the default) or
``redis://HOST:PORT/N`` (``hypothesis.extra.redis.RedisExampleDatabase``), so a failure
one host found is replayed first by every host on the next run.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.execution import Work

__all__ = ["check_database", "example_database", "receive_reproducers", "replay_unit", "run_slice", "ship_reproducers"]

_REPRODUCER_SUFFIXES = (".py", ".npz")


def check_database(address: str) -> str:
    """``address`` if usable as an example database; InvalidArgument naming the fix otherwise."""
    if address.startswith("redis://"):
        try:
            import redis
        except ImportError:
            raise InvalidArgument(f"db={address!r} needs the redis client: install the 'cluster' extra "
                                  "(pip install 'pallas-verify[cluster]').") from None
        try:
            redis.Redis.from_url(address).ping()
        except (redis.RedisError, ValueError) as exc:
            raise InvalidArgument(f"db={address!r}: no Redis server answers there ({exc}); start one "
                                  "(redis-server --port PORT) or pass a directory.") from None
    elif "://" in address:
        raise InvalidArgument(f"db={address!r} is neither a directory nor redis://HOST:PORT/N.")
    return address


def example_database(address: str) -> Any:
    """Hypothesis's example database at ``address`` (a directory or a redis:// URL)."""
    if address.startswith("redis://"):
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(address))
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(address)


def ship_reproducers(report: Any, out_dir: Path) -> dict[str, Any]:
    """The report as a dict plus the bytes of its reproducers (the findings', and the
    upstream limitations' plain-jax ones); removes ``out_dir``."""
    files = {}
    scripts = [f.reproducer for f in report.findings] + [u.get("reproducer") for u in _upstream(report.kernels)]
    for script in filter(None, scripts):
        if Path(script).is_file():
            for path in (*(Path(script).with_suffix(s) for s in _REPRODUCER_SUFFIXES), _kernel_file(script)):
                if path.is_file():
                    files[path.name] = path.read_bytes()
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"report": report.to_dict(), "files": files}


def _upstream(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for kernel in kernels for u in kernel.get("upstream", ())]


def _kernel_file(script: str) -> Path:
    """The kernel module an upstream reproducer imports (reports.upstream writes it beside)."""
    return Path(script).with_name(f"{Path(script).stem}-kernel.py")


def receive_reproducers(result: Mapping[str, Any], into: Path) -> Any:
    """The Report of a unit's result, its reproducers written under ``into`` (driver side)."""
    from pallas_verify.reports.report import Report

    report = Report.from_dict(result["report"])
    files = result.get("files", {})
    if files:
        into.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (into / name).write_bytes(data)
    report.findings = [dataclasses.replace(f, reproducer=str((into / Path(f.reproducer).name).resolve()))
                       if f.reproducer and Path(f.reproducer).name in files else f for f in report.findings]
    for upstream in _upstream(report.kernels):
        if upstream.get("reproducer") and Path(upstream["reproducer"]).name in files:
            upstream["reproducer"] = str((into / Path(upstream["reproducer"]).name).resolve())
    return report


def run_slice(work: Work) -> dict[str, Any]:
    """A fuzz slice: ``verify`` on one backend with a few examples and its own seed."""
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    p = work.params
    out = Path(tempfile.mkdtemp(prefix="pv-slice-"))
    report = verify(load_spec(work.spec_ref), list(work.backends), work.max_examples, work.seed, out_dir=out,
                    timeout_s=p["timeout_s"], shrink_budget_s=p["shrink_s"],
                    database=example_database(p["database"]), static=p["static"])
    return ship_reproducers(report, out)


def replay_unit(work: Work) -> dict[str, Any]:
    """Replay one failure-database entry from the files the unit carries."""
    from pallas_verify.campaigns.fuzzdb import REPLAY_VERDICTS, replay_script

    with tempfile.TemporaryDirectory(prefix="pv-replay-") as tmp:
        for name, data in work.params["files"].items():
            (Path(tmp) / name).write_bytes(data)
        return {"verdict": REPLAY_VERDICTS.get(replay_script(Path(tmp) / work.params["script"]), "cannot run")}
