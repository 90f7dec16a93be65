"""What one staged fault left behind, and how the ``faults`` section checks it.

``Outcome`` holds a fault's exit status, report and stderr and says which checks it
passed (``faults`` lists them); ``Watch`` is a campaign's progress stream, whose finding
lines say what was printed before the fault; ``SPECS`` are the three tiny specs a fault's
campaign runs (``HANG_SPEC`` where the fault is a hang) and ``fuzz_here`` runs one in
this process. The faults themselves live in ``faultcases``, the section in ``faults``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ALLOWED", "EXPECTED", "HANG_SPEC", "SPECS", "Outcome", "Watch", "fuzz_here", "in_thread", "read_report"]

_MUTANTS = "reference_kernels.mutants.grid:"
#: The three tiny specs: a correct one, a planted mismatch, a race.
SPECS = (_MUTANTS + "block_copy_spec", _MUTANTS + "rotated_index_map_spec", _MUTANTS + "acc_across_parallel_spec")
#: What a clean run of them finds, as (kind, kernel).
EXPECTED = frozenset({("mismatch", "rotated_index_map"), ("race", "acc_across_parallel")})
#: Findings that are true of these specs (a slice may also report the race's static kind).
ALLOWED = EXPECTED | {("mismatch", "acc_across_parallel")}
HANG_SPEC = str(Path(__file__).resolve().parents[1] / "tests" / "faults" / "hang_spec.py") + "::HANGS"


@dataclasses.dataclass
class Outcome:
    """What one fault left behind.

    Attributes:
      fault: its name. refusal: the command had to refuse before any work.
      exit: the command's exit status. seconds: wall time the fault cost.
      report: report.json as read after the run (None: none there).
      final: for a run whose last write failed, the report the run returned.
      stderr: what the command printed on stderr.
      printed: findings printed before the fault, as (kind, kernel).
      expected, allowed: (kind, kernel) it must find, and may find.
      orphans: pids of processes it left running.
      extra: fault-specific checks (name -> passed).
    """

    fault: str
    exit: int | None
    seconds: float
    report: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    stderr: str = ""
    printed: frozenset[tuple[str, str]] = frozenset()
    expected: frozenset[tuple[str, str]] = EXPECTED
    allowed: frozenset[tuple[str, str]] = ALLOWED
    orphans: list[int] = dataclasses.field(default_factory=list)
    refusal: bool = False
    extra: dict[str, bool] = dataclasses.field(default_factory=dict)

    def found(self) -> set[tuple[str, str]]:
        data = self.final or self.report or {"findings": []}
        return {(f["kind"], f["kernel"]) for f in data["findings"]}

    def checks(self) -> dict[str, bool]:
        no_trace = "Traceback" not in self.stderr
        if self.refusal:
            lines = [line for line in self.stderr.splitlines() if line.strip()]
            one = bool(lines) and lines[-1].startswith(("pallas-verify: error:", "pallas-verify fuzz: error:",
                                                        "usage:", "pallas-verify conformance: error:"))
            return {"refused_with_exit_2": self.exit == 2 and one and no_trace, "no_orphan": not self.orphans,
                    **self.extra}
        return {"report_written": self.report is not None and no_trace,
                "no_false_finding": self.found() <= self.allowed,
                "no_finding_lost": (self.expected | self.printed) <= self.found(),
                "no_orphan": not self.orphans, **self.extra}

    def survived(self) -> bool:
        return all(self.checks().values())

    def describe(self) -> str:
        """What failed, with the evidence (for a test's assertion message)."""
        failed = [k for k, ok in self.checks().items() if not ok]
        run = (self.report or {}).get("run")
        return (f"{self.fault}: failed {failed}; exit {self.exit}; found {sorted(self.found())}; "
                f"orphans {self.orphans}; run section {run}\nstderr tail:\n{self.stderr[-3000:]}")


class Watch(io.StringIO):
    """A campaign's progress stream: its lines, and a callback at each one."""

    def __init__(self, on_line: Callable[[str], Any] | None = None) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.on_line = on_line

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                self.lines.append(line)
                if self.on_line is not None:
                    self.on_line(line)
        return super().write(text)

    def findings(self) -> frozenset[tuple[str, str]]:
        """(kind, kernel) of every finding line printed: ``[kind] kernel on backend ...``."""
        out = set()
        for line in self.lines:
            if line.startswith("[") and "] " in line and " on " in line:
                kind, rest = line[1:].split("] ", 1)
                out.add((kind, rest.split(" on ", 1)[0]))
        return frozenset(out)


def read_report(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        return None


def fuzz_here(out: Path, *, targets: tuple[str, ...] = SPECS, stream: Watch | None = None, **options: Any) -> Any:
    """``fuzz`` in this process on ``targets`` (interpret only, 2 examples a slice)."""
    from pallas_verify.campaigns.fuzz import FuzzOptions, fuzz

    settings: dict[str, Any] = {"backends": ("interpret",), "seed": 1, "slice_examples": 2, "workers": 2,
                                "budget_s": 300.0, "max_slices": 6, **options}
    return fuzz(FuzzOptions(targets=targets, out_dir=out, **settings), stream=stream or Watch())


def in_thread(body: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread
