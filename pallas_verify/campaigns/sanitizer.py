"""Sanitizer conformance: planted-bug kernels as rows of the conformance matrix, each with
its expected verdict per backend.

A correct kernel passes where nothing is found. A planted-bug kernel (a catalog mutant)
passes where the backend reports what it must: at least one of the finding kinds its
verdict names for that backend (others beside it are recorded), and nothing at all on a
backend its verdicts do not name. A backend that no longer reports the
expected finding (its sanitizer went blind: an interpreter that starts outputs at zero
instead of its poison value hides a read of an output before it is written) or that
reports one where it should not is a conformance failure, with a reproducer: the
unexpected finding's own, or for a missing one a script that runs the same search again
and exits 1 while the finding is still missing.

``judge`` rewrites the planted rows of a finished conformance report: their expected
findings leave ``report.findings`` (they are the row passing, not a bug of the backend)
and go to the kernel's entry (``planted``: the verdicts, what was found, and the
findings); their cells pass or fail by the verdict.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pallas_verify.errors import InvalidArgument
from pallas_verify.exits import EXIT_CANNOT_RUN, EXIT_FIXED, EXIT_REPRODUCES
from pallas_verify.findings import Finding
from pallas_verify.reports.report import Report, finding_dict
from pallas_verify.spec import KernelSpec

__all__ = ["Planted", "judge", "planted_rows", "recheck"]

#: The pseudo-backend of the static grid check (findings before any run).
STATIC = "static"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Planted:
    """A planted-bug kernel and its expected verdicts.

    Attributes:
      spec: the buggy kernel.
      verdicts: per backend, the finding kinds of which it must report at least one; a
        backend not named must report nothing. ``static`` names what the static grid
        check must find (its verdict joins every cell's); not named, whatever it finds must
        be one of ``expects``.
      expects: every kind the bug may show as (the mutant's ``expects``).
    """

    spec: KernelSpec
    verdicts: Mapping[str, tuple[str, ...]]
    expects: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.spec.name


def planted_rows(pattern: str = "*") -> list[Planted]:
    """The registered planted-bug kernels (``registered.PLANTED_GROUP``: this project's
    catalog registers its mutants) that carry verdicts, whose names match ``pattern``
    (fnmatch, ``a,b`` for several; "" for none). An entry point that cannot be loaded is a
    usage error naming it."""
    from pallas_verify.registered import registered_planted

    patterns = [p for p in pattern.split(",") if p]
    if not patterns:
        return []
    invalid: list[dict[str, str]] = []
    found = registered_planted(invalid)
    if invalid:
        raise InvalidArgument(f"{invalid[0]['target']}: {invalid[0]['reason']}")
    return [Planted(spec=m.spec, verdicts=dict(m.verdicts), expects=tuple(m.expects)) for m in found
            if getattr(m, "verdicts", None) and any(fnmatch.fnmatchcase(m.spec.name, p) for p in patterns)]


def judge(report: Report, rows: Sequence[Planted], *, out_dir: Path, seed: int | None, max_examples: int,
          profile: str) -> None:
    """Judge the planted rows of ``report`` in place (see the module docstring)."""
    for row in rows:
        entry = next((k for k in report.kernels if k["name"] == row.name), None)
        if entry is None:
            continue
        mine = [f for f in report.findings if f.kernel == row.name]
        expected, unexpected = _split(row, mine)
        report.findings = [f for f in report.findings if f.kernel != row.name or f in unexpected]
        verdicts: dict[str, Any] = {}
        cells = [r for r in report.results if r.kernel == row.name]
        ran = sorted({r.backend for r in cells if r.status in ("pass", "fail")})
        for backend in ([STATIC] if STATIC in row.verdicts and ran else []) + ran:
            verdicts[backend] = _verdict(row, backend, mine, out_dir, seed, max_examples, profile)
        static = verdicts.get(STATIC)
        report.results = [_cell(r, verdicts.get(r.backend), static) if r.kernel == row.name else r
                          for r in report.results]
        entry["planted"] = {"verdicts": {b: list(k) for b, k in row.verdicts.items()}, "judged": verdicts,
                            "expected_findings": [finding_dict(f) for f in expected]}


def _split(row: Planted, findings: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """The row's findings: on a backend its verdicts name (or the static check's, of a kind
    the bug may show as), expected; elsewhere, unexpected (they stay findings)."""
    expected, unexpected = [], []
    for finding in findings:
        named = finding.backend in row.verdicts or (finding.backend == STATIC and finding.kind in row.expects)
        (expected if named else unexpected).append(finding)
    return expected, unexpected


def _verdict(row: Planted, backend: str, findings: list[Finding], out_dir: Path, seed: int | None,
             max_examples: int, profile: str) -> dict[str, Any]:
    """One backend's verdict: pass, or fail with why and a reproducer."""
    want = tuple(row.verdicts.get(backend, ()))
    found = sorted({f.kind for f in findings if f.backend == backend})
    stray = [f for f in findings if f.backend == backend and not want
             and (backend != STATIC or f.kind not in row.expects)]
    if stray:
        return {"status": "fail", "expects": list(want), "found": found,
                "reason": f"unexpected {stray[0].kind} on {backend} (expects {_kinds(want)})",
                "reproducer": stray[0].reproducer}
    if want and not set(found) & set(want):
        script = write_recheck(row.spec, backend, want, out_dir, seed=seed, max_examples=max_examples,
                               profile=profile)
        return {"status": "fail", "expects": list(want), "found": found,
                "reason": f"expected {_kinds(want)} on {backend}, none reported", "reproducer": str(script)}
    return {"status": "pass", "expects": list(want), "found": found,
            "reason": f"planted bug found: {', '.join(found)}" if want else "clean, as expected"}


def _kinds(kinds: Sequence[str]) -> str:
    return " or ".join(kinds) if kinds else "nothing"


def _cell(cell: Any, verdict: dict[str, Any] | None, static: dict[str, Any] | None) -> Any:
    if verdict is None:
        return cell
    if static is not None and static["status"] == "fail":
        verdict = static
    return dataclasses.replace(cell, status=verdict["status"], reason=verdict["reason"])


_RECHECK = '''#!/usr/bin/env python
"""pallas-verify sanitizer conformance: {name} (a planted bug) must show as {kinds} on {backend}.

The conformance run reported none. Run this file with python: the same search again.
Exit status: 1 while the expected finding is still missing (the backend's sanitizer does
not see the bug), 0 once it is reported again, 3 when the search cannot run here.
"""
from pallas_verify._env import configure

configure()

from pallas_verify.campaigns.sanitizer import recheck  # noqa: E402

raise SystemExit(recheck({ref!r}, {backend!r}, {want!r}, seed={seed!r}, max_examples={max_examples!r},
                         profile={profile!r}))
'''


def write_recheck(spec: KernelSpec, backend: str, want: tuple[str, ...], out_dir: Path, *, seed: int | None,
                  max_examples: int, profile: str) -> Path:
    """The reproducer of a missing expected finding (see ``recheck``)."""
    from pallas_verify.loader import spec_ref

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"planted-missing-{spec.name}-{backend}.py"
    path.write_text(_RECHECK.format(name=spec.name, kinds=_kinds(want), backend=backend, ref=spec_ref(spec),
                                    want=want, seed=seed, max_examples=max_examples, profile=profile))
    return path


def recheck(ref: str, backend: str, want: Sequence[str], *, seed: int | None, max_examples: int,
            profile: str, isolate: str = "auto") -> int:
    """Search the planted kernel ``ref`` on ``backend`` again: EXIT_REPRODUCES (1) while none
    of ``want`` is reported, EXIT_FIXED (0) once one is, EXIT_CANNOT_RUN (3) if it cannot run.
    ``isolate``: ``verify``'s."""
    import tempfile

    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    try:
        spec = load_spec(ref)
        with tempfile.TemporaryDirectory(prefix="pv-recheck-") as out:  # the static check runs with any backend
            report = verify(spec, ["interpret" if backend == STATIC else backend], max_examples, seed,
                            profile=profile, out_dir=out, isolate=isolate)
    except Exception as exc:  # a recheck that cannot run says so: exit 3
        print(f"cannot run: {type(exc).__name__}: {exc}")
        return EXIT_CANNOT_RUN
    if any(r.status not in ("pass", "fail") for r in report.results):
        print("cannot run: " + "; ".join(f"{r.backend}: {r.status} ({r.reason})" for r in report.results))
        return EXIT_CANNOT_RUN
    found = sorted({f.kind for f in report.findings if f.backend == backend})
    print(f"{spec.name} on {backend}: found {', '.join(found) or 'nothing'} (expects {_kinds(want)})")
    return EXIT_FIXED if set(found) & set(want) else EXIT_REPRODUCES
