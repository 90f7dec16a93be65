"""The example database degrades, never poisons: Redis killed between operations, back
again, wrong-typed keys; and one key per kernel and backend, so a kernel that passes never
deletes another kernel's saved failure."""

from __future__ import annotations

import shutil

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pallas_verify.campaigns.exampledb import QUARANTINE_PREFIX, example_database

pytestmark = pytest.mark.xdist_group("redis")

MUTANTS = "reference_kernels.mutants.grid:"


@pytest.fixture
def server(tmp_path):
    pytest.importorskip("redis", reason="the 'cluster' extra (redis) is not installed")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; `make test` does it as root)")
    from benchmarks.faultkit import RedisServer

    with RedisServer(tmp_path) as redis_server:
        yield redis_server


def test_redis_killed_between_operations_degrades_to_a_local_folder_and_merges_back(server, tmp_path):
    import redis

    notes: list[str] = []
    db = example_database(server.url, notes, fallback=tmp_path / "local")
    db.save(b"k", b"night-1")
    assert list(db.fetch(b"k")) == [b"night-1"] and notes == []
    server.kill()
    db.save(b"k", b"during-outage")  # the connection error is the database's, never the kernel's
    db.save(b"j", b"also")
    assert list(db.fetch(b"k")) == [b"during-outage"]
    db.delete(b"j", b"also")
    db.move(b"k", b"k.secondary", b"during-outage")
    assert len(notes) == 1 and "unreachable (ConnectionError" in notes[0] and str(tmp_path / "local") in notes[0]
    server.start()  # same port, empty: it kept nothing (no persistence)
    later: list[str] = []
    again = example_database(server.url, later, fallback=tmp_path / "local")
    assert later == [f"example database {server.url}: answered again; merged back 1 examples kept in "
                     f"{tmp_path / 'local'} on {__import__('socket').gethostname()} while it was unreachable"]
    assert list(again.fetch(b"k.secondary")) == [b"during-outage"]
    assert not any((tmp_path / "local").iterdir())  # emptied once merged
    assert redis.Redis.from_url(server.url).smembers(b"hypothesis-example:k.secondary") == {b"during-outage"}


def test_a_wrong_typed_key_is_moved_aside_with_a_note_and_never_met_again(server, tmp_path):
    import redis

    client = redis.Redis.from_url(server.url)
    client.set(b"hypothesis-example:k", b"a string, not a set")
    notes: list[str] = []
    db = example_database(server.url, notes, fallback=tmp_path / "local")
    assert list(db.fetch(b"k")) == []
    db.save(b"k", b"v")
    assert list(db.fetch(b"k")) == [b"v"]  # on Redis still: only the key was bad
    assert client.get(QUARANTINE_PREFIX + b"hypothesis-example:k") == b"a string, not a set"
    assert b"WRONGTYPE" in client.hget("pallas-verify:quarantine", QUARANTINE_PREFIX + b"hypothesis-example:k")
    assert len(notes) == 1 and "held a string where Hypothesis keeps a set (WRONGTYPE); moved aside" in notes[0]
    assert not (tmp_path / "local").exists()  # Redis itself never went away


def test_each_kernel_has_its_own_key_so_a_passing_kernel_keeps_anothers_failure(tmp_path):
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    db = InMemoryExampleDatabase()
    found = verify(load_spec(MUTANTS + "rotated_index_map_spec"), ["interpret"], 2, 1, out_dir=tmp_path,
                   database=db, static=False)
    assert [f.kind for f in found.findings] == ["mismatch"]
    saved = {k: set(v) for k, v in db.data.items() if v}
    assert len(saved) == 1
    clean = verify(load_spec(MUTANTS + "block_copy_spec"), ["interpret"], 2, 2, out_dir=tmp_path,
                   database=db, static=False)
    assert not clean.findings
    assert {k: set(v) for k, v in db.data.items() if k in saved} == saved  # still there for tomorrow


def _mismatch_with(database) -> list[str]:
    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    report = verify(load_spec(MUTANTS + "rotated_index_map_spec"), ["interpret"], 2, 1, out_dir="pv-out-db",
                    database=database, static=False)
    return [f.kind for f in report.findings]


def test_garbage_redis_members_are_skipped(server, tmp_path, monkeypatch):
    import redis

    monkeypatch.chdir(tmp_path)
    notes: list[str] = []
    assert _mismatch_with(example_database(server.url, notes, fallback=tmp_path / "local")) == ["mismatch"]
    client = redis.Redis.from_url(server.url)
    keys = client.keys("hypothesis-example:*")
    assert keys
    for key in keys:
        client.sadd(key, b"\xff\x00garbage", b"")
    assert _mismatch_with(example_database(server.url, notes, fallback=tmp_path / "local")) == ["mismatch"]
    assert notes == []  # nothing degraded: Hypothesis skipped what it could not decode


def test_a_corrupt_directory_database_is_skipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notes: list[str] = []
    folder = tmp_path / "hypothesis"
    assert _mismatch_with(example_database(str(folder), notes)) == ["mismatch"]
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files
    for path in files:
        path.write_bytes(b"\xff\x00not an example")
    (folder / "stray-file-where-a-key-folder-goes").write_text("x")
    assert _mismatch_with(example_database(str(folder), notes)) == ["mismatch"]
