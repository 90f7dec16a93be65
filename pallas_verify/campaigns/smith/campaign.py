"""``pallas-verify smith``: a time budget of generated programs through every backend.

The budget is spent in batches (``smith.batch``): a batch is ``verify(SPEC, backends,
slice_examples, seed)`` on the generated-programs spec (``smith.spec``), so the engine,
the runner and the oracles are those of ``verify``: interpreters execute and are compared
with the reference and each other, compile-only backends compile, and a finding shrinks
the program itself. Batches run as units of work on worker processes, one per core
(``workers``), or one after the other in this process (``workers=1``; with
``isolate="never"`` the interpreters run in this process too, as tests that patch an
interpreter need). Each batch stops by itself once the budget is spent (or
the campaign is cancelled), after the case it is running, and keeps what it found.

As each batch finishes the campaign prints a line (programs, validity, findings so far;
on a terminal a status line is redrawn below). Then, per finding (each re-run once and
classified by ``smith.recheck`` inside its batch):

- a compile error whose message is a clean "not supported" is coverage (what the
  compiler does not take), not a finding (``NOT_SUPPORTED``);
- the rest are de-duplicated by signature (``fuzzdb.signature``), timed from the start of
  the campaign, written as a readable reproducer (``smith.repro``) and triaged against
  the table of known upstream limitations (``smith.triage``).

SIGINT or SIGTERM ends the campaign like the end of its budget: running batches wind
down and what finished is written (``report.interrupted``); a second SIGINT stops at once.
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from pallas_verify.campaigns.smith.record import (
    GENERATED,
    NOT_SUPPORTED,
    SmithRun,
    absorb,
    conformance_rows,
    write_run,
)
from pallas_verify.choices import run_seed
from pallas_verify.errors import InvalidArgument, check_positive_int
from pallas_verify.reports.progress import Progress
from pallas_verify.reports.report import Report

__all__ = ["GENERATED", "NOT_SUPPORTED", "SmithOptions", "SmithRun", "conformance_rows", "smith"]

# Past the budget (or a cancel), running batches get this long to return what they found
# (a campaign whose budget ended before any batch returned waits for its first one).
_GRACE_S = 5.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class SmithOptions:
    """What a smith campaign runs.

    Attributes:
      backends: backend names; default None = every available TPU-capable backend.
      budget_s: wall-time budget in seconds; default 1800.
      out_dir: reports and reproducers; default "pv-smith".
      seed: base seed (batch i uses seed + i); None (default) draws one.
      slice_examples: programs per batch; default 4.
      timeout_s: per-case time limit; default 60.
      isolate: the runner's isolation ("auto", default; "never" runs batches one at a
        time in this process, interpreters included, as tests that patch an interpreter need).
      workers: batches at once on worker processes; default None = one per core; 1 runs
        them one at a time from this process (the interpreters in a worker of their own).
      max_grid_points: grid points per program; default 8.
      stop_on: finding kinds that end the campaign at their first occurrence (e.g.
        ("mismatch", "backend_divergence"): how long a campaign takes to find a bug);
        default () runs the whole budget.
    """

    backends: tuple[str, ...] | None = None
    budget_s: float = 1800.0
    out_dir: Path = Path("pv-smith")
    seed: int | None = None
    slice_examples: int = 4
    timeout_s: float = 60.0
    isolate: str = "auto"
    workers: int | None = None
    max_grid_points: int = 8
    stop_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "out_dir", Path(self.out_dir))  # a str is as good as a Path
        for field in ("slice_examples", "max_grid_points"):
            check_positive_int(field, getattr(self, field), example=10)
        check_positive_int("workers", self.workers, optional=True, example=2)
        from pallas_verify.findings import FINDING_KINDS

        unknown = [k for k in self.stop_on if k not in FINDING_KINDS]
        if unknown or isinstance(self.stop_on, str):
            raise InvalidArgument(f"stop_on={self.stop_on!r} must be a tuple of finding kinds, from {FINDING_KINDS}.")


def _backends(options: SmithOptions) -> list[str]:
    from pallas_verify.backends import registry

    chosen = registry.resolve(options.backends)
    if options.backends is None:
        chosen = [b for b in chosen if b.available() is None and "tpu" in b.platforms]
    if not chosen:
        raise InvalidArgument(f"backends={options.backends!r} leaves no backend to run; name e.g. interpret,tpu_interpret.")
    return [b.name for b in chosen]


def _interpreters(names: list[str]) -> set[str]:
    from pallas_verify.backends import registry

    return {n for n in names if registry.get(n).executes and not registry.get(n).isolate}


def _spec(options: SmithOptions, backends: list[str]) -> Any:
    from pallas_verify.campaigns.smith import spec as smith_spec

    if options.max_grid_points == 8:
        return smith_spec.campaign_spec(backends)
    if options.isolate != "never":
        raise InvalidArgument(f"max_grid_points={options.max_grid_points!r} needs isolate='never' (worker processes "
                              "load a module-level spec, drawn with 8 grid points); use 8 or isolate='never'.")
    return smith_spec.generated_spec(max_grid_points=options.max_grid_points,
                                     masked_loads=smith_spec.masked_loads_for(backends))


@dataclasses.dataclass
class _Campaign:
    """One campaign's moving parts: its options, what it found, when it must stop."""

    options: SmithOptions
    run: SmithRun
    spec: Any
    backends: list[str]
    seed: int
    progress: Progress
    started: float = dataclasses.field(default_factory=time.monotonic)
    wall: float = dataclasses.field(default_factory=time.time)
    cancelled: bool = False
    batches: int = 0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def stop_file(self) -> Path:
        return self.options.out_dir / "tmp" / "stop"

    def found(self) -> bool:
        """Whether the campaign has a finding of a kind it stops on."""
        return any(f.kind in self.options.stop_on for f in self.run.report.findings)

    def done(self) -> bool:
        """The budget is spent, the campaign was cancelled, or it found what it stops on."""
        return self.cancelled or self.found() or self.elapsed >= self.options.budget_s

    def next_seed(self) -> int:
        self.batches += 1
        return (self.seed + self.batches - 1) % 2**32

    def shrink_s(self) -> float:
        """Seconds to shrink a finding: a third of what is left (5 to 60), or 5 when the
        campaign ends at its first finding anyway (its time to that finding is the figure)."""
        if self.options.stop_on:
            return 5.0
        return max(5.0, min(60.0, (self.options.budget_s - self.elapsed) / 3))

    def fold(self, result: dict[str, Any]) -> None:
        """One batch's outcome into the run, with a line saying so."""
        from pallas_verify.campaigns.units import received

        run = self.run
        if "error" in result:  # the batch itself was lost: a crash or a hang of its worker, or a tool error
            run.lost.append(f"{result.get('kind', 'exception')}: {result['error']}")
            self.progress.note(f"{self.elapsed:7.1f} s  a batch was lost ({result.get('kind')}): "
                               f"{str(result['error']).splitlines()[0][:200]}")
            return
        part = received(result, self.options.out_dir / "tmp" / f"batch{len(run.batch_seconds)}", run.lost, "a batch")
        offset = result["started"] - self.wall
        part.findings = [dataclasses.replace(f, elapsed_s=round(offset + f.elapsed_s, 3)) for f in part.findings]
        programs = max((r.examples for r in part.results), default=0)
        run.examples += programs
        run.batch_seconds.append(round(time.time() - result["started"], 3))
        for digest, productions in result["coverage"].items():
            if digest not in run.sources:
                run.sources.add(digest)
                run.coverage.update(productions)
        run.noise += result["noise"]
        for why in result.get("lost", ()):
            run.lost.append(why)
            self.progress.note(f"{self.elapsed:7.1f} s  {why}")
        for f in absorb(run, part, self.options.out_dir, _interpreters(self.backends)):
            self.progress.note(f"[{f.kind}] on {f.backend} after {f.elapsed_s:.1f} s ({f.evidence.get('recheck')}): "
                               f"{f.message.splitlines()[0][:160]} ({f.reproducer})")
        per = ", ".join(f"{r.backend} {r.examples}" for r in part.results)
        self.progress.note(f"{self.elapsed:7.1f} s  batch of {programs} programs ({per}) | {run.programs} programs, "
                           f"validity {run.validity:.1%}, {len(run.report.findings)} findings")

    def show(self) -> None:
        if self.progress.tty:  # piped output gets the batch lines only
            per = ", ".join(f"{c.backend} {c.examples}" for c in self.run.cells.values()) or "starting"
            self.progress.show(elapsed=self.elapsed, cells=per, examples=self.run.programs,
                               findings=len(self.run.report.findings), label="programs per backend", unit="programs")


