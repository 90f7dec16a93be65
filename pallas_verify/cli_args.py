"""The ``pallas-verify`` command's arguments: one parser per command, and the parse-time
checks of counts and time limits (``cli`` runs the commands)."""

from __future__ import annotations

import argparse

__all__ = ["DESCRIPTION", "parser"]

DESCRIPTION = ("The pallas-verify command: verify a kernel spec, list the backends, fuzz nightly, replay a "
               "report, run the conformance matrix (across JAX releases too), compare two reports.")


def parser() -> argparse.ArgumentParser:
    """The parser of every ``pallas-verify`` command."""
    top = argparse.ArgumentParser(prog="pallas-verify", description=DESCRIPTION)
    sub = top.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="search one spec (or every spec of a file) for findings")
    verify.add_argument("target", help="FILE.py::NAME, MODULE:NAME, or FILE.py / MODULE for all its specs")
    _common(verify)
    verify.add_argument("--max-examples", type=int, default=None, metavar="N")
    verify.add_argument("--profile", default="dev", help=_profile_help())
    verify.add_argument("--json", default=None, metavar="PATH", help="write the JSON report here")
    _compile_cache(verify)
    verify.add_argument("--no-pass-cache", action="store_true",
                        help="search even when the same seeded run of the same files passed before (by default "
                             "such a pass is kept in the user's cache folder and its verdict reused; "
                             "PALLAS_VERIFY_PASS_CACHE=off does the same as this flag, =DIR keeps them in DIR)")
    sub.add_parser("backends", help="list every backend and whether it is available here")
    _fuzz_parser(sub)
    replay = sub.add_parser("replay", help="re-run every finding of a JSON report through its reproducer")
    replay.add_argument("report", metavar="REPORT.json")
    _conformance_parser(sub)
    _smith_parser(sub)
    _compare_parser(sub)
    return top


def _compare_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("compare", help="what changed between two report.json files (regressions, fixes, n/a)")
    cmd.add_argument("old", metavar="OLD.json", help="the earlier report (or a run's folder holding report.json)")
    cmd.add_argument("new", metavar="NEW.json", help="the later report (or a run's folder holding report.json)")
    cmd.add_argument("--out", default=None, metavar="DIR", help="write compare.json, compare.md and compare.html here")


def _smith_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("smith", help="run random generated Pallas programs through every backend (conformance)")
    cmd.add_argument("--backends", default=None, help="comma-separated backend names (default: all available for TPU)")
    cmd.add_argument("--budget", default="30m", help="wall-time budget, e.g. 90s, 30m, 1h30m (default 30m)")
    cmd.add_argument("--out", default="pv-smith", metavar="DIR", help="reports and reproducers go here")
    cmd.add_argument("--seed", type=int, default=None)
    cmd.add_argument("--slice-examples", type=int, default=4, metavar="N", help="programs per batch (default 4)")
    cmd.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per-case time limit")
    cmd.add_argument("--workers", type=int, default=None, metavar="N",
                     help="batches at once on worker processes (default: one per core)")
    _compile_cache(cmd)


