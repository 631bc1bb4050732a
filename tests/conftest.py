from __future__ import annotations

import os
import shutil

import pytest

from tests.support import require
from tests.support.redis_server import RedisServer, redis_required, start_cluster


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server on a free loopback port, for the whole session."""
    if shutil.which("redis-server") is None:
        if redis_required():
            pytest.fail("redis-server is required (CI=true) but not installed: apt-get install redis-server")
        pytest.skip("redis-server not installed (run the README's test command, which installs it)")
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_cluster(redis_server):  # redis_server: skips (or fails under CI) without redis-server
    """A real three-node Redis Cluster on loopback, for the module's tests (they may kill and restart a node)."""
    require(shutil.which("redis-cli") is not None, "redis-cli is missing: apt-get install redis-tools")
    nodes = start_cluster(3)
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    """URL of the session's Redis, emptied before the test."""
    if redis_server.proc is None or redis_server.proc.poll() is not None:
        redis_server.start()  # a fault test may have stopped it
    client = redis_server.client()
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def pytest_configure(config):
    # Hypothesis: a stable profile for CI (deterministic, no deadline flakiness on a shared machine).
    try:
        from hypothesis import settings as hsettings

        hsettings.register_profile("ci", deadline=None, derandomize=True, max_examples=300)
        hsettings.register_profile("dev", deadline=None, max_examples=200)
        hsettings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
    except ImportError:  # pragma: no cover
        pass


REDIS_FIXTURES = {"redis_server", "redis_url", "redis_client"}


def pytest_collection_modifyitems(config, items):
    # A test that talks to the real redis-server is marked `redis`, whether or not its author wrote the
    # marker, so `-m redis` / `-m "not redis"` select exactly the tests that need one.
    for item in items:
        if REDIS_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("redis") is None:
            item.add_marker(pytest.mark.redis)
