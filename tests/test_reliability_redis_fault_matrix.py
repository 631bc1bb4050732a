"""Every way Redis fails x ``DEDUP_REDIS_ON_ERROR``: real redis-server processes, real Scrapy crawls.

Each fault is made real on a redis-server of its own (no mock, no fake
error): Redis full (``maxmemory`` with ``noeviction``) from the start or from
mid-crawl, a primary demoted to a read-only replica mid-crawl, snapshots
failing (``MISCONF``), the seen key holding another type (before the crawl
and mid-crawl), a script that keeps Redis ``BUSY``, a restart that keeps it
``LOADING``, the process stopped with SIGSTOP (hung, sockets open) for a while
or for good, killed and restarted, and a ``rediss://`` URL at a plain port.

Each crawls :class:`tests.reliabilitysite.LinkedSite` (35 pages, discovered as
the crawl goes) with a Redis dupefilter and the Redis content index on the
faulty server, under each policy, and counts: pages lost (never fetched),
pages fetched twice, tracebacks in the log, wall time, and what the crawl ended
in. What must hold: ``fail_open`` loses no page; ``retry`` loses none, or
closes the spider with reason ``dedup_redis_unavailable`` and says in its
closing line how many requests it let through unrecorded
(``dedup/redis/unrecorded``); a configuration error found at start-up stops
the start-up with one clear error; never a traceback; the crawl's time stays
within ``DEDUP_REDIS_RETRY_SECONDS x 4 + 30 s`` (a hang detector, not a speed
claim). ``pytest -s`` prints one line of counts per crawl (docs/reliability.md
quotes them).
"""
from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import pytest
from pytest_twisted import inlineCallbacks
from twisted.internet import defer

from scrapy_dedup.dupefilters import RedisStartupError
from scrapy_dedup._util.redis_policy import CLOSE_REASON
from scrapy_dedup.settings import read_settings
from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.crawl]

FILTERS = {"exact": "scrapy_dedup.RedisDupeFilter", "bloom": "scrapy_dedup.RedisBloomDupeFilter"}
#: DEDUP_REDIS_RETRY_SECONDS of the matrix; the faults that end, end well within it
BUDGET = 5.0
#: the spider's key (DEDUP_REDIS_KEY's default for LinkedSpider)
SEEN_KEY = "dedup:linked:seen"


@dataclass
class Env:
    """The faulty server (and a second one where a fault needs it), for the fault's actions."""

    server: RedisServer
    flt: str
    replica: RedisServer | None = None
    timers: list[threading.Timer] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    stopped: bool = False

    def client(self, server: RedisServer | None = None):
        import redis

        return redis.Redis.from_url((server or self.server).url, socket_timeout=10)


@dataclass
class Fault:
    """A real way for Redis to fail: ``begin`` at the ``at``-th response (0: before the crawl), then ``end``.

    ``end`` None: the fault lasts the whole crawl. Else it runs once, ``lasts`` s after
    ``begin`` (from a timer thread: under ``retry`` the crawl's own thread is waiting for
    Redis) or at the ``until``-th response, whichever comes first (under ``fail_open``
    the crawl goes on, and must still have pages to fetch once Redis is back, so that
    the recovery and the replay of what it let through are seen). ``retry`` and ``fail_open`` say
    what each policy's crawl must end in: ``finished`` (0 pages lost), ``closed`` (reason
    ``dedup_redis_unavailable``, unrecorded requests counted and logged) or ``refused`` (start-up
    stopped by a :class:`RedisStartupError`: a configuration error, or Redis unusable as the crawl
    starts); a dict gives it per filter.
    """

    name: str
    begin: Callable[[Env], None]
    end: Callable[[Env], None] | None = None
    at: int = 8
    lasts: float = 1.0
    until: int = 16
    server_args: tuple[str, ...] = ()
    retry: str | dict[str, str] = "finished"
    fail_open: str | dict[str, str] = "finished"
    prepare: Callable[[Env], None] | None = None
    url: Callable[[Env], str] | None = None

    def expected(self, policy: str, flt: str) -> str:
        want = self.retry if policy == "retry" else self.fail_open
        return want[flt] if isinstance(want, dict) else want


# --- the faults' actions, each a real server state ----------------------------------------

def fill_until_full(env: Env) -> None:
    """Write 1 KB values until Redis refuses (``OOM``): it is full, and ``noeviction`` frees nothing."""
    import redis

    client = env.client()
    for i in range(100_000):
        try:
            client.set(f"filler:{i}", b"x" * 1024)
        except redis.exceptions.OutOfMemoryError:
            break
    else:
        pytest.fail("Redis never became full")
    client.close()


