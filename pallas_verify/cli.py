"""The ``pallas-verify`` command: verify, backends (and the nightly and conformance jobs)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pallas_verify import passes
from pallas_verify._env import configure, disable_compile_cache
from pallas_verify.choices import PROFILES, repeats, run_seed
from pallas_verify.cli_args import parser
from pallas_verify.exits import EXIT_CLEAN, EXIT_USAGE, campaign_status, leave

if TYPE_CHECKING:
    from pallas_verify.reports.report import Report
    from pallas_verify.spec import KernelSpec

__all__ = ["main", "run"]


def run() -> None:
    """The ``pallas-verify`` program: ``main``, then the process ends with its status
    (``exits.leave``: every exit hook run, no teardown)."""
    leave(main())


def main(argv: Sequence[str] | None = None) -> int:
    configure()
    args = parser().parse_args(argv)
    if getattr(args, "no_compile_cache", False):
        disable_compile_cache()  # here and in every worker this run starts
    if getattr(args, "no_pass_cache", False):
        passes.disable()
    from pallas_verify.errors import PallasVerifyError

    try:
        if args.command in _RUNS_KERNELS:
            _say_jax_gaps()
        return _COMMANDS[args.command](args)
    except PallasVerifyError as exc:
        for line in str(exc).splitlines() or [""]:
            print(f"pallas-verify: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        return EXIT_PIPE_CLOSED


# The commands that run kernels here: they say first what the installed JAX lacks.
_RUNS_KERNELS = frozenset({"fuzz", "conformance", "demo", "smith", "replay"})  # verify: once its arguments check


def _say_jax_gaps() -> None:
    """What the installed JAX lacks and what is therefore not checked, once per run (the
    report says it too: ``jax_gaps``)."""
    from pallas_verify import _jax_compat

    for gap in _jax_compat.version_gaps():
        print(f"pallas-verify: {gap}", flush=True)


# What a shell reports for a command whose reader went away (128 + SIGPIPE), e.g.
# `pallas-verify backends | head`: no traceback, nothing more written.
EXIT_PIPE_CLOSED = 141


def _stdout_closed() -> bool:
    """Whether stdout's reader is gone; if so, later writes (and the exit's flush) go nowhere."""
    import os
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        if not any(event & select.POLLERR for _, event in poller.poll(0)):
            return False
    except (OSError, ValueError, AttributeError):  # no poll here, or stdout is no file: trust the error
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return True


def _backend_names(args: argparse.Namespace) -> tuple[str, ...] | None:
    return tuple(b for b in args.backends.split(",") if b) if args.backends else None


def _cmd_backends(args: argparse.Namespace) -> int:
    from pallas_verify.backends import registry

    for backend in registry.all_backends().values():
        reason = backend.available()
        what = "executes" if backend.executes else "compiles only"
        state = f"available ({what})" if reason is None else f"not available: {reason}"
        print(f"{backend.name:<22} {state}")
    return EXIT_CLEAN


def _cmd_verify(args: argparse.Namespace) -> int:
    if args.profile not in PROFILES:  # a usage error before any work (the table's message)
        from pallas_verify.profiles import profile_settings

        profile_settings(args.profile)
    seed = run_seed(args.seed, args.profile)
    out, json_path = _verify_outputs(args)  # before any work: a run must not end unable to write
    key = _pass_key(args, seed)
    kept = passes.reuse(key)
    if kept is not None:  # the same seeded run of these very files passed: nothing to search
        return _kept_end(kept, out, json_path)
    from pallas_verify._worker import preload

    preload()  # jax, Pallas, the backends: the workers, forked from here, start with them
    imported = _start_import(args.target, args.timeout)  # the spec file's import starts while this process goes on
    from pallas_verify._jax_compat import compile_cache
    from pallas_verify.engine import verify
    from pallas_verify.errors import InvalidSpec
    from pallas_verify.interrupts import signal_name, signals_interrupt
    from pallas_verify.loader import load_specs
    from pallas_verify.reports.live import LiveProgress
    from pallas_verify.reports.report import Report

    compile_cache.enable(trim=True)
    imported()
    specs = load_specs(args.target)
    _say_jax_gaps()
    print(f"pallas-verify verify: seed={seed} (rerun this search with --seed {seed})", flush=True)
    report = Report(seed=seed, profile=args.profile)
    live = LiveProgress(sys.stderr, kernels=len(specs))
    stopped = None
    with signals_interrupt():
        for done, spec in enumerate(specs):
            try:
                report.merge(verify(spec, args.backends, args.max_examples, seed, profile=args.profile,
                                    out_dir=out, timeout_s=args.timeout, shrink_budget_s=args.shrink_budget,
                                    progress=live))
            except InvalidSpec as exc:  # the other specs still run; the report says why this one did not
                report.invalid.append({"kernel": spec.name, "reason": str(exc)})
            except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: keep what finished, mark the rest
                stopped = signal_name(exc)
                if getattr(exc, "report", None) is not None:
                    report.merge(exc.report)  # type: ignore[attr-defined]
                _not_started(report, specs[done + 1 :], args.backends, stopped)
                break
    live.close()
    report.interrupted = stopped is not None
    if stopped is None and key is not None and passes.keepable(report):
        passes.keep(key, report, passes.files_read())
    return _verify_end(report, out, json_path, stopped)


def _pass_key(args: argparse.Namespace, seed: int) -> passes.Key | None:
    """The key a pass of this run is kept under; None when the run draws examples no later
    run repeats (a fresh seed: neither ``--seed`` nor a deterministic profile)."""
    if not repeats(args.seed, args.profile):
        return None
    where = args.target.split("::")[0]
    options = {"backends": args.backends, "max_examples": args.max_examples, "seed": seed, "profile": args.profile,
               "timeout": args.timeout, "shrink_budget": args.shrink_budget,
               "file": str(Path(where).resolve()) if where.endswith(".py") else None}
    return passes.Key.of("verify", args.target, options)


def _kept_end(kept: passes.Kept, out: Path, json_path: Path | None) -> int:
    """A kept pass's report, said to be one, written and summed up like a searched one."""
    report = kept.as_report()
    for gap in report.jax_gaps:
        print(f"pallas-verify: {gap}", flush=True)
    print(f"pallas-verify verify: seed={report.seed} (rerun this search with --seed {report.seed})")
    print(f"pallas-verify verify: {kept.note()} (--no-pass-cache searches again)", flush=True)
    return _verify_end(report, out, json_path, None)