def smith(options: SmithOptions, *, stream: TextIO = sys.stderr) -> SmithRun:
    """Run generated programs for ``options.budget_s`` seconds; write and return the run."""
    from pallas_verify.reports.outdir import writable_dir

    writable_dir(options.out_dir, option="--out")
    seed = run_seed(options.seed)
    backends = _backends(options)
    run = SmithRun(report=Report(seed=seed, profile="dev", backends=backends))
    run.report.kernels.append({"name": GENERATED, "features": ["generated"], "platforms": ["tpu"]})
    camp = _Campaign(options=options, run=run, spec=_spec(options, backends), backends=backends, seed=seed,
                     progress=Progress(stream, options.budget_s))
    shutil.rmtree(options.out_dir / "tmp", ignore_errors=True)
    (options.out_dir / "tmp").mkdir(parents=True)
    here = options.isolate == "never" or _workers(options) == 1
    where = "in this process" if here else f"on {_workers(options)} worker processes"
    camp.progress.note(f"pallas-verify smith: seed={seed}, backends {','.join(backends)}, budget "
                       f"{options.budget_s:.0f} s, batches of {options.slice_examples} programs {where}")
    with _StopOnSignal(camp):
        if here:
            _in_process(camp)
        else:
            _on_workers(camp)
    run.report.interrupted = camp.cancelled
    run.report.seconds = camp.elapsed
    run.finish()
    write_run(run, options.out_dir)
    shutil.rmtree(options.out_dir / "tmp", ignore_errors=True)
    camp.progress.note(f"{len(run.report.findings)} findings, {run.programs} programs in {run.report.seconds:.0f} s"
                       f"{' (interrupted)' if camp.cancelled else ''}; report: {options.out_dir / 'report.json'}")
    return run