def memory_full(env: Env) -> None:
    client = env.client()
    used = client.info("memory")["used_memory"]
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used // 2)  # below what it holds: every write command is refused with OOM
    client.close()


def memory_freed(env: Env) -> None:
    client = env.client()
    client.config_set("maxmemory", 0)
    client.close()


def start_replica(env: Env) -> None:
    """A second server replicating the crawl's one, synced before the crawl starts."""
    env.replica = RedisServer(extra_args=("--replicaof", "127.0.0.1", str(env.server.port))).start()
    replica = env.client(env.replica)
    wait_for(lambda: replica.info("replication").get("master_link_status") == "up", "the replica to sync")
    replica.close()


def demote_to_replica(env: Env) -> None:
    """A failover: the replica is promoted, the crawl's server becomes its replica (read-only: ``READONLY``)."""
    assert env.replica is not None
    replica, primary = env.client(env.replica), env.client()
    replica.replicaof("NO", "ONE")
    primary.replicaof("127.0.0.1", str(env.replica.port))
    replica.close()
    primary.close()


def promote_back(env: Env) -> None:
    client = env.client()
    client.replicaof("NO", "ONE")
    client.close()


def snapshots_failing(env: Env) -> None:
    """A snapshot that cannot be written (its directory is gone) with a save point set: ``MISCONF`` on writes."""
    client = env.client()
    client.config_set("save", "3600 1")  # stop-writes-on-bgsave-error (default yes) applies with a save point
    gone = env.server.dir / "rdb"
    gone.mkdir()
    client.config_set("dir", str(gone))
    shutil.rmtree(gone)
    client.bgsave()
    wait_for(lambda: client.info("persistence")["rdb_last_bgsave_status"] == "err", "the snapshot to fail")
    client.close()


def snapshots_fixed(env: Env) -> None:
    """The operator's fix: a writable directory and a snapshot that succeeds."""
    client = env.client()
    writable = env.server.dir / "rdb-fixed"
    writable.mkdir(exist_ok=True)
    client.config_set("dir", str(writable))
    client.bgsave()
    wait_for(lambda: client.info("persistence")["rdb_last_bgsave_status"] == "ok", "the snapshot to succeed")
    client.close()


def wrong_type_value(env: Env, key: str) -> None:
    """Put a value of a type the filter cannot use at ``key`` (a string for the set, a set for the Bloom bitmap)."""
    client = env.client()
    if env.flt == "exact":
        client.set(key, "not a set")
    else:
        client.sadd(key, "not a bitmap")
    client.close()


def key_of_another_type(env: Env) -> None:
    wrong_type_value(env, SEEN_KEY)


def key_replaced(env: Env) -> None:
    """Another program moves the seen key away and writes a value of another type there: ``WRONGTYPE``."""
    client = env.client()
    client.rename(SEEN_KEY, SEEN_KEY + ":aside")
    wrong_type_value(env, SEEN_KEY)
    client.close()


def key_restored(env: Env) -> None:
    client = env.client()
    client.delete(SEEN_KEY)
    client.rename(SEEN_KEY + ":aside", SEEN_KEY)
    client.close()


def busy_script(env: Env) -> None:
    """A script that loops until killed: past ``busy-reply-threshold`` every other command gets ``BUSY``."""
    import redis

    def run() -> None:
        client = redis.Redis.from_url(env.server.url)
        try:
            client.eval("while true do end", 0)
        except redis.exceptions.RedisError:
            pass  # "Script killed by user with SCRIPT KILL"
        client.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    env.threads.append(thread)
    probe = env.client()
    wait_for(lambda: _busy(probe), "the script to make Redis busy")
    probe.close()


def _busy(client) -> bool:
    import redis

    try:
        client.ping()
    except redis.exceptions.ResponseError as exc:
        return str(exc).startswith("BUSY")
    return False


def script_killed(env: Env) -> None:
    client = env.client()
    client.script_kill()
    client.close()


def fill_for_loading(env: Env) -> None:
    """1,000 keys in the AOF's base (rewritten), so a restart spends about a second ``LOADING`` them."""
    client = env.client()
    pipe = client.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"filler:{i}", "x")
    pipe.execute()
    client.bgrewriteaof()
    wait_for(lambda: not client.info("persistence")["aof_rewrite_in_progress"], "the AOF rewrite")
    client.close()