def _verify_outputs(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """``--out`` and ``--json`` checked before any work (InvalidArgument, one line, otherwise)."""
    from pallas_verify.errors import InvalidArgument
    from pallas_verify.reports.outdir import writable_dir

    out = writable_dir(args.out, option="--out")
    if not args.json:
        return out, None
    path = Path(args.json)
    if path.is_dir():
        raise InvalidArgument(f"--json {args.json!r} is a folder; give a file path, e.g. {str(path / 'report.json')!r}.")
    writable_dir(path.parent, option="--json")
    return out, path


def _not_started(report: Report, specs: Sequence[KernelSpec], backends: str | None, signame: str) -> None:
    """The cells of specs a stopped run never reached: ``interrupted``."""
    from pallas_verify.backends import registry
    from pallas_verify.interrupts import not_started
    from pallas_verify.reports.report import kernel_entry

    names = [b.name for b in registry.resolve(backends)]
    for spec in specs:
        report.kernels.append(kernel_entry(spec))
        report.results.extend(not_started(spec, names, signame, "kernel"))


def _verify_end(report: Report, out: Path, json_path: Path | None, stopped: str | None) -> int:
    """Write the report (``OUT/report.*``, and ``--json``), print the summary; the exit status."""
    from pallas_verify.exits import run_status
    from pallas_verify.reports.render import write_reports
    from pallas_verify.reports.text import print_summary

    paths = write_reports(report, out)
    if json_path is not None:
        report.write_json(json_path)
    print_summary(report)
    print(f"report: {paths['html']} (JSON: {json_path or paths['json']})")
    for bad in report.invalid:
        print(f"pallas-verify: error: {bad['reason']}", file=sys.stderr)
    if report.invalid:
        return EXIT_USAGE
    return run_status(findings=bool(report.findings), interrupted=stopped is not None,
                      incomplete=any(r.status == "error" for r in report.results))


def _start_import(target: str, limit_s: float) -> Callable[[], None]:
    """Start importing the spec file in the interpreters' worker process (it keeps it
    loaded for the cases), and start the static check's worker where it has one; the
    returned call waits for the import: an exit, abort or hang at import is a usage error
    naming the file, before this process imports the file itself."""
    from pallas_verify.errors import InvalidArgument
    from pallas_verify.execution.imports import start_import
    from pallas_verify.execution.isolation import shared_worker, static_tracer_slot

    answer = start_import(target, limit_s=limit_s, worker=shared_worker("interpreters"))
    shared_worker(static_tracer_slot()).prestart()

    def imported() -> None:
        why = answer()
        if why is not None:
            raise InvalidArgument(why)

    return imported


def _workers(args: argparse.Namespace, local_default: int) -> int | None:
    """--workers, or its default: ``local_default`` locally, the cluster's CPU count on ray."""
    return args.workers if args.workers is not None or args.executor != "local" else local_default


def _cmd_fuzz(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from pallas_verify.campaigns.fuzz import FuzzOptions, fuzz, parse_budget

    backends = _backend_names(args)
    options = FuzzOptions(targets=tuple(args.targets), kernels=args.kernels, backends=backends,
                          budget_s=parse_budget(args.budget), out_dir=Path(args.out),
                          workers=_workers(args, os.cpu_count() or 1), seed=args.seed,
                          slice_examples=args.slice_examples, timeout_s=args.timeout, executor=args.executor,
                          ray_address=args.ray_address, db=args.db, hardware=args.hardware,
                          shrink_budget_s=args.shrink_budget, max_slices=args.max_slices)
    return campaign_status(fuzz(options))


def _cmd_replay(args: argparse.Namespace) -> int:
    from pallas_verify.campaigns.replay import replay_report

    return replay_report(args.report)


def _cmd_conformance(args: argparse.Namespace) -> int:
    if getattr(args, "jax", None) or getattr(args, "jax_env", None):
        return _cmd_versions(args)
    from pallas_verify.campaigns.conformance import (
        ensure_host_devices,
        registered_specs,
        run_conformance,
        user_specs,
    )

    ensure_host_devices()  # before jax is imported: multi-device kernels run, not skip
    from pallas_verify import execution
    from pallas_verify.campaigns.fuzz import parse_budget
    from pallas_verify.campaigns.output import CampaignOutput
    from pallas_verify.reports.live import MatrixProgress
    from pallas_verify.reports.text import print_matrix

    generated_s = 0.0 if args.generated.strip() in ("0", "") else parse_budget(args.generated)
    with CampaignOutput(args.out, command=args.command, formats=("json", "md", "html", "xml")) as out:
        invalid: list[dict[str, str]] = []
        named = getattr(args, "targets", None)
        specs = user_specs(args.targets, args.kernels) if named else registered_specs(args.kernels, invalid)
        planted = _planted(args)
        live = MatrixProgress(sys.stderr, total=len(specs))
        seed = run_seed(args.seed, args.profile)
        print(f"pallas-verify {args.command}: seed={seed} (repeat this run with --seed {seed})", flush=True)
        with execution.make(args.executor, workers=_workers(args, 1), address=args.ray_address) as executor:
            report = run_conformance(specs, backends=args.backends, max_examples=args.max_examples,
                                     profile=args.profile, out_dir=args.out, executor=executor,
                                     generated_s=generated_s, write=out.write, progress=live.line, status=live.tick,
                                     invalid=invalid, seed=seed, planted=planted)
        live.close()
        print_matrix(report)
        if out.write(report):
            print("reports: " + ", ".join(str(p) for p in out.paths().values()))
        else:
            report.run["output_error"] = out.error
            print(f"pallas-verify: error: the report could not be written under {args.out} ({out.error})",
                  file=sys.stderr)
    return campaign_status(report)


def _planted(args: argparse.Namespace) -> list:
    """conformance --planted: the planted-bug rows (default: those --kernels matches, for the
    registered kernels only)."""
    from pallas_verify.campaigns.sanitizer import planted_rows

    pattern = getattr(args, "planted", None)
    if pattern is None:
        pattern = "" if getattr(args, "targets", None) or args.command != "conformance" else args.kernels
    return planted_rows(pattern) if pattern else []


def _cmd_versions(args: argparse.Namespace) -> int:
    """conformance --jax: the same conformance command under each JAX release, compared."""
    from pallas_verify.campaigns.jaxenvs import cache_root, parse_envs, parse_releases, release_key
    from pallas_verify.campaigns.versions import matrix_lines, run_matrix, write_matrix
    from pallas_verify.reports.outdir import writable_dir

    cwd = Path.cwd()
    given = parse_envs(args.jax_env, cwd=cwd)
    releases = sorted({*(parse_releases(args.jax) if args.jax else ()), *given}, key=release_key)
    out = writable_dir(args.out, option="--out")
    seed = run_seed(args.seed, args.profile)  # one seed for every release's run: their cells compare
    conformance = [*args.targets, "--kernels", args.kernels, "--max-examples", str(args.max_examples),
                   "--profile", args.profile, "--generated", args.generated, "--executor", args.executor]
    for option, value in (("--backends", args.backends), ("--ray-address", args.ray_address),
                          ("--workers", args.workers), ("--seed", seed)):
        conformance += [option, str(value)] if value is not None else []
    print(f"pallas-verify conformance under jax {', '.join(releases)}, oldest first (profile {args.profile}, "
          f"seed {seed})", flush=True)
    matrix = run_matrix(releases, conformance, out_dir=out, given=given, cwd=cwd, cache=cache_root(),
                        say=lambda line: print(line, flush=True))
    print("\n".join(["", *matrix_lines(matrix)]))
    paths = write_matrix(matrix, out)
    print(f"versions: {paths['json']} ({paths['html']}, {paths['md']})")
    return matrix.status


def _cmd_compare(args: argparse.Namespace) -> int:
    """compare OLD NEW: the comparison's summary (and files); 1 on a new failure."""
    from pallas_verify.reports.compare import compare_files
    from pallas_verify.reports.compare_html import write_comparison
    from pallas_verify.reports.compare_text import summary_lines
    from pallas_verify.reports.outdir import writable_dir

    out = writable_dir(args.out, option="--out") if args.out else None
    comparison = compare_files(args.old, args.new)
    print("\n".join(summary_lines(comparison)))
    if out is not None:
        paths = write_comparison(comparison, out)
        print(f"comparison: {paths['json']} ({paths['md']}, {paths['html']})")
    return comparison.status


def _cmd_smith(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pallas_verify.campaigns.fuzz import parse_budget
    from pallas_verify.campaigns.smith.campaign import SmithOptions, smith
    from pallas_verify.exits import run_status

    backends = _backend_names(args)
    run = smith(SmithOptions(backends=backends, budget_s=parse_budget(args.budget), out_dir=Path(args.out),
                             seed=args.seed, slice_examples=args.slice_examples, timeout_s=args.timeout,
                             workers=args.workers))
    return run_status(findings=bool(run.report.findings), interrupted=run.report.interrupted, incomplete=bool(run.lost))


_COMMANDS = {"verify": _cmd_verify, "backends": _cmd_backends, "fuzz": _cmd_fuzz, "replay": _cmd_replay,
             "conformance": _cmd_conformance, "demo": _cmd_conformance, "smith": _cmd_smith,
             "compare": _cmd_compare}

if __name__ == "__main__":
    run()