def _workers(options: SmithOptions) -> int:
    import os

    return options.workers or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                  else os.cpu_count() or 1)


def _in_process(camp: _Campaign) -> None:
    from pallas_verify.campaigns.smith.batch import run_batch

    end = camp.started + camp.options.budget_s
    while not camp.done():
        result = run_batch(camp.spec, camp.backends, camp.options.slice_examples, camp.next_seed(),
                           timeout_s=camp.options.timeout_s, isolate=camp.options.isolate, shrink_s=camp.shrink_s(),
                           stop=lambda: camp.cancelled or time.monotonic() >= end)
        camp.fold(result)


def _on_workers(camp: _Campaign) -> None:
    from pallas_verify import execution
    from pallas_verify.execution import Done, Work
    from pallas_verify.loader import spec_ref

    options, ref = camp.options, spec_ref(camp.spec)
    stop_at = camp.wall + options.budget_s
    limit = options.timeout_s * (options.slice_examples + 2) + 120.0
    with execution.make("local", workers=_workers(options)) as executor:
        ended: float | None = None
        try:
            while True:
                if camp.done():
                    if ended is None:
                        ended = time.monotonic()
                        camp.stop_file.touch()  # running batches wind down after their current case
                    first = not camp.run.slices and not camp.cancelled  # a campaign reports one batch at least
                    if not executor.running() or (time.monotonic() - ended > _GRACE_S and not first):
                        break
                while not camp.done() and executor.free() > 0:
                    executor.submit(Work(entry="pallas_verify.campaigns.smith.batch:run_unit", kind="slice",
                                         spec_ref=ref, backends=tuple(camp.backends), seed=camp.next_seed(),
                                         max_examples=options.slice_examples, limit_s=limit,
                                         params={"timeout_s": options.timeout_s, "shrink_s": camp.shrink_s(),
                                                 "stop_at": stop_at, "stop_file": str(camp.stop_file)}))
                for done in executor.poll(0.25):
                    if isinstance(done, Done):  # a batch sends no updates, only its end
                        camp.fold(_batch_result(done))
                camp.show()
        finally:
            executor.cancel()


def _batch_result(done: Any) -> dict[str, Any]:
    """A batch's dict (``batch.run_unit``'s), or, when its worker did not return, the
    lost batch as ``fold`` takes it: the cause (crash, timeout, raised ...) and what happened."""
    if done.failure is not None:
        return {"kind": done.failure.cause, "error": done.failure.message}
    if not isinstance(done.value, dict):
        return {"kind": "internal error", "error": f"the batch returned {type(done.value).__name__}, not a dict"}
    return done.value


class _StopOnSignal:
    """SIGINT and SIGTERM cancel the campaign (it winds down and writes what it found);
    a second SIGINT raises KeyboardInterrupt at once."""

    def __init__(self, camp: _Campaign) -> None:
        self.camp = camp
        self.old: dict[int, Any] = {}

    def __enter__(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.old[sig] = signal.signal(sig, self._stop)

    def _stop(self, signum: int, frame: Any) -> None:
        if self.camp.cancelled and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.camp.cancelled = True
        self.camp.progress.note(f"{self.camp.elapsed:7.1f} s  {signal.Signals(signum).name}: stopping; running "
                                "batches finish their current case (Ctrl-C again to stop at once)")

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
