"""How a config, an example and a bound function are keyed, and the one bounded cache.

Every cache of the engine keys its entries here, so a config is written as a key once:
``config_key`` (configs hold tuples, strings, dtypes... and may hold unhashable values:
the key is their ``repr``, sorted by name, never a hash of them). ``Lru`` is the bounded
cache they all use, least recently used evicted first.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["Lru", "bound_key", "config_key", "example_key", "shapes_key"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

def config_key(config: Mapping[str, Any]) -> str:
    """A stable, hashable key for a config: its items sorted by name, as text."""
    return repr(sorted(config.items(), key=lambda kv: kv[0]))


def shapes_key(inputs: Sequence[Any]) -> tuple[tuple[tuple[int, ...], str], ...]:
    """The shapes and dtypes of ``inputs`` (what a trace depends on, not the values)."""
    return tuple((tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x).__name__))) for x in inputs)


def example_key(config: Mapping[str, Any], inputs: Sequence[Any]) -> str:
    """A key for one example: the config and a digest of the input shapes, dtypes and bytes."""
    import numpy as np

    digest = hashlib.sha1()
    for x in inputs:
        digest.update(f"{x.shape}{x.dtype}".encode())
        digest.update(np.ascontiguousarray(x).tobytes())
    return config_key(config) + digest.hexdigest()


def bound_key(fn: Any, config: Mapping[str, Any], *more: Hashable) -> tuple[Hashable, ...]:
    """A key for ``fn`` bound to ``config`` (and ``more``, e.g. a transform): ``fn`` itself
    when it is hashable (functions are, by identity), else its id."""
    try:
        hash(fn)
    except TypeError:
        fn = ("id", id(fn))
    return (fn, config_key(config), *more)


class Lru(Generic[K, V]):  # noqa: UP046  (no PEP 695 syntax: tools on Python 3.11 parse this package)
    """A bounded cache: at most ``maxsize`` entries, the least recently used evicted first.

    Attributes:
      maxsize: entries kept.
      hits: lookups answered from the cache.
      misses: lookups that found nothing.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._entries: collections.OrderedDict[K, V] = collections.OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry of ``key`` (now the most recently used), or None."""
        if key not in self._entries:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return self._entries[key]

    def put(self, key: K, value: V) -> list[K]:
        """Keep ``value`` under ``key``; the keys evicted to make room."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        evicted = []
        while len(self._entries) > self.maxsize:
            evicted.append(self._entries.popitem(last=False)[0])
        return evicted

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The entry of ``key``, made by ``make()`` and kept when missing."""
        if key in self._entries:
            return self.get(key)  # type: ignore[return-value]
        self.misses += 1
        value = make()
        self.put(key, value)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
