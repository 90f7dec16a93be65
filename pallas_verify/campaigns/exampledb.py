"""The example database a campaign's units share, degrading instead of failing.

Hypothesis keeps every failing example under its test's key; a campaign's units read and
write one database, a directory (default ``OUT/hypothesis``) or ``redis://HOST:PORT/N``,
so tomorrow every host tries first what any host found tonight.

A database is a cache of examples: it must never become a finding, nor stop a run.

- Redis unreachable, at a unit's start or in the middle of it: the unit goes on with a
  directory on its own host (``fallback_dir``) and says so once (a note the driver
  prints once per run). A later unit that reaches Redis again merges that directory
  back into Redis and empties it.
- A Redis key of the wrong type (``WRONGTYPE``: not the set Hypothesis keeps) is renamed
  aside to ``pallas-verify:quarantine:<key>``, with why and when under the hash
  ``pallas-verify:quarantine``; the unit goes on without it and no unit meets it again.
- A directory that cannot be written (full disk, read-only): examples are kept in memory
  for the unit, with a note.
- Undecodable members or files: Hypothesis skips them itself.

``check_database`` is the driver's check at the start of a run: there a database that
does not answer is a usage error (exit 2), not a degraded night.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    InMemoryExampleDatabase,
)

from pallas_verify.errors import InvalidArgument

__all__ = ["QUARANTINE_PREFIX", "LocalDatabase", "check_database", "example_database", "fallback_dir"]

#: Where a wrong-typed Redis key is renamed to (prefix + its old name), and the hash of notes.
QUARANTINE_PREFIX = b"pallas-verify:quarantine:"
QUARANTINE_NOTES = "pallas-verify:quarantine"
_REDIS_PREFIX = b"hypothesis-example:"  # RedisExampleDatabase's default key prefix
_CONNECT_S, _REPLY_S = 2.0, 10.0


def check_database(address: str) -> str:
    """``address`` if usable as an example database; InvalidArgument naming the fix otherwise."""
    if address.startswith("redis://"):
        try:
            import redis
        except ImportError:
            raise InvalidArgument(f"db={address!r} needs the redis client: install the 'cluster' extra "
                                  "(pip install 'pallas-verify[cluster]').") from None
        try:
            redis.Redis.from_url(address, socket_connect_timeout=_CONNECT_S, socket_timeout=_REPLY_S).ping()
        except (redis.RedisError, ValueError, OSError) as exc:
            raise InvalidArgument(f"db={address!r}: no Redis server answers there ({exc}); start one "
                                  "(redis-server --port PORT) or pass a directory.") from None
    elif "://" in address:
        raise InvalidArgument(f"db={address!r} is neither a directory nor redis://HOST:PORT/N.")
    return address


def fallback_dir(address: str) -> Path:
    """The directory on this host that stands in for the Redis database at ``address``."""
    return Path(tempfile.gettempdir()) / "pallas-verify-db" / hashlib.sha1(address.encode()).hexdigest()[:12]


def example_database(address: str, notes: list[str], *, fallback: Path | None = None) -> ExampleDatabase:
    """Hypothesis's example database at ``address`` (a directory or a redis:// URL) that
    degrades as the module docstring says; what it had to do is appended to ``notes``."""
    if address.startswith("redis://"):
        return _Degrading(_RedisSide(address, notes), LocalDatabase(fallback or fallback_dir(address)), notes)
    return _Degrading(_DirectorySide(address), InMemoryExampleDatabase(), notes)


class LocalDatabase(ExampleDatabase):
    """A directory of examples whose keys can be read back (to merge them elsewhere):
    ``ROOT/<key as hex>/<digest of the value>`` holds the value."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = Path(root)

    def _dir(self, key: bytes) -> Path:
        return self.root / key.hex()

    def fetch(self, key: bytes) -> Iterable[bytes]:
        folder = self._dir(key)
        values = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else ():
            try:
                values.append(path.read_bytes())
            except OSError:
                continue
        return values

    def save(self, key: bytes, value: bytes) -> None:
        folder = self._dir(key)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / hashlib.sha1(value).hexdigest()[:16]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(value)
        os.replace(tmp, path)

    def delete(self, key: bytes, value: bytes) -> None:
        (self._dir(key) / hashlib.sha1(value).hexdigest()[:16]).unlink(missing_ok=True)

    def items(self) -> list[tuple[bytes, bytes, Path]]:
        """Every (key, value, file) held."""
        found = []
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else ():
            try:
                key = bytes.fromhex(folder.name)
            except ValueError:
                continue
            found += [(key, path.read_bytes(), path) for path in sorted(folder.iterdir()) if path.is_file()]
        return found

    def prune(self) -> None:
        """Remove the folders of keys that hold nothing any more."""
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else ():
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty one goes

    def _start_listening(self) -> None:  # nobody listens to a unit's local stand-in
        pass

    def _stop_listening(self) -> None:
        pass


