"""Passes kept between runs: the same seeded run of unchanged code is not searched again.

A seeded search (the ``ci`` profile, whose seed is 0, or an explicit seed) draws the same
examples on every run, so on the same code, JAX, options and machine it reaches the same
verdict. A run that passed cleanly (``keepable``: every cell passed, or was skipped or
declared unsupported, and nothing was written beside the report) is kept in the user's
cache folder with the files it read: every module file loaded by the command and by its
worker processes. A later run under the same key (``Key``: the target, the options and
seed, the environment variables JAX and pallas-verify read, the Python, the installed
distributions, the CPU and the accelerator device files) whose files are all unchanged
reuses that report and says so; a change to any of them and the run searches again. A
failure is never kept: it is searched anew on every run, with its reproducer.

A file is unchanged when its size, modification time and inode change time are those
recorded (an edit changes the change time even when the modification time is put back),
or, for the user's own files, when its content digest is the one recorded (a checkout
that rewrote it unchanged). Installed files (the standard library, site-packages) are
judged by their stat alone, and by the distribution listing of the key.

``PALLAS_VERIFY_PASS_CACHE`` places the folder: unset for ``passes`` under the user's
cache folder, a folder to keep them there, ``off`` for none (``--no-pass-cache``,
``--pv-no-pass-cache``). The folder is kept under 256 MiB, least recently used first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import glob
import hashlib
import json
import os
import platform
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pallas_verify._env import COMPILE_CACHE_ENV, cache_folder, user_cache_dir

if TYPE_CHECKING:
    from pallas_verify.reports.report import Report

__all__ = ["PASS_CACHE_ENV", "Kept", "Key", "disable", "keep", "keepable", "loaded_files", "passes_dir", "reuse"]

#: The variable that places the kept passes, or turns them off.
PASS_CACHE_ENV = "PALLAS_VERIFY_PASS_CACHE"
_FORMAT = 1
_LIMIT_BYTES = 256 * 2**20
# Environment variables that can change what a run computes or where it runs.
_ENV_PREFIXES = ("XLA_", "JAX_", "TPU_", "LIBTPU", "PJRT_", "CUDA_", "NVIDIA_", "TF_", "TRITON_", "MOSAIC_",
                 "PALLAS_VERIFY_", "HYPOTHESIS", "PYTHONPATH", "PYTHONHASHSEED")
# ... but not the ones that only say where caches live or how many runs share the host.
_ENV_IGNORED = frozenset({PASS_CACHE_ENV, COMPILE_CACHE_ENV})
_KEPT_STATUSES = frozenset({"pass", "skipped", "unsupported"})


def passes_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The kept passes' folder (``PASS_CACHE_ENV``), None when they are off."""
    return cache_folder(PASS_CACHE_ENV, user_cache_dir(environ) / "passes", environ)


def disable() -> None:
    """No pass is reused or kept by this process or the processes it starts from now on."""
    os.environ[PASS_CACHE_ENV] = "off"


@dataclasses.dataclass(frozen=True)
class Key:
    """What a run's verdict depends on, apart from the files it reads (kept with it)."""

    digest: str

    @classmethod
    def of(cls, kind: str, target: str, options: Mapping[str, Any]) -> Key:
        """The key of a ``kind`` run ("verify", "plugin") of ``target`` under ``options``."""
        parts = {"format": _FORMAT, "kind": kind, "target": target, "cwd": os.getcwd(), "options": dict(options),
                 "python": sys.version, "executable": sys.executable, "machine": platform.machine(),
                 "cpu": _cpu_model(), "devices": _device_files(), "installed": _installed(),
                 "env": sorted((k, v) for k, v in os.environ.items()
                               if k.startswith(_ENV_PREFIXES) and k not in _ENV_IGNORED)}
        text = json.dumps(parts, sort_keys=True, default=str)
        return cls(hashlib.sha256(text.encode()).hexdigest())


@dataclasses.dataclass(frozen=True)
class Kept:
    """A kept pass: its report (as ``Report.to_dict`` wrote it), when it ran and how long
    its search took."""

    report: dict[str, Any]
    at: str
    seconds: float

    def entry(self) -> dict[str, Any]:
        """What a report's ``run["kept"]`` lists for this pass (docs/report-json.md)."""
        report = self.report
        return {"kernels": [k["name"] for k in report.get("kernels", [])], "backends": list(report.get("backends", [])),
                "at": self.at, "searched_seconds": round(self.seconds, 3)}

    def as_report(self) -> Report:
        """The kept report, its ``run["kept"]`` saying that it is one."""
        from pallas_verify.reports.report import Report

        report = Report.from_dict(self.report)
        report.run = {**report.run, "kept": [self.entry()]}
        return report

    def note(self) -> str:
        return (f"a kept pass: the same seeded run passed at {self.at} on these very files, options and JAX "
                f"({self.seconds:.1f} s of search then); its verdict is reused and nothing was searched")