def kill(env: Env) -> None:
    assert env.server.proc is not None
    env.server.proc.kill()  # SIGKILL: no shutdown, connections reset
    env.server.proc.wait()
    env.server.proc = None


def restart(env: Env) -> None:
    env.server.start()


def kill_and_restart_loading(env: Env) -> None:
    """SIGKILL, then at once a restart that answers ``LOADING`` while it reads its data back (about 1 s)."""
    kill(env)
    thread = threading.Thread(target=env.server.start, daemon=True)  # start() returns once it answers PING
    thread.start()
    env.threads.append(thread)


def stop(env: Env) -> None:
    assert env.server.proc is not None
    env.server.proc.send_signal(signal.SIGSTOP)  # hung: sockets open, the kernel still accepts connections
    env.stopped = True


def resume(env: Env) -> None:
    assert env.server.proc is not None
    env.server.proc.send_signal(signal.SIGCONT)
    env.stopped = False


def nothing(env: Env) -> None:
    pass


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


AOF = ("--appendonly", "yes", "--appendfsync", "always")
FAULTS = [
    Fault("full_from_start", fill_until_full, at=0,
          server_args=("--maxmemory", "1mb", "--maxmemory-policy", "noeviction"),
          # the exact filter starts (it only reads at start) and closes at the first write; the Bloom filter
          # writes its layout at start, so retry's wait for it happens there, and the start fails
          retry={"exact": "closed", "bloom": "refused"}),
    Fault("full_mid_crawl", memory_full, memory_freed),
    Fault("readonly_replica", demote_to_replica, promote_back, prepare=start_replica),
    Fault("misconf", snapshots_failing, snapshots_fixed, server_args=("--enable-protected-configs", "yes")),
    Fault("wrongtype_at_start", key_of_another_type, at=0, retry="refused", fail_open="refused"),
    Fault("wrongtype_mid_crawl", key_replaced, key_restored),
    Fault("busy_script", busy_script, script_killed, server_args=("--busy-reply-threshold", "100")),
    Fault("loading_after_restart", kill_and_restart_loading, prepare=fill_for_loading,
          server_args=(*AOF, "--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024")),
    # longer than one call's time bound under retry (BUDGET / 3), so that a call does time out
    Fault("hung", stop, resume, lasts=3.0),
    Fault("hung_for_good", stop, retry="closed"),
    Fault("killed_restarted", kill, restart, server_args=AOF),
    # no TLS handshake answers within DEDUP_REDIS_STARTUP_SECONDS: like an unreachable server, a start-up failure
    Fault("tls_to_plain_port", nothing, at=0, retry="refused", fail_open="refused",
          url=lambda env: f"rediss://127.0.0.1:{env.server.port}/0"),
]


@pytest.fixture
def fault_env(request, redis_server):  # redis_server: skips (or fails under CI) without redis-server
    fault: Fault = request.getfixturevalue("fault")
    env = Env(RedisServer(extra_args=fault.server_args).start(), request.getfixturevalue("flt"))
    yield env
    for timer in env.timers:
        timer.cancel()
        timer.join()
    if env.stopped:
        resume(env)
    probe = env.client()
    if env.server.proc is not None and _busy(probe):
        script_killed(env)
    probe.close()
    for thread in env.threads:
        thread.join(15)
    env.server.stop()
    if env.replica is not None:
        env.replica.stop()


def traceback_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def ours(record: logging.LogRecord) -> bool:
    """A traceback of this package or of a Redis error, as opposed to Scrapy's own after any start-up error.

    (When a component's ``open`` raises, Scrapy 2.19 closes the engine that never opened and
    logs "Scraper slot not assigned" and CoreStats' missing start time; that is the start-up
    error's echo, logged the same for any component that refuses to start.)
    """
    exc = record.exc_info[1] if record.exc_info else None
    return record.name.startswith("scrapy_dedup") or type(exc).__module__.startswith(("scrapy_dedup", "redis"))


@pytest.mark.parametrize("policy", ["retry", "fail_open"])
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
@pytest.mark.parametrize("flt", ["exact", pytest.param("bloom", marks=pytest.mark.slow)])
@inlineCallbacks
def test_redis_fault_matrix(fault: Fault, policy: str, flt: str, fault_env: Env, caplog):
    yield crawl_under_fault(fault, policy, flt, fault_env, caplog, BUDGET)


