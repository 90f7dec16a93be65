"""The ``pallas-verify`` command: verify, backends (and the nightly and conformance jobs)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pallas_verify._env import configure

__all__ = ["main"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pallas-verify", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="search one spec (or every spec of a file) for findings")
    verify.add_argument("target", help="FILE.py::NAME, MODULE:NAME, or FILE.py / MODULE for all its specs")
    _common(verify)
    verify.add_argument("--max-examples", type=int, default=None, metavar="N")
    verify.add_argument("--profile", default="dev", help="Hypothesis profile: dev, ci or nightly")
    verify.add_argument("--json", default=None, metavar="PATH", help="write the JSON report here")
    sub.add_parser("backends", help="list every backend and whether it is available here")
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backends", default=None, help="comma-separated backend names (default: all)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default="pv-out", metavar="DIR", help="reproducers and reports go here")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per-case time limit")


def main(argv: Sequence[str] | None = None) -> int:
    configure()
    args = _parser().parse_args(argv)
    from pallas_verify.errors import PallasVerifyError

    try:
        return _COMMANDS[args.command](args)
    except PallasVerifyError as exc:
        print(f"pallas-verify: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _cmd_backends(args: argparse.Namespace) -> int:
    from pallas_verify.backends import registry

    for backend in registry.all_backends().values():
        reason = backend.available()
        what = "executes" if backend.executes else "compiles only"
        state = f"available ({what})" if reason is None else f"not available: {reason}"
        print(f"{backend.name:<22} {state}")
    return EXIT_CLEAN


def _cmd_verify(args: argparse.Namespace) -> int:
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_specs
    from pallas_verify.report import Report
    from pallas_verify.summary import print_summary

    report = Report(seed=args.seed, profile=args.profile)
    for spec in load_specs(args.target):
        report.merge(verify(spec, args.backends, args.max_examples, args.seed, profile=args.profile,
                            out_dir=args.out, timeout_s=args.timeout))
    print_summary(report)
    if args.json:
        report.write_json(args.json)
    return EXIT_FINDINGS if report.findings else EXIT_CLEAN


_COMMANDS = {"verify": _cmd_verify, "backends": _cmd_backends}

if __name__ == "__main__":
    raise SystemExit(main())
