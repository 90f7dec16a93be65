"""The report: everything a run found and covered. JSON is the source of truth."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pallas_verify.findings import KERNEL_ROWS, Finding, row_of

if TYPE_CHECKING:
    from pallas_verify.spec import KernelSpec

__all__ = ["BackendResult", "Report", "cell_key", "finding_dict", "finding_from_dict", "join_reasons", "jsonable",
           "kernel_entry", "kernel_rows", "running_jax_version", "unrun_results", "unsanitized", "write_atomic"]

Status = Literal["pass", "fail", "unsupported", "skipped", "interrupted", "not_reached", "error"]
_LIST_SEPARATOR = ", "  # reason and node hold their lists as text, in JSON too


def join_reasons(reasons: Iterable[str]) -> str:
    """Reasons (or node names) as the text of a ``BackendResult`` field: sorted, unique."""
    return _LIST_SEPARATOR.join(sorted(set(filter(None, reasons))))


@dataclasses.dataclass(frozen=True, kw_only=True)
class BackendResult:
    """One cell of the kernel x backend matrix.

    Attributes:
      kernel, backend: the cell's coordinates.
      status: pass, fail (with findings), unsupported (declared by the spec, with the
        reason), skipped (backend not available here or not for this platform),
        interrupted (a signal stopped the run before this cell's search finished) or
        not_reached (a campaign did not get to run it: its budget ran out, or its units
        were lost to the infrastructure; the reason says which) or error (pallas-verify's
        own code failed on it, ``attribution.internal_error``: not judged, never the
        kernel's fault).
      reason: why unsupported or skipped; the kinds of its findings for fail (a list,
        see ``reasons``).
      examples: examples Hypothesis generated and ran on this backend.
      shrink_steps: candidates run while shrinking a failure to its minimal example.
      seconds: wall time of the kernel's search.
      transform: None for the bare kernel, else the transform.
      node: where it ran (campaigns: the executor's node names, comma-separated).
      note: how the search ended when not by its budget (e.g. "stopped early: all 3
        examples run failed with the same signature ..."), else "".
      grid_coverage: for TPU interpret mode, the grid orders and core assignments its runs
        exercised (``backends.schedule.Coverage.figure``); None elsewhere.
      compiler_params: for a ``mosaic_tpu`` compile backend, what the compiler-param
        overrides it drew did (``backends.mosaic_params.ParamsCoverage.figure``); None
        elsewhere.
    """

    kernel: str
    backend: str
    status: Status
    reason: str = ""
    examples: int = 0
    seconds: float = 0.0
    transform: str | None = None
    node: str = ""
    shrink_steps: int = 0
    note: str = ""
    grid_coverage: dict[str, Any] | None = None
    compiler_params: dict[str, Any] | None = None

    @property
    def effort(self) -> str:
        """``"5 examples + 12 shrink steps, 3.1 s"``: what the search spent."""
        shrink = f" + {self.shrink_steps} shrink steps" if self.shrink_steps else ""
        note = f"; {self.note}" if self.note else ""
        return f"{self.examples} examples{shrink}, {self.seconds:.1f} s{note}"

    @property
    def searched(self) -> str:
        """``effort`` where a search ran and judged this cell, else "" (a row that is no
        backend's, ``findings.KERNEL_ROWS``, or a cell that did not run)."""
        ran = self.status in ("pass", "fail", "interrupted") and self.backend not in KERNEL_ROWS
        return self.effort if ran else ""

    @property
    def reasons(self) -> tuple[str, ...]:
        """The reasons ``reason`` lists (a failed cell: the kinds of its findings)."""
        return tuple(r for r in self.reason.split(_LIST_SEPARATOR) if r)

    @property
    def nodes(self) -> tuple[str, ...]:
        """The executor nodes ``node`` lists."""
        return tuple(n for n in self.node.split(_LIST_SEPARATOR) if n)

    def failing(self, reasons: Iterable[str]) -> BackendResult:
        """This cell failed, for ``reasons`` too."""
        return dataclasses.replace(self, status="fail", reason=join_reasons([*self.reasons, *reasons]))

    def combined(self, other: BackendResult) -> BackendResult:
        """Two runs of this cell as one: failed if either failed, else passed if either
        passed (else ``other``'s status), reasons and nodes united, examples, shrink steps
        and seconds summed (``other``'s transform and kernel kept)."""
        statuses = (self.status, other.status)
        return dataclasses.replace(
            other, status="fail" if "fail" in statuses else "pass" if "pass" in statuses else other.status,
            reason=join_reasons([*self.reasons, *other.reasons]), node=join_reasons([*self.nodes, *other.nodes]),
            examples=self.examples + other.examples, shrink_steps=self.shrink_steps + other.shrink_steps,
            seconds=self.seconds + other.seconds)


@dataclasses.dataclass(kw_only=True)
class Report:
    """Findings and coverage of one run (one or more kernels).

    ``invalid`` lists the specs that could not be searched: ``{"kernel": name, "reason": why}``,
    or ``{"target": file, "reason": why}`` for a spec file that could not be imported.
    ``run`` is a campaign's account of itself (units, retries, lost units, notes); see
    docs/report-json.md. ``jax_version`` is the JAX release the run ran on: None (the
    default) writes this process's (``running_jax_version``); a report read back keeps its
    own. ``jax_gaps`` says what that release lacks and what is therefore not checked
    (``_jax_compat.version_gaps``), once per run.
    """

    kernels: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    backends: list[str] = dataclasses.field(default_factory=list)
    findings: list[Finding] = dataclasses.field(default_factory=list)
    results: list[BackendResult] = dataclasses.field(default_factory=list)
    seed: int | None = None
    profile: str = "dev"
    seconds: float = 0.0
    interrupted: bool = False
    executor: str | None = None
    invalid: list[dict[str, str]] = dataclasses.field(default_factory=list)
    run: dict[str, Any] = dataclasses.field(default_factory=dict)
    jax_version: str | None = None
    jax_gaps: list[str] = dataclasses.field(default_factory=list)

    def merge(self, other: Report) -> None:
        """Fold another report (e.g. one kernel's) into this one: a kernel both hold is one
        entry, with the notes, skips and upstream limitations of both."""
        for kernel in other.kernels:
            mine = next((k for k in self.kernels if k["name"] == kernel["name"]), None)
            if mine is None:
                self.kernels.append(dict(kernel))
                continue
            for key, value in kernel.items():
                if isinstance(value, list) and key not in ("features", "platforms"):
                    mine[key] = [*mine.get(key, []), *(v for v in value if v not in mine.get(key, []))]
        self.backends.extend(b for b in other.backends if b not in self.backends)
        self.findings.extend(other.findings)
        self.results.extend(other.results)
        self.invalid.extend(other.invalid)
        self.jax_gaps.extend(g for g in other.jax_gaps if g not in self.jax_gaps)
        self.seconds += other.seconds
        if other.run.get("kept"):  # the kept passes among its cells (pallas_verify.passes)
            self.run["kept"] = [*self.run.get("kept", []), *other.run["kept"]]

    def to_dict(self) -> dict[str, Any]:
        kernels = []
        for kernel in self.kernels:
            cells = [r for r in self.results if r.kernel == kernel["name"]]
            kernels.append({**kernel, "results": {cell_key(r): _result_dict(r) for r in cells},
                            "unsanitized": unsanitized(kernel, cells, self.backends)})
        return {
            "version": 1,
            "jax_version": self.jax_version if self.jax_version is not None else running_jax_version(),
            "jax_gaps": list(self.jax_gaps),
            "seed": self.seed,
            "profile": self.profile,
            "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
            "executor": self.executor,
            "kernels": kernels,
            "backends": list(self.backends),
            "findings": [finding_dict(f) for f in self.findings],
            "invalid_specs": [dict(i) for i in self.invalid],
            "run": jsonable(self.run),
        }

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        return write_atomic(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        findings = [finding_from_dict(f) for f in data["findings"]]
        results = []
        for kernel in data["kernels"]:
            for cell in kernel.get("results", {}).values():
                results.append(BackendResult(kernel=kernel["name"], **cell))
        kernels = [{k: v for k, v in kernel.items() if k not in ("results", "unsanitized")}  # derived: written anew
                   for kernel in data["kernels"]]
        return cls(kernels=kernels, backends=list(data["backends"]), findings=findings, results=results,
                   seed=data.get("seed"), profile=data.get("profile", "dev"), seconds=data.get("seconds", 0.0),
                   interrupted=data.get("interrupted", False), executor=data.get("executor"),
                   invalid=list(data.get("invalid_specs", [])), run=dict(data.get("run", {})),
                   jax_version=data.get("jax_version"), jax_gaps=list(data.get("jax_gaps", [])))


def running_jax_version() -> str | None:
    """The JAX release this process runs: ``jax.__version__`` once jax is imported, else the
    installed distribution's version (read from its metadata: jax is not imported for it);
    None when jax is not installed."""
    jax = sys.modules.get("jax")
    version = getattr(jax, "__version__", None)
    return version if isinstance(version, str) else _installed_jax()


@functools.cache
def _installed_jax() -> str | None:
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


_FINDING_FIELDS = {f.name for f in dataclasses.fields(Finding)}


def kernel_entry(spec: KernelSpec) -> dict[str, Any]:
    """A kernel's entry in ``Report.kernels``: its name, feature tags and platforms."""
    return {"name": spec.name, "features": list(spec.features), "platforms": list(spec.platforms)}


def cell_key(result: BackendResult) -> str:
    """The column a result stands in: ``backend``, or ``backend+transform``."""
    return result.backend if result.transform is None else f"{result.backend}+{result.transform}"


def _result_dict(result: BackendResult) -> dict[str, Any]:
    data = dataclasses.asdict(result)
    del data["kernel"]
    data["seconds"] = round(result.seconds, 3)
    return data


def finding_dict(finding: Finding) -> dict[str, Any]:
    data = {f.name: getattr(finding, f.name) for f in dataclasses.fields(finding)}
    data["elapsed_s"] = round(finding.elapsed_s, 3)
    return jsonable(data)


def unrun_results(spec: KernelSpec, backend: str, status: Status, reason: str) -> list[BackendResult]:
    """The cells of a kernel that does not run on ``backend`` (the bare kernel and each of its
    transforms), each with ``status`` (skipped or unsupported) and ``reason``."""
    return [BackendResult(kernel=spec.name, backend=backend, status=status, reason=reason, transform=t)
            for t in (None, *spec.transforms)]


def kernel_rows(kernel: str, findings: Iterable[Finding]) -> list[BackendResult]:
    """The failed rows of ``kernel`` that are no backend's (``findings.KERNEL_ROWS``): the
    static check's, and the divergence between backends, each with its findings' kinds."""
    kinds: dict[str, list[str]] = {}
    for f in findings:
        if f.kernel == kernel and row_of(f) in KERNEL_ROWS and f.kind not in kinds.get(row_of(f), []):
            kinds.setdefault(row_of(f), []).append(f.kind)
    return [BackendResult(kernel=kernel, backend=row, status="fail", reason=join_reasons(kinds[row]))
            for row in KERNEL_ROWS if row in kinds]


def unsanitized(kernel: Mapping[str, Any], results: Iterable[BackendResult], asked: Iterable[str] = ()) -> list[str]:
    """A PASS says how it was judged: for a kernel with a passing cell, one line per
    platform of its whose sanitizing interpreter (``families.SANITIZERS``: its runs check
    races, out-of-bounds accesses and uninitialized reads) judged none of its cells,
    where that interpreter was ``asked`` for (and was n/a, skipped, ...), or where no
    sanitizer judged the kernel at all."""
    from pallas_verify.backends.families import SANITIZERS

    cells = [r for r in results if r.kernel == kernel["name"]]
    if not any(r.status == "pass" for r in cells):
        return []
    judged = {r.backend for r in cells if r.status in ("pass", "fail")}
    sanitizers = {p: SANITIZERS[p] for p in kernel.get("platforms") or () if p in SANITIZERS}
    none_judged = not judged & set(sanitizers.values())
    lines = []
    for platform, sanitizer in sanitizers.items():
        if sanitizer in judged or not (none_judged or sanitizer in asked):
            continue
        why = next((f"{r.status}: {r.reason}" for r in cells if r.backend == sanitizer and r.transform is None),
                   "not among the backends run")
        lines.append(f"{platform}: {sanitizer} did not judge it ({why[:200]}): no race, out-of-bounds or "
                     "uninitialized-read check ran; its PASS cells checked outputs only")
    return lines


def finding_from_dict(data: Mapping[str, Any]) -> Finding:
    """The Finding a ``finding_dict`` describes (keys a Finding does not have are ignored)."""
    return Finding(**{k: v for k, v in data.items() if k in _FINDING_FIELDS})


def jsonable(value: Any) -> Any:
    """``value`` with tuples as lists, numpy scalars as numbers, anything else as repr."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"array(shape={value.shape}, dtype={value.dtype})"
    return repr(value)


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
