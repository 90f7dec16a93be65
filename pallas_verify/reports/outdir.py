"""An output folder checked before any work: a run must not spend its budget, then fail to
write what it found."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pallas_verify.errors import InvalidArgument

__all__ = ["writable_dir"]


def writable_dir(path: str | Path, *, option: str = "--out") -> Path:
    """``path`` as a folder this process can write into (created when missing).

    Raises InvalidArgument, one line naming ``option`` and its value, when it is a file, a
    device, read-only, or cannot be created; a probe file is written and removed, so a
    full disk is caught too.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InvalidArgument(f"{option} {str(path)!r} is not a folder; give a folder to write the report into.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".pv-probe-") as probe:
            probe.write(b"x" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        raise InvalidArgument(f"{option} {str(path)!r} is not writable ({exc.strerror or exc}); "
                              "give a writable folder with free space.") from None
    return folder
