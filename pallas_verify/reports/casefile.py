"""A case's inputs on disk: an ``.npz`` that round-trips every dtype bit for bit.

``np.savez`` stores the ml_dtypes types (bfloat16, the float8 types, int4...) as opaque
``|V`` records that load back without their dtype. Here each array is stored as its own
dtype when numpy knows it (bool, integers, floats, complex), else as the raw bits in an
unsigned integer of the same width, and ``__dtypes__`` names every array's dtype, so
loading views the bits as the original dtype again: NaN payloads, signed zeros and
subnormals survive exactly.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from pallas_verify.errors import InvalidArgument

__all__ = ["CaseFileError", "load_case", "save_case"]

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class CaseFileError(InvalidArgument):
    """A case file cannot be read back as the arrays that were saved."""


def _dtype(name: str) -> np.dtype:
    """The dtype called ``name``: numpy's own, else ml_dtypes' (bfloat16, float8_*, int4...)."""
    extra = getattr(ml_dtypes, name, None)
    if extra is not None:
        return np.dtype(extra)
    return np.dtype(name)


def _native(dtype: np.dtype) -> bool:
    return dtype.kind in "biufc" and not hasattr(ml_dtypes, dtype.name)


def save_case(path: str | Path, inputs: Sequence[Any], config: Mapping[str, Any] | None = None) -> None:
    """Write ``inputs`` (and, when given, ``config`` pickled) to the ``.npz`` at ``path``."""
    arrays: dict[str, np.ndarray] = {}
    names = []
    for i, x in enumerate(inputs):
        x = np.ascontiguousarray(np.asarray(x))
        if x.dtype.hasobject:
            raise InvalidArgument(f"input {i} has dtype object; inputs must be numeric arrays to be saved.")
        names.append(_name(x.dtype))
        if _native(x.dtype):
            arrays[f"arg{i}"] = x
        elif x.dtype.itemsize in _BITS:
            arrays[f"arg{i}"] = x.view(_BITS[x.dtype.itemsize])
        else:
            raise InvalidArgument(f"input {i} has dtype {x.dtype} of {x.dtype.itemsize} bytes, which has no "
                                  "bit-exact encoding; use a numpy or ml_dtypes dtype.")
    arrays["__dtypes__"] = np.array(names, dtype=np.str_)
    if config is not None:
        arrays["__config__"] = np.frombuffer(pickle.dumps(dict(config)), dtype=np.uint8)
    np.savez(path, **arrays)


def _name(dtype: np.dtype) -> str:
    name = dtype.name
    if _dtype(name) != dtype:
        raise InvalidArgument(f"dtype {dtype!r} cannot be named so that it loads back exactly; "
                              "use a numpy or ml_dtypes dtype.")
    return name


def load_case(path: str | Path) -> tuple[tuple[np.ndarray, ...], dict[str, Any] | None]:
    """The inputs saved at ``path``, with their original dtypes, and the pickled config if any.

    Raises CaseFileError naming the file and what is wrong when it cannot be read exactly.
    """
    try:
        with np.load(path) as data:
            files = set(data.files)
            count = sum(k.startswith("arg") for k in files)
            raw = [data[f"arg{i}"] for i in range(count)]
            names = [str(n) for n in data["__dtypes__"]] if "__dtypes__" in files else None
            config = pickle.loads(data["__config__"].tobytes()) if "__config__" in files else None
    except (OSError, ValueError, KeyError, EOFError, pickle.UnpicklingError) as exc:
        raise CaseFileError(f"inputs file {str(path)!r} cannot be read: {type(exc).__name__}: {exc}") from None
    if names is None:  # written by a pallas-verify that did not record dtypes
        opaque = [i for i, x in enumerate(raw) if x.dtype.kind == "V"]
        if opaque:
            raise CaseFileError(f"inputs file {str(path)!r}: arg{opaque[0]} was saved as {raw[opaque[0]].dtype} "
                                "without its dtype (bfloat16, float8...), so it cannot be loaded exactly; run "
                                "pallas-verify verify again to write a new reproducer.")
        return tuple(raw), config
    if len(names) != len(raw):
        raise CaseFileError(f"inputs file {str(path)!r} names {len(names)} dtypes for {len(raw)} arrays.")
    return tuple(_restore(path, i, x, n) for i, (x, n) in enumerate(zip(raw, names, strict=True))), config


def _restore(path: str | Path, i: int, x: np.ndarray, name: str) -> np.ndarray:
    try:
        dtype = _dtype(name)
    except TypeError:
        raise CaseFileError(f"inputs file {str(path)!r}: arg{i} has dtype {name!r}, which neither numpy nor "
                            f"ml_dtypes {ml_dtypes.__version__} knows; install the ml_dtypes that wrote it.") from None
    if x.dtype == dtype:
        return x
    if x.dtype.itemsize != dtype.itemsize:
        raise CaseFileError(f"inputs file {str(path)!r}: arg{i} holds {x.dtype} values, which cannot be "
                            f"{name} ({dtype.itemsize} bytes each).")
    return x.view(dtype)
