"""A shared example database on a real Redis server: night 2 starts from night 1's failure.

The server is Debian's ``redis-server``, started on a free loopback port by the fixture
and stopped after the module; ``make test`` installs it when it can.
"""

from __future__ import annotations

import io
import shutil
import socket
from pathlib import Path

import pytest

from pallas_verify.campaigns.exampledb import check_database
from pallas_verify.campaigns.fuzz import FuzzOptions, fuzz
from pallas_verify.errors import InvalidArgument

pytestmark = pytest.mark.xdist_group("redis")

SPEC = str(Path(__file__).with_name("rare_rotate.py")) + "::RARE_ROTATE"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    pytest.importorskip("redis", reason="the 'cluster' extra (redis) is not installed")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; `make test` does it as root)")
    from benchmarks.cluster import local_redis

    with local_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


def test_bad_database_addresses_are_usage_errors(redis_url):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(InvalidArgument, match=f"db='redis://127.0.0.1:{closed}/0': no Redis server answers there"):
        check_database(f"redis://127.0.0.1:{closed}/0")
    with pytest.raises(InvalidArgument, match="db='s3://bucket' is neither a directory nor redis://HOST:PORT/N"):
        check_database("s3://bucket")
    assert check_database(redis_url + "/0") == redis_url + "/0"


def _night(out: Path, db: str, seed: int, slices: int) -> list:
    # No shrinking: what night 2 replays is whichever failing example night 1 saved.
    report = fuzz(FuzzOptions(targets=(SPEC,), backends=("interpret",), seed=seed, slice_examples=5, workers=1,
                              budget_s=600, max_slices=slices, shrink_budget_s=0, out_dir=out, db=db),
                  stream=io.StringIO())
    return [f for f in report.findings if f.kind == "mismatch"]


@pytest.mark.slow
def test_night_two_replays_night_ones_failure_first_from_redis(redis_url, tmp_path):
    import redis
    from hypothesis.database import InMemoryExampleDatabase

    from pallas_verify.engine import verify
    from pallas_verify.loader import load_spec

    night1 = _night(tmp_path / "night1", redis_url + "/0", seed=1, slices=1)
    assert night1, "night 1 did not find the planted bug"
    assert redis.Redis.from_url(redis_url + "/0").keys("hypothesis-example:*")
    # Night 2: a fresh driver and output directory (no failure database), seed 4, so its
    # one slice searches with seed 5, which on its own misses the bug (the control).
    night2 = _night(tmp_path / "night2", redis_url + "/0", seed=4, slices=1)
    assert night2, "night 2 did not re-find night 1's failure"
    assert night2[0].evidence["examples_to_detect"] == 1
    assert night2[0].config == night1[0].config
    control = verify(load_spec(SPEC), ["interpret"], 5, 5, out_dir=tmp_path / "control",
                     database=InMemoryExampleDatabase(), static=False)
    assert not control.findings