@pytest.mark.slow
@pytest.mark.parametrize("fault", [f for f in FAULTS if f.name == "hung_for_good"], ids=["hung_for_good"])
@pytest.mark.parametrize("flt", ["exact"])
@inlineCallbacks
def test_a_hung_redis_under_retry_with_the_default_budget_closes_the_spider_in_bounded_time(fault, flt, fault_env,
                                                                                            caplog):
    """The defaults as shipped (DEDUP_REDIS_RETRY_SECONDS unset): before, each call waited 11 socket timeouts."""
    yield crawl_under_fault(fault, "retry", flt, fault_env, caplog, None)


@defer.inlineCallbacks
def crawl_under_fault(fault: Fault, policy: str, flt: str, env: Env, caplog, budget: float | None):
    """Crawl with ``fault`` under ``policy``, print the counts, assert what must hold (see the module doc).

    ``budget`` None: ``DEDUP_REDIS_RETRY_SECONDS`` left at its default.
    """
    caplog.set_level(logging.INFO)
    expected = fault.expected(policy, flt)
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    settings = {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "DUPEFILTER_CLASS": FILTERS[flt],
        "DEDUP_REDIS_URL": fault.url(env) if fault.url else env.server.url,
        "DEDUP_CONTENT_BACKEND": "redis",
        "DEDUP_BLOOM_CAPACITY": 100_000,
        "DEDUP_REDIS_ON_ERROR": policy,
        "CONCURRENT_REQUESTS": 2,
    }
    if budget is not None:
        settings["DEDUP_REDIS_RETRY_SECONDS"] = budget
    budget = read_settings(settings).redis_retry_seconds
    if fault.prepare is not None:
        fault.prepare(env)
    responses = {"n": 0}
    ended = threading.Lock()

    def end_once() -> None:
        if fault.end is not None and ended.acquire(blocking=False):
            fault.end(env)

    def on_response(spider, response):
        responses["n"] += 1
        if responses["n"] == fault.at:
            fault.begin(env)
            if fault.end is not None:
                timer = threading.Timer(fault.lasts, end_once)
                env.timers.append(timer)
                timer.start()
        if responses["n"] == fault.until and fault.at:
            end_once()

    if fault.at == 0:
        fault.begin(env)
    started = time.monotonic()
    refused: RedisStartupError | None = None
    with LocalSite(linked) as site:
        try:
            crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")],
                                      on_response=on_response)
        except RedisStartupError as exc:
            refused, crawler = exc, None
    seconds = time.monotonic() - started
    hits = Counter(path for _, path in site.fetched())
    lost = [p for p in linked.paths if not hits[p]]
    twice = [p for p in linked.paths if hits[p] > 1]
    tracebacks = traceback_records(caplog)
    mine = [r for r in tracebacks if ours(r)]
    stats = crawler.stats.get_stats() if crawler is not None else {}
    reason = "refused at start-up" if refused is not None else stats.get("finish_reason")
    redis_stats = {k.removeprefix("dedup/"): v for k, v in sorted(stats.items())
                   if k.startswith(("dedup/redis/", "dedup/content/redis_", "dedup/content/store_errors"))}
    scrapys = len(tracebacks) - len(mine)
    echo = f" (+{scrapys} of Scrapy's after the start-up error)" if scrapys else ""
    print(f"\n[fault-matrix] {fault.name} {policy} {flt} budget={budget:g}s: lost={len(lost)} "
          f"fetched_twice={len(twice)} tracebacks={len(mine)}{echo} seconds={seconds:.1f} end={reason} {redis_stats}")

    assert seconds < budget * 4 + 30, "the crawl hung"
    if expected == "refused":
        assert refused is not None, f"expected the start-up to be refused, the crawl ended in {reason}"
        assert not mine, [r.getMessage()[:300] for r in mine]
        assert not site.hits
        if fault.name.startswith("wrongtype"):
            assert repr(SEEN_KEY) in str(refused) and "DEDUP_REDIS_KEY" in str(refused)
        return
    assert refused is None, str(refused)
    assert not tracebacks, [r.getMessage()[:300] for r in tracebacks]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    outage_lines = [r for r in errors if r.name == "scrapy_dedup._util.redis_policy" and "giving up" not in r.getMessage()]
    content_lines = [r for r in errors if r.name == "scrapy_dedup.extensions"]
    assert len(outage_lines) == 1, [r.getMessage() for r in outage_lines]  # one line per outage
    assert len(content_lines) <= 1, [r.getMessage() for r in content_lines]
    if fault.name.startswith("wrongtype"):
        assert repr(SEEN_KEY) in outage_lines[0].getMessage()  # the line names the key
    if expected == "finished":
        assert lost == []
        assert stats["finish_reason"] == "finished"
        back = [r for r in caplog.records
                if "is back after" in r.getMessage() and r.name == "scrapy_dedup._util.redis_policy"]
        if fault.end is not None or fault.name == "loading_after_restart":
            assert len(back) == 1
    else:
        assert expected == "closed"
        assert stats["finish_reason"] == CLOSE_REASON
        unrecorded = stats["dedup/redis/unrecorded"]
        assert unrecorded >= 1
        closing = [r for r in errors if r.name == "scrapy_dedup.dupefilters" and CLOSE_REASON in r.getMessage()]
        assert len(closing) == 1 and f"{unrecorded} requests" in closing[0].getMessage()