class _RedisSide:
    """The Redis database, connected lazily; the errors that mean "unreachable"."""

    def __init__(self, address: str, notes: list[str]) -> None:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        self.address, self.notes, self.redis = address, notes, redis
        self.client = redis.Redis.from_url(address, socket_connect_timeout=_CONNECT_S, socket_timeout=_REPLY_S)
        self.db = RedisExampleDatabase(self.client)
        self.unreachable: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)

    def describe(self) -> str:
        return f"example database {self.address}"

    def open(self, local: ExampleDatabase) -> None:
        """Reach the server (raises an ``unreachable`` error if it does not answer), then
        merge back what ``local`` kept while it did not."""
        self.client.ping()
        if not isinstance(local, LocalDatabase):
            return
        merged = 0
        for key, value, path in local.items():
            self.db.save(key, value)
            path.unlink(missing_ok=True)
            merged += 1
        local.prune()
        if merged:
            self.notes.append(f"{self.describe()}: answered again; merged back {merged} examples kept in "
                              f"{local.root} on {_host()} while it was unreachable")

    def wrong_type(self, exc: BaseException, keys: tuple[bytes, ...]) -> bool:
        """Quarantine the wrong-typed keys among ``keys`` when ``exc`` is a WRONGTYPE reply."""
        if not (isinstance(exc, self.redis.ResponseError) and "WRONGTYPE" in str(exc)):
            return False
        for key in keys:
            full = _REDIS_PREFIX + key
            kind = self.client.type(full)
            if kind in (b"set", b"none", "set", "none"):
                continue
            aside = QUARANTINE_PREFIX + full
            self.client.rename(full, aside)
            why = f"a {kind.decode() if isinstance(kind, bytes) else kind} where Hypothesis keeps a set (WRONGTYPE)"
            self.client.hset(QUARANTINE_NOTES, aside, f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {why}")
            self.notes.append(f"{self.describe()}: key {full.decode(errors='replace')!r} held {why}; moved aside "
                              f"to {aside.decode(errors='replace')!r} (notes under the hash {QUARANTINE_NOTES!r})")
        return True


class _DirectorySide:
    """A directory database (Hypothesis's own); disk errors mean "unreachable"."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.db = DirectoryBasedExampleDatabase(path)
        self.unreachable: tuple[type[BaseException], ...] = (OSError,)

    def describe(self) -> str:
        return f"example database {self.path}"

    def open(self, local: ExampleDatabase) -> None:
        pass

    def wrong_type(self, exc: BaseException, keys: tuple[bytes, ...]) -> bool:
        return False


class _Degrading(ExampleDatabase):
    """``side``'s database until it fails; then ``local`` for the rest of the unit."""

    def __init__(self, side: Any, local: ExampleDatabase, notes: list[str]) -> None:
        super().__init__()
        self.side, self.local, self.notes = side, local, notes
        self.down: str | None = None
        self.local_failed = False
        try:
            side.open(local)
        except Exception as exc:  # unreachable, or failing: either way the unit goes on locally
            self._lose(exc)

    def _lose(self, exc: BaseException) -> None:
        self.down = f"{type(exc).__name__}: {exc}"
        where = f"{self.local.root} on {_host()}" if isinstance(self.local, LocalDatabase) else "memory"
        self.notes.append(f"{self.side.describe()} unreachable ({self.down}); the unit went on with {where}"
                          + (", merged back when it answers again" if isinstance(self.local, LocalDatabase) else ""))

    def _do(self, op: Callable[[ExampleDatabase], Any], *keys: bytes) -> Any:
        if self.down is None:
            try:
                return self._shared(op, keys)
            except Exception as exc:  # whatever the shared database does, it is never the kernel's
                self._lose(exc)
        try:
            return op(self.local)
        except OSError as exc:
            if not self.local_failed:
                self.local_failed = True
                self.notes.append(f"{self.side.describe()}: could not keep examples locally either ({exc}); "
                                  "this unit's new examples are not kept")
            return None

    def _shared(self, op: Callable[[ExampleDatabase], Any], keys: tuple[bytes, ...]) -> Any:
        try:
            return op(self.side.db)
        except Exception as exc:
            if not self.side.wrong_type(exc, keys):
                raise
        return op(self.side.db)  # the wrong-typed key is out of the way now

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self._do(lambda db: list(db.fetch(key)), key) or []

    def save(self, key: bytes, value: bytes) -> None:
        self._do(lambda db: db.save(key, value), key)

    def delete(self, key: bytes, value: bytes) -> None:
        self._do(lambda db: db.delete(key, value), key)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._do(lambda db: db.move(src, dest, value), src, dest)

    def _start_listening(self) -> None:
        pass

    def _stop_listening(self) -> None:
        pass


def _host() -> str:
    import socket

    return socket.gethostname()