def _conformance_parser(sub: argparse._SubParsersAction) -> None:
    from pallas_verify.choices import DEMO_KERNELS

    for name, help_text, kernels, out in (
        ("conformance", "the feature x backend matrix of the registered kernels", "*", "pv-out/conformance"),
        ("demo", "verify a few bundled kernels on every available backend", ",".join(DEMO_KERNELS), "pv-out/demo"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        if name == "conformance":
            cmd.add_argument("targets", nargs="*", metavar="TARGET",
                             help="spec files or modules (FILE.py, MODULE; default: every kernel registered under the entry-point group pallas_verify.kernels)")
        cmd.add_argument("--kernels", default=kernels, metavar="PATTERN", help="fnmatch pattern(s), comma-separated")
        cmd.add_argument("--backends", default=None, help="comma-separated backend names (default: all)")
        cmd.add_argument("--max-examples", type=_count, default=3, metavar="N")
        cmd.add_argument("--profile", default="ci", help=_profile_help())
        cmd.add_argument("--seed", type=int, default=None,
                         help="the seed every kernel's search draws from (default: 0 under a derandomized "
                              "profile such as ci, else a fresh one; the report records it)")
        cmd.add_argument("--out", default=out, metavar="DIR")
        cmd.add_argument("--generated", default="0", metavar="BUDGET",
                         help="add a 'generated programs' row: a smith campaign of this budget, e.g. 5m (default 0: none)")
        _executor_options(cmd, workers_default="1")
        _compile_cache(cmd)
        if name == "conformance":
            cmd.add_argument("--planted", default=None, metavar="PATTERN",
                             help="planted-bug kernels run as rows with their expected verdicts (sanitizer "
                                  "conformance), fnmatch pattern(s); default --kernels' pattern for the registered "
                                  "kernels, none for spec files; '' for none")
            _jax_options(cmd)


def _jax_options(cmd: argparse.ArgumentParser) -> None:
    """--jax, --jax-env: conformance under several JAX releases (``campaigns.versions``)."""
    cmd.add_argument("--jax", default=None, metavar="VERSIONS",
                     help="run under each of these JAX releases, e.g. 0.11.2,0.12.0.1, into DIR/jax-VERSION, "
                          "and say what changed between them (DIR/versions.json)")
    cmd.add_argument("--jax-env", action="append", default=[], metavar="VERSION=PATH",
                     help="the Python (or venv folder) of a JAX release (repeatable; default: this interpreter "
                          "if its jax is that release, else .venvs/jax-VERSION, else one made in the user's cache)")


def _profile_help() -> str:
    """--profile's help, from the table of profiles."""
    from pallas_verify.choices import PROFILES

    return "Hypothesis profile: " + ", ".join(PROFILES)


def _executor_options(cmd: argparse.ArgumentParser, workers_default: str) -> None:
    """--executor, --ray-address, --workers: where the units of work run (choices from the table)."""
    from pallas_verify.execution import EXECUTORS

    cmd.add_argument("--executor", default="local", choices=list(EXECUTORS),
                     help="; ".join(f"{k}: {v}" for k, v in EXECUTORS.items()) + " (default local)")
    cmd.add_argument("--ray-address", default=None, metavar="ADDRESS",
                     help="the Ray cluster to join, e.g. HOST:6379 (default: start a private local one)")
    cmd.add_argument("--workers", type=_count, default=None, metavar="N",
                     help=f"units at once (default: {workers_default} locally, the cluster's CPU count on ray)")


def _fuzz_parser(sub: argparse._SubParsersAction) -> None:
    from pallas_verify.execution.placement import HARDWARE_POLICIES

    fuzz = sub.add_parser("fuzz", help="spend a time budget searching many kernels x backends (nightly)")
    fuzz.add_argument("targets", nargs="*", metavar="TARGET",
                      help="spec files or modules (default: every kernel registered under the entry-point group pallas_verify.kernels)")
    fuzz.add_argument("--kernels", default="*", metavar="PATTERN", help="fnmatch pattern over spec names")
    fuzz.add_argument("--backends", default=None, help="comma-separated backend names (default: all available)")
    fuzz.add_argument("--budget", default="30m", help="wall-time budget, e.g. 90s, 30m, 1h30m (default 30m)")
    fuzz.add_argument("--out", default="pv-fuzz", metavar="DIR",
                      help="reports, reproducers and the failure database (DIR/db) go here")
    _executor_options(fuzz, workers_default="the CPU count")
    fuzz.add_argument("--db", default=None, metavar="PATH|redis://HOST:PORT/N",
                      help="Hypothesis example database shared by every worker (default: DIR/hypothesis)")
    fuzz.add_argument("--hardware", default="auto", choices=list(HARDWARE_POLICIES),
                      help="; ".join(f"{k}: {v}" for k, v in HARDWARE_POLICIES.items()))
    fuzz.add_argument("--seed", type=int, default=None)
    fuzz.add_argument("--slice-examples", type=_count, default=5, metavar="N", help="examples per slice (default 5)")
    fuzz.add_argument("--max-slices", type=_count, default=None, metavar="N",
                      help="stop after N slices (the budget still caps the run); with --seed, the same slices")
    fuzz.add_argument("--timeout", type=_limit, default=120.0, metavar="SECONDS",
                      help="per-case time limit (default 120)")
    _shrink_budget(fuzz)
    _compile_cache(fuzz)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backends", default=None, help="comma-separated backend names (default: all)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default="pv-out", metavar="DIR", help="reproducers and reports go here")
    parser.add_argument("--timeout", type=_limit, default=120.0, metavar="SECONDS", help="per-case time limit")
    _shrink_budget(parser)


def _compile_cache(parser: argparse.ArgumentParser) -> None:
    """--no-compile-cache: the run neither reads nor writes JAX's persistent compilation cache."""
    from pallas_verify._env import COMPILE_CACHE_ENV

    parser.add_argument("--no-compile-cache", action="store_true",
                        help="compile everything anew and keep nothing (by default the interpreters' and the "
                             "references' compiles are kept in the user's cache folder, ~/.cache/pallas-verify, and "
                             f"read back by later runs; {COMPILE_CACHE_ENV}=off does the same as this flag, "
                             f"{COMPILE_CACHE_ENV}=DIR keeps them in DIR)")


def _shrink_budget(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shrink-budget", type=_seconds, default=60.0, metavar="SECONDS",
                        help="time spent shrinking a failure to its minimal example, per backend (default 60)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0; write e.g. 30 or 0.5")
    return value


def _limit(text: str) -> float:
    """A time limit: a finite number of seconds above zero."""
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time limit: give more than 0 seconds, e.g. 120")
    return value


def _count(text: str) -> int:
    """A count: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: give a whole number of at least 1, e.g. 4")
    return value