# --- the parts the matrix relies on, one at a time --------------------------------------------

def test_real_server_errors_are_classified_by_class_and_by_code(fault_server, tmp_path):
    """Each reply made real on a real server; ``transient_kind`` reads redis-py's class or the server's code."""
    import redis

    from scrapy_dedup._util.redis_policy import is_transient

    client = redis.Redis.from_url(fault_server.url)

    def error_of(call) -> Exception:
        try:
            call()
        except redis.exceptions.RedisError as exc:
            return exc
        raise AssertionError("no error")

    client.set("a string", "x")
    wrongtype = error_of(lambda: client.sadd("a string", "m"))
    unknown = error_of(lambda: client.execute_command("NO-SUCH-COMMAND"))
    noscript = error_of(lambda: client.evalsha("0" * 40, 0))
    client.acl_setuser("reader", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@read"])
    reader = redis.Redis.from_url(f"redis://reader:pw@127.0.0.1:{fault_server.port}/0")
    noperm = error_of(lambda: reader.sadd("k", "m"))
    client.config_set("maxmemory", max(1, client.info("memory")["used_memory"] // 2))
    oom = error_of(lambda: client.sadd("k", "m"))
    oom_in_script = error_of(lambda: client.eval("return redis.call('SADD', KEYS[1], 'm')", 1, "k"))
    client.config_set("maxmemory", 0)
    client.config_set("save", "3600 1")
    gone = tmp_path / "rdb"
    gone.mkdir()
    client.config_set("dir", str(gone))
    gone.rmdir()
    client.bgsave()
    wait_for(lambda: client.info("persistence")["rdb_last_bgsave_status"] == "err", "the snapshot to fail")
    misconf = error_of(lambda: client.sadd("k", "m"))
    pipe = client.pipeline(transaction=False)
    pipe.setbit("bits", 7, 1)
    misconf_pipelined = error_of(pipe.execute)  # "Command # 1 (SETBIT ...) of pipeline caused error: MISCONF ..."

    assert type(oom).__name__ == "OutOfMemoryError" and is_transient(oom)
    assert is_transient(oom_in_script)
    assert type(misconf) is redis.exceptions.ResponseError and str(misconf).startswith("MISCONF")
    assert is_transient(misconf)  # a plain ResponseError: by the server's code
    assert "pipeline" in str(misconf_pipelined) and is_transient(misconf_pipelined)
    for permanent in (wrongtype, unknown, noscript, noperm):
        assert not is_transient(permanent), permanent
    from scrapy_dedup._util.redis_policy import transient_kind

    assert {transient_kind(e) for e in (oom, oom_in_script, misconf, misconf_pipelined)} == {"refuses writes"}
    # Redis < 7 wrapped a script's error in ERR; the code is read from inside
    wrapped = redis.exceptions.ResponseError(
        "Error running script (call to f_5edd89d0): @user_script:138: -MISCONF Redis is configured to save RDB")
    wrapped.args = ("ERR " + wrapped.args[0],)
    assert transient_kind(wrapped) == "refuses writes"
    for client_ in (client, reader):
        client_.close()


@pytest.fixture
def fault_server(redis_server):  # redis_server: skips (or fails under CI) without redis-server
    server = RedisServer(extra_args=("--enable-protected-configs", "yes")).start()
    yield server
    server.stop()


def test_a_replica_and_a_hung_server_are_transient(fault_server):
    import redis

    from scrapy_dedup._util.redis_policy import transient_kind

    replica = RedisServer(extra_args=("--replicaof", "127.0.0.1", str(fault_server.port))).start()
    env = Env(fault_server, "exact", replica=replica)
    try:
        readonly = _error(lambda: env.client(replica).sadd("k", "m"))
        fault_server.proc.send_signal(signal.SIGSTOP)  # not answering (a hung server): a timeout
        env.stopped = True
        hung = _error(lambda: redis.Redis.from_url(fault_server.url, socket_timeout=0.5).sadd("k", "m"))
    finally:
        if env.stopped:
            resume(env)
        replica.stop()
    assert transient_kind(readonly) == "refuses writes"
    assert transient_kind(hung) == "unreachable"


def _error(call) -> Exception:
    import redis

    try:
        call()
    except redis.exceptions.RedisError as exc:
        return exc
    raise AssertionError("no error")


def test_connect_bounds_each_call_and_makes_one_attempt(redis_server):
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    from scrapy_dedup._util.redis_conn import connect
    from scrapy_dedup._util.redis_policy import call_timeout

    assert call_timeout("retry", 60) == 20 and call_timeout("retry", 0.5) == 1.0
    assert call_timeout("fail_open", 60) == 1.0

    def kwargs(client):
        return client.connection_pool.connection_kwargs

    bounded = kwargs(connect(redis_server.url, timeout=call_timeout("retry", 6)))
    assert (bounded["socket_timeout"], bounded["socket_connect_timeout"]) == (2.0, 2.0)
    assert bounded["retry"].get_retries() == 0  # redis-py's own retries would multiply the bound
    long_budget = kwargs(connect(redis_server.url, timeout=call_timeout("retry", 600)))
    assert (long_budget["socket_timeout"], long_budget["socket_connect_timeout"]) == (30, 10)
    users = Retry(ExponentialBackoff(), 3)
    mine = kwargs(connect(redis_server.url, {"socket_timeout": 7, "retry": users}, timeout=1))
    assert mine["socket_timeout"] == 7 and mine["socket_connect_timeout"] == 1 and mine["retry"] is users
    in_url = kwargs(connect(redis_server.url + "?socket_timeout=9", timeout=1))
    assert in_url["socket_timeout"] == 9


def test_after_start_up_every_redis_error_is_an_outage_logged_once_naming_the_key(caplog):
    """At start-up a key of another type stops the crawl; once running, it is an outage like a dead server."""
    import redis

    from scrapy_dedup._util.redis_policy import RedisErrorPolicy, RedisUnavailable

    now = [0.0]
    policy = RedisErrorPolicy("fail_open", key="dedup:s:seen", url="redis://h:1/0", clock=lambda: now[0])

    def wrong_type():
        raise redis.exceptions.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    with pytest.raises(redis.exceptions.ResponseError):  # start-up: raised as it is
        policy.call(wrong_type)
    policy.running = True
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        for _ in range(20):
            with pytest.raises(RedisUnavailable):
                policy.call(wrong_type)
            now[0] += 0.5
        now[0] += 10
        assert policy.call(lambda: "fixed") == "fixed"
    lines = [r for r in caplog.records if r.name == "scrapy_dedup._util.redis_policy"]
    assert [r.levelno for r in lines] == [logging.ERROR, logging.INFO]
    assert "'dedup:s:seen'" in lines[0].getMessage() and "another type" in lines[0].getMessage()
    assert policy.errors < 20  # probed after growing pauses, not once per call


@inlineCallbacks
def test_a_plain_client_on_a_cluster_node_is_refused_at_start_up_with_the_hint(redis_cluster, caplog):  # noqa: F811
    """``MOVED`` reaching the filter means a plain client on a cluster node: a configuration error, said so."""
    import redis

    cluster = redis.cluster.RedisCluster.from_url(f"redis://127.0.0.1:{redis_cluster[0].port}/0")
    owner = cluster.get_node_from_key(SEEN_KEY).port
    cluster.close()
    elsewhere = next(node for node in redis_cluster if node.port != owner)  # this node answers MOVED for the key
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DUPEFILTER_CLASS": FILTERS["exact"],
                "DEDUP_REDIS_URL": f"redis://127.0.0.1:{elsewhere.port}/0", "DEDUP_REDIS_RETRY_SECONDS": 60}
    with LocalSite(LinkedSite(pages=3, near=0)) as site:
        with pytest.raises(RedisStartupError) as info:
            yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
        assert not site.hits
    assert "MovedError" in str(info.value) and "redis.cluster.RedisCluster" in str(info.value)