def reuse(key: Key | None) -> Kept | None:
    """The pass kept under ``key`` when every file it read is unchanged; else None."""
    root = passes_dir()
    if key is None or root is None:
        return None
    path = root / f"{key.digest}.json"
    try:
        entry = json.loads(path.read_text())
        if entry.get("format") != _FORMAT or not all(_unchanged(p, r) for p, r in entry["files"].items()):
            return None
        os.utime(path)  # recently used: trimmed last
        return Kept(report=entry["report"], at=entry["at"], seconds=float(entry["seconds"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def keepable(report: Report) -> bool:
    """Whether ``report`` is a clean pass whose whole output is the report itself."""
    return (not report.findings and not report.invalid and not report.interrupted and bool(report.results)
            and all(r.status in _KEPT_STATUSES for r in report.results)
            and not any(kernel.get("upstream") for kernel in report.kernels))


def keep(key: Key | None, report: Report, files: Iterable[str] | None) -> bool:
    """Keep ``report`` under ``key`` with the ``files`` its run read (None: not known, so
    nothing is kept) when it is ``keepable``; whether it was kept. Never raises: a cache
    that cannot be written costs the next run its reuse, nothing else."""
    root = passes_dir()
    if key is None or root is None or files is None or not keepable(report):
        return False
    try:
        entry = {"format": _FORMAT, "at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                 "seconds": report.seconds, "files": {p: _record(p) for p in sorted(set(files))},
                 "report": report.to_dict()}
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp")
    except (OSError, ValueError):
        return False
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(entry, out)
        os.replace(tmp, root / f"{key.digest}.json")
    except (OSError, ValueError):
        Path(tmp).unlink(missing_ok=True)  # a full disk leaves no half-written entry behind
        return False
    with contextlib.suppress(OSError):  # bounding the folder is for later runs: this one kept its pass
        _trim(root)
    return True


def files_read() -> list[str] | None:
    """The module files a run loaded, in this process and in its shared workers (``keep``'s
    ``files``); None when a worker did not say."""
    from pallas_verify.execution.isolation import shared_workers_files

    workers = shared_workers_files()
    return None if workers is None else loaded_files() + workers


def loaded_files(modules: Mapping[str, Any] | None = None) -> list[str]:
    """The files of the modules loaded in this process (``sys.modules``)."""
    found = []
    for module in list((sys.modules if modules is None else modules).values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isfile(path):
            found.append(os.path.abspath(path))
    return found


def _record(path: str) -> list[Any]:
    st = os.stat(path)
    digest = None if _installed_file(path) else _sha256(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, digest]


def _unchanged(path: str, recorded: list[Any]) -> bool:
    size, mtime, ctime, digest = recorded
    try:
        st = os.stat(path)
        if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) == (size, mtime, ctime):
            return True
        return digest is not None and st.st_size == size and _sha256(path) == digest
    except OSError:
        return False


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@functools.cache
def _install_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(roots))


def _installed_file(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real.startswith(root + os.sep) for root in _install_roots())


def _installed() -> list[str]:
    """The distributions installed where this Python imports from (their dist-info names
    carry their versions) and the path files of editable installs."""
    names = []
    for folder in dict.fromkeys(p for p in sys.path if p and os.path.isdir(p)):
        try:
            names += [f"{folder}/{n}" for n in os.listdir(folder) if n.endswith((".dist-info", ".egg-info", ".pth"))]
        except OSError:
            continue
    return sorted(names)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def _device_files() -> list[str]:
    """Accelerators attached here (a GPU or TPU that appears changes what runs)."""
    return sorted(p for pattern in ("/dev/nvidia*", "/dev/accel*", "/dev/vfio/*", "/dev/dri/render*")
                  for p in glob.glob(pattern))


def _trim(root: Path) -> None:
    entries = []
    for path in root.glob("*.json"):
        try:
            st = path.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= _LIMIT_BYTES:
            break
        path.unlink(missing_ok=True)
        total -= size
