"""Whose code raised: the frames of an error's traceback, read as JAX's, the kernel's or
neither (JAX 0.12's module layout).

An error's traceback text (``ErrorInfo.traceback``, which for an interpreter callback
failure embeds the callback's own traceback) is split into the frames of the exception
raised last, innermost last. ``upstream_frame`` walks them outward from the raising
frame: when only JAX's frames (and the standard library's or numpy's, which are nobody's)
stand between the raise and Pallas's own machinery that runs a kernel (``pallas_call``'s
lowering, the HLO interpreter, TPU and GPU interpret mode), the error is JAX's and that
innermost JAX frame is returned. A frame of any other code on the way (the kernel's body,
its index maps, its reference, pallas-verify) makes it no upstream error.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sysconfig
from pathlib import Path

__all__ = ["Frame", "operation_site", "raising_frames", "tool_frame", "upstream_frame"]

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+?)\s*$')
_TRACEBACK = "Traceback (most recent call last):"
# The block jax prints before a lowering error: where the operation came from in the
# user's code ("The preceding stack trace is the source of the JAX operation ...").
_BEFORE = "JaxStackTraceBeforeTransformation"

# Modules of JAX's Pallas that run a kernel: the pallas_call primitive's lowering, the
# interpreters and the compilers' lowerings. A raise reached from one of them through
# JAX's code only is JAX's failure to run the kernel.
_MACHINERY = (
    "jax/_src/pallas/pallas_call.py",
    "jax/_src/pallas/hlo_interpreter.py",
    "jax/_src/pallas/mpmd.py",
    "jax/_src/pallas/mosaic/interpret/",
    "jax/_src/pallas/mosaic_gpu/interpret/",
    "jax/_src/pallas/mosaic/lowering.py",
    "jax/_src/pallas/mosaic/pallas_call_registration.py",
    "jax/_src/pallas/mosaic_gpu/lowering.py",
    "jax/_src/pallas/mosaic_gpu/pallas_call_registration.py",
    "jax/_src/pallas/triton/lowering.py",
    "jax/_src/pallas/triton/pallas_call_registration.py",
)
_JAX_PACKAGES = ("jax", "jaxlib", "jax_plugins")
_NOBODYS_PACKAGES = ("numpy", "ml_dtypes", "opt_einsum")


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame of a traceback: the file, the line and the function."""

    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{_short_path(self.path)}:{self.line} in {self.function}"


def raising_frames(traceback: str) -> list[Frame]:
    """The frames of the exception raised last in ``traceback``'s text, innermost last
    (for an interpreter callback failure: the callback's own frames)."""
    blocks = traceback.split(_TRACEBACK)
    last = blocks[-1] if len(blocks) > 1 else ""
    return [Frame(m["path"], int(m["line"]), m["function"]) for m in map(_FRAME.match, last.splitlines()) if m]


def upstream_frame(traceback: str) -> Frame | None:
    """The innermost JAX frame of the raise when JAX's code alone leads from Pallas's
    machinery to it (see the module docstring); None when other code is on the way or no
    such machinery is."""
    raising = None
    for frame in reversed(raising_frames(traceback)):
        owner = _owner(frame.path)
        if owner == "nobody":
            continue
        if owner != "jax":
            return None
        raising = raising or frame
        if any(part in _posix(frame.path) for part in _MACHINERY):
            return raising
    return None


def tool_frame(traceback: str) -> Frame | None:
    """The frame of pallas-verify's own code that raised, when the tool itself failed
    rather than the kernel or JAX running it: the raise is in the tool's code, or in JAX's
    code that the tool's own reading of JAX internals (this package) called, with no
    kernel code and no Pallas machinery on the way. None otherwise."""
    through_jax = False
    for frame in reversed(raising_frames(traceback)):
        owner = _owner(frame.path)
        if owner == "nobody" or (through_jax and _posix(frame.path).endswith(_DELEGATES)):
            continue
        if owner == "jax":
            if any(part in _posix(frame.path) for part in _MACHINERY):
                return None
            through_jax = True
            continue
        if not _is_tool(frame.path):
            return None
        return frame if not through_jax or "/_jax_compat/" in _posix(frame.path) else None
    return None


# The tool's wrappers of JAX's own rules, which hand them their arguments unchanged: what
# JAX's rule raises through them is JAX's (or the kernel's); what they raise is the tool's.
_DELEGATES = ("/_jax_compat/bounds.py",)


def _is_tool(path: str) -> bool:
    return _posix(path).startswith(_tool_root())


@functools.cache
def _tool_root() -> str:
    """The directory of the pallas_verify package, with a trailing slash."""
    return _posix(str(Path(__file__).resolve().parent.parent)) + "/"


def operation_site(traceback: str) -> Frame | None:
    """Where the failing operation was written, as jax records it for a lowering error
    (the last frame before "JaxStackTraceBeforeTransformation" that is not JAX's), if any."""
    head = traceback.split(_BEFORE)[0].split(_TRACEBACK)[-1] if _BEFORE in traceback else ""
    frames = [Frame(m["path"], int(m["line"]), m["function"]) for m in map(_FRAME.match, head.splitlines()) if m]
    return next((f for f in reversed(frames) if _owner(f.path) == "other"), None)


def _posix(path: str) -> str:
    return path.replace("\\", "/")


def _owner(path: str) -> str:
    """``"jax"``, ``"nobody"`` (the standard library, numpy, frozen modules) or ``"other"``."""
    path = _posix(path)
    if path.startswith("<frozen"):
        return "nobody"
    package = _site_package(path)
    if package in _JAX_PACKAGES:
        return "jax"
    if package in _NOBODYS_PACKAGES or any(path.startswith(d) for d in _stdlib_dirs()):
        return "nobody"
    return "other"


def _site_package(path: str) -> str | None:
    """The top-level package of a file inside an installed package's directory."""
    for root in _package_roots():
        if path.startswith(root):
            return path[len(root):].split("/", 1)[0]
    match = re.search(r"/(?:site|dist)-packages/([^/]+)/", path)
    return match.group(1) if match else None


@functools.cache
def _package_roots() -> tuple[str, ...]:
    """Directories holding the installed jax and numpy packages (their parents)."""
    import jax
    import numpy

    return tuple(sorted({_posix(str(Path(m.__file__).resolve().parent.parent)) + "/" for m in (jax, numpy)}))


@functools.cache
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(sorted({_posix(paths[k]).rstrip("/") + "/" for k in ("stdlib", "platstdlib") if k in paths}))


def _short_path(path: str) -> str:
    """``jax/_src/...`` for a file of an installed package, else the path as given."""
    path = _posix(path)
    match = re.search(r"/(?:site|dist)-packages/(.+)$", path)
    return match.group(1) if match else path
