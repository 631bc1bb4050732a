"""Security: Redis secrets never leak, TLS works, Lua takes data only as KEYS/ARGV, files follow the umask,
the HTML report escapes page content. Real servers throughout (redis-server with a password, with TLS).
"""
from __future__ import annotations

import ast
import datetime
import functools
import hashlib
import json
import logging
import os
import stat
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest
from pytest_twisted import inlineCallbacks

import scrapy_dedup
from scrapy_dedup.dupefilters import RedisStartupError
from scrapy_dedup.settings import DedupConfigError, read_settings
from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import refusal_in, run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import RedisServer, free_port

PASSWORD = "s3cr3t-Pa55w0rd-7f1c"
#: a password with every delimiter of a URL in it; each piece between two of them is distinctive, so a
#: piece found in a log is a leak, not a coincidence
TRICKY = "Qx7/Zk9#Wm4?Vb2@Hn5:Jt8-s3cr3t"
PACKAGE = Path(scrapy_dedup.__file__).parent


def everything_logged(caplog) -> str:
    """Every message, with the formatted traceback of any exception logged."""
    formatter = logging.Formatter()
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        if record.exc_info:
            parts.append(formatter.formatException(record.exc_info))
    return "\n".join(parts)


@pytest.fixture
def password_redis(redis_server):  # redis_server: skips (or fails under CI) without redis-server
    server = RedisServer(password=PASSWORD).start()
    yield server
    server.stop()


@pytest.fixture(params=[PASSWORD, TRICKY], ids=["plain", "delimiters"])
def outage_redis(redis_server, request):
    """A password-protected server; its password plain, or full of the characters that cut a URL."""
    server = RedisServer(password=request.param).start()
    yield server
    server.stop()


# --- secrets ----------------------------------------------------------------------------------------

@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_password_never_reaches_logs_or_stats_even_through_an_outage(outage_redis, caplog):
    caplog.set_level(logging.DEBUG)
    linked = LinkedSite(pages=20, near=4, delay=0.02, entry_links_all=False)
    count = {"n": 0}

    def outage(spider, response):  # the server is killed mid-crawl: error messages are logged too
        count["n"] += 1
        if count["n"] == 5:
            outage_redis.proc.kill()
            outage_redis.proc.wait()
            outage_redis.proc = None
        if count["n"] == 10:
            outage_redis.start()  # back while pages remain: the scripts are loaded again

    settings = {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisBloomDupeFilter",
        "DEDUP_BLOOM_CAPACITY": 100_000,
        "DEDUP_REDIS_URL": outage_redis.url,
        "DEDUP_CONTENT_BACKEND": "redis",
        "DEDUP_REDIS_ON_ERROR": "fail_open",
        "DUPEFILTER_DEBUG": True,
        "CONCURRENT_REQUESTS": 2,
    }
    password = outage_redis.password
    assert quote(password, safe="") in outage_redis.url  # escaped, as a password with '/', '#', '?' must be
    with LocalSite(linked) as site:
        crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")], on_response=outage)
    logged = everything_logged(caplog)
    stats = crawler.stats.get_stats()
    assert stats["dedup/redis/errors"] >= 1  # the outage happened and was logged
    assert "redis://:***@127.0.0.1" in logged  # the server is named, masked
    assert leaks(logged, password) == []  # nor any piece of it
    assert leaks(repr(stats), password) == []
    print(f"\n[reliability] password crawl ({password!r}): {len(caplog.records)} log records, {len(logged)} "
          f"characters, password and its pieces found 0 times; stats {len(stats)} values, 0 times; "
          f"redis errors={stats['dedup/redis/errors']}")
    assert not [p for p in linked.paths if not site.hits[("site.test", p)]]  # and nothing was lost

    # Every script Redis holds now is one of the package's constant scripts (nothing built from data).
    client = outage_redis.client()
    constants = {hashlib.sha1(text.encode()).hexdigest() for text in lua_constants().values()}
    cached = client.info("memory")["number_of_cached_scripts"]
    assert cached >= 1  # the content index's script was loaded (again) after the restart (the seen sets use none)
    assert sum(client.script_exists(*constants)) == cached
    client.close()


@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_a_wrong_password_for_the_content_index_alone_stops_the_start_up(password_redis, caplog):
    """Only the content index in Redis (the dupefilter stays local): refused credentials still fail at start."""
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-Pa55-" + PASSWORD[::-1]
    url = f"redis://:{wrong}@127.0.0.1:{password_redis.port}/0"
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": url}
    with LocalSite(LinkedSite(pages=3, near=0)) as site:
        with pytest.raises(RedisStartupError) as info:
            yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
        assert not site.hits
    message = str(info.value)
    assert "content index" in message and "redis://:***@127.0.0.1" in message
    for secret in (wrong, PASSWORD):
        assert secret not in message
        assert secret not in everything_logged(caplog)


@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_a_wrong_password_stops_the_start_up_with_a_clear_error_without_the_password(password_redis, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-Pa55-" + PASSWORD[::-1]
    url = f"redis://:{wrong}@127.0.0.1:{password_redis.port}/0"
    settings = {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "DEDUP_REDIS_URL": url,
                "DEDUP_REDIS_RETRY_SECONDS": 60}
    with LocalSite(LinkedSite(pages=3, near=0)) as site:
        with pytest.raises(Exception) as info:
            yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
        assert not site.hits  # nothing was crawled
    message = str(refusal_in(info.value))
    assert "AuthenticationError" in message and "redis://:***@127.0.0.1" in message
    assert "DEDUP_REDIS_URL" in message
    for secret in (wrong, PASSWORD):
        assert secret not in message
        assert secret not in everything_logged(caplog)


@pytest.fixture
def tricky_redis(redis_server):
    # with AOF: the restart in the middle of the crawl keeps the crawl's keys (a restart that loses them ends
    # the crawl as dedup_redis_data_lost, tests/test_reliability_queue.py), so the whole crawl runs
    server = RedisServer(password=TRICKY, extra_args=("--appendonly", "yes", "--appendfsync", "always")).start()
    yield server
    server.stop()


def _crawl_in_a_process(tmp_path: Path, name: str, url: str, settings: dict, *, during=None) -> tuple:
    """``python -m tests.faultcrawl`` with ``DEDUP_REDIS_URL = url`` at DEBUG; its whole output (the Scrapy
    log and anything else on stdout and stderr) and exit code. ``during(proc, site)`` runs while it crawls."""
    from tests.faultcrawl import ResumeSite
    from tests.test_fault_resume import CrawlProcess

    design = ResumeSite(lists=6, per_list=4, delay=0.02)
    with LocalSite(design.route) as site:
        settings = {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "DEDUP_CONTENT_BACKEND": "redis",
                    "DEDUP_REDIS_URL": url, "LOG_LEVEL": "DEBUG", "DUPEFILTER_DEBUG": True, **settings}
        directory = tmp_path / name
        directory.mkdir()
        proc = CrawlProcess(directory, name, site.url("127.0.0.1", "/"), settings).start()
        if during is not None:
            during(proc, site)
        code = proc.wait(120)
        hits = len(site.hits)  # distinct pages fetched
    return proc, code, proc.log_text(), hits


@pytest.mark.redis
@pytest.mark.crawl
def test_a_password_with_url_delimiters_never_reaches_the_output_of_a_crawl_process(tricky_redis, tmp_path):
    """Real Scrapy processes against a redis-server whose password has '/', '#', '?', '@' and ':' in it.

    (a) the correct, percent-escaped URL, for the dupefilter, the content index, scrapy-redis's scheduler
        and AckPriorityQueue, with the server killed mid-crawl and restarted (so redis-py's error texts are
        logged by each of them); (b) the same URL unescaped; (c) the escaped URL with a typo,
        ``redis//:...``. (b) and (c) stop at start-up naming DEDUP_REDIS_URL, fetching nothing. The whole
        output of every process shows neither the password nor any piece of it of 3 characters or more.
    """
    import time

    from tests.test_fault_resume import wait_for_hits

    escaped = quote(TRICKY, safe="")
    port = tricky_redis.port
    good = f"redis://:{escaped}@127.0.0.1:{port}/0"
    assert good == tricky_redis.url

    def outage(proc, site):
        wait_for_hits(site, 8, proc)
        tricky_redis.proc.kill()
        tricky_redis.proc.wait()
        time.sleep(1.5)  # the queue's heartbeat, pops and acknowledgements, the filter and the index all fail
        tricky_redis.start()

    queue = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "SCHEDULER_PERSIST": True, "REDIS_URL": good,
             "SCHEDULER_QUEUE_CLASS": "scrapy_dedup.redis_queue.AckPriorityQueue",
             "DEDUP_REDIS_ON_ERROR": "fail_open", "CONCURRENT_REQUESTS": 2}
    proc, code, log, hits = _crawl_in_a_process(tmp_path, "escaped", good, queue, during=outage)
    assert code == 0, log[-3000:]
    assert proc.stats()["finish_reason"] == "finished"
    # every page: the queue never answered "empty" while Redis was away (it used to, with the last count it
    # had read, which missed the requests the one-step push had queued since: 9 of 31 pages, "finished")
    assert hits == 31, hits  # every page of the 31-page site
    assert "redis://:***@127.0.0.1" in log  # the server is named, masked
    assert "unavailable" in log and "Connection refused" in log  # redis-py's error texts were logged
    assert leaks(log, TRICKY) == [], [line for line in log.splitlines() if leaks(line, TRICKY)][:5]
    print(f"\n[reliability] escaped URL: {hits} pages, {len(log.splitlines())} lines of output, "
          f"{sum('ERROR' in line for line in log.splitlines())} ERROR lines; password pieces found 0 times")

    for name, url in (("unescaped", f"redis://:{TRICKY}@127.0.0.1:{port}/0"),
                      ("typo", f"redis//:{escaped}@127.0.0.1:{port}/0")):
        proc, code, log, hits = _crawl_in_a_process(tmp_path, name, url, {})
        assert hits == 0, log[-3000:]  # nothing was crawled
        errors = [line for line in log.splitlines() if "DedupConfigError" in line]
        assert errors and "DEDUP_REDIS_URL" in errors[-1], log[-3000:]
        assert "***@127.0.0.1" in errors[-1]
        assert leaks(log, TRICKY) == [], [line for line in log.splitlines() if leaks(line, TRICKY)][:5]
        print(f"[reliability] {name} URL: exit code {code}, {len(log.splitlines())} lines of output, "
              f"password pieces found 0 times; {errors[-1].strip()[:160]}")


def test_config_errors_mask_the_password():
    for url in (f"http://user:{PASSWORD}@host:6379/0", f"redis+tcp://:{PASSWORD}@host/0",
                f"ftp://host/0?password={PASSWORD}"):
        with pytest.raises(DedupConfigError) as info:
            read_settings({"DEDUP_REDIS_URL": url})
        assert "DEDUP_REDIS_URL" in str(info.value) and PASSWORD not in str(info.value)


def fragments(password: str, minimum: int = 3) -> set[str]:
    """The password, its percent-escaped and -decoded forms, and every ``/#?@:``-separated piece of
    ``minimum`` characters or more: none of them may be shown."""
    import re
    from urllib.parse import quote, unquote

    found = {password, unquote(password)}
    if len(password) >= minimum:
        found.add(quote(password, safe=""))
    for form in set(found):
        found.update(re.split(r"[/#?@:]", form))
    return {f for f in found if len(f) >= minimum}


@functools.lru_cache(maxsize=None)
def _fixed_texts() -> str:
    """The fixed words of every message validate_url can give (made with neutral URLs)."""
    from scrapy_dedup._util.redis_conn import validate_url

    texts = []
    for bad in (None, "", "http://h", "redis//h", "redis://h\n", "redis://h/0?x=@", "redis://h/0#",
                "redis://h:x/0", "redis://[h/0"):
        try:
            validate_url(bad)
        except ValueError as exc:
            texts.append(str(exc))
    return "\n".join(texts)


def leaks(text: str, password: str, template: str = "") -> list[str]:
    """The pieces of ``password`` that ``text`` shows (pieces that are part of the URL around it, the
    host or the scheme, say, of the mask itself, or of a message's fixed words, do not count)."""
    shown_anyway = template + "***" + _fixed_texts()
    return sorted(f for f in fragments(password) if f in text and f not in shown_anyway)


def test_typo_and_unescaped_urls_never_put_the_password_in_a_configuration_error():
    """The tester's cases: a missing colon (``redis//``), a password with unescaped ``/#?``."""
    from urllib.parse import quote

    escaped = quote(TRICKY, safe="")
    for url in (f"redis//:{TRICKY}@127.0.0.1:6379/0", f"redis//:{escaped}@127.0.0.1:6379/0",
                f"redis:/:{escaped}@127.0.0.1:6379/0", f"redis:{escaped}@127.0.0.1",
                f"redis://:{TRICKY}@127.0.0.1:6379/0", f"redis://user:{TRICKY}@127.0.0.1:6379/0",
                f"rediss://{TRICKY}@127.0.0.1/0", f"unix://:{TRICKY}@/run/redis.sock?db=0",
                f"redis://:{escaped}\n@127.0.0.1:6379/0", f"redis://:{TRICKY[:4]}\uff20{escaped}@127.0.0.1/0",
                f"REDIS://:{escaped}@127.0.0.1/0", f"http://:{escaped}@127.0.0.1/0".encode()):
        with pytest.raises(DedupConfigError) as info:
            read_settings({"DEDUP_REDIS_URL": url})
        message = str(info.value)
        assert message.startswith("DEDUP_REDIS_URL"), message
        assert leaks(message, TRICKY) == [], message
    # where the typo is, the message says so, and it shows the rest of the URL
    with pytest.raises(DedupConfigError) as info:
        read_settings({"DEDUP_REDIS_URL": f"redis//:{escaped}@127.0.0.1:6379/0"})
    assert "'redis//:***@127.0.0.1:6379/0'" in str(info.value) and "followed by '://'" in str(info.value)
    with pytest.raises(DedupConfigError) as info:
        read_settings({"DEDUP_REDIS_URL": f"redis://:{TRICKY}@127.0.0.1:6379/0"})
    assert "'redis://:***@127.0.0.1:6379/0'" in str(info.value) and "percent-escaped" in str(info.value)
    # the same password escaped is accepted, and redis-py reads it whole
    from redis.connection import parse_url

    url = read_settings({"DEDUP_REDIS_URL": f"redis://:{escaped}@127.0.0.1:6379/0"}).redis_url
    assert parse_url(url)["password"] == TRICKY


def test_redis_params_that_are_not_json_and_the_settings_repr_hide_the_password():
    broken = '{"password": "%s", "socket_timeout": ' % TRICKY
    with pytest.raises(DedupConfigError) as info:
        read_settings({"DEDUP_REDIS_PARAMS": broken})
    assert "DEDUP_REDIS_PARAMS" in str(info.value) and leaks(str(info.value), TRICKY) == []
    from urllib.parse import quote

    cfg = read_settings({"DEDUP_REDIS_URL": f"redis://:{quote(TRICKY, safe='')}@127.0.0.1/0",
                         "DEDUP_REDIS_PARAMS": {"ssl_password": TRICKY, "socket_timeout": 5}})
    assert "redis://:***@127.0.0.1/0" in repr(cfg) and leaks(repr(cfg), TRICKY) == []


# --- generated passwords in every URL shape ----------------------------------------------------------

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

HOST = "db.example"
#: (template, where the password is: "userinfo" (redis-py reads it as the password), "bare" (the whole
#: userinfo, masked as a secret), "query", or "typo" (refused))
URL_SHAPES = [
    ("redis://:{p}@db.example:6390/0", "userinfo"),
    ("redis://user:{p}@db.example:6390/0", "userinfo"),
    ("rediss://:{p}@db.example:6390/0", "userinfo"),
    ("rediss://user:{p}@db.example/0?ssl_cert_reqs=none", "userinfo"),
    ("unix://:{p}@/run/redis.sock?db=0", "userinfo"),
    ("unix://user:{p}@/run/redis.sock", "userinfo"),
    ("redis://{p}@db.example:6390/0", "bare"),
    ("unix://{p}@/run/redis.sock", "bare"),
    ("redis://db.example:6390/0?password={p}", "query"),
    ("rediss://db.example/0?ssl_cert_reqs=none&password={p}&db=1", "query"),
    ("unix:///run/redis.sock?db=0&password={p}", "query"),
    ("redis//:{p}@db.example:6390/0", "typo"),
    ("redis//user:{p}@db.example:6390/0", "typo"),
    ("redis:/:{p}@db.example:6390/0", "typo"),
    ("redis::{p}@db.example:6390/0", "typo"),
    ("redis:user:{p}@db.example", "typo"),
    ("redis:{p}@db.example", "typo"),
    ("//:{p}@db.example:6390/0", "typo"),
    ("Redis://:{p}@db.example/0", "typo"),
]
DELIMITERS = "/#?@:%&=+;[] \t\n"
passwords = st.text(
    st.one_of(st.sampled_from(DELIMITERS),  # often: the characters that cut URLs
              st.characters(min_codepoint=0x20, max_codepoint=0x7e),  # printable ASCII
              st.sampled_from("\x0b\x0c\r"),  # the rest of string.printable
              st.characters(min_codepoint=0xa0, blacklist_categories=("Cs",))),  # non-ASCII (＠, ／, é, ...)
    min_size=1, max_size=24)


def _shaped(template: str, kind: str, password: str, escaped: bool) -> str | None:
    from urllib.parse import quote

    written = quote(password, safe="") if escaped else password
    if not escaped and ":" in password and kind == "bare":
        return None  # "a:b@host" is user "a" and password "b" to redis-py: a user name, shown by design
    if not escaped and kind == "query" and ("&" in password or "+" in password):
        return None  # in a query '&' separates parameters and '+' is a space: a raw one is no longer the password
    return template.replace("{p}", written)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(password=passwords, shape=st.sampled_from(URL_SHAPES), escaped=st.booleans())
@example(password="pa/ss#wo?rd", shape=URL_SHAPES[0], escaped=False)  # the tester's example
@example(password="pa/ss#wo?rd", shape=URL_SHAPES[11], escaped=False)
@example(password="abc\uff20def/ghi", shape=URL_SHAPES[1], escaped=False)  # FULLWIDTH COMMERCIAL AT
@example(password="abc\ndef:ghi", shape=URL_SHAPES[0], escaped=False)  # urllib drops the newline
def test_mask_url_and_validate_url_never_show_a_generated_password(password, shape, escaped):
    """mask_url hides the password in any shape, malformed too; validate_url accepts a URL only where
    redis-py reads exactly the password written (and the host), and its refusals show no piece of it."""
    from urllib.parse import unquote

    from redis.connection import parse_url

    from scrapy_dedup._util.redis_conn import mask_url, validate_url

    template, kind = shape
    url = _shaped(template, kind, password, escaped)
    if url is None:
        return
    around = template.replace("{p}", "")
    masked = mask_url(url)
    assert leaks(masked, password, around) == [], masked
    assert "***" in masked
    try:
        validate_url(url)
    except ValueError as exc:
        assert leaks(str(exc), password, around) == [], str(exc)
        assert kind == "typo" or not escaped, f"an escaped password was refused: {exc}"
        return
    assert kind != "typo"
    # Accepted: redis-py reads what was written (a raw '%41' in a password means 'A' in a URL).
    meant = unquote(password) if not escaped else password
    parsed = parse_url(url)
    if kind == "userinfo":
        assert parsed.get("password") == meant
    elif kind == "bare":  # redis-py sends it as the user name; masked all the same (other clients read a password)
        assert parsed.get("username") == meant and "password" not in parsed
    else:
        assert parsed.get("password") == (meant if escaped else unquote(password.replace("+", " ")))
    if url.startswith("unix"):
        assert parsed.get("path") == "/run/redis.sock"
    else:
        assert parsed.get("host") == HOST


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(password=passwords, shape=st.sampled_from([s for s in URL_SHAPES if s[1] != "typo"]))
@example(password="pa/ss#wo?rd", shape=URL_SHAPES[0])
@example(password="Qx7/Zk9@Wm4", shape=URL_SHAPES[4])
def test_describe_hides_every_piece_of_a_password_redis_py_misread(password, shape):
    """An unescaped password that reaches redis-py anyway (a URL given to redis-py directly, or
    scrapy-redis's REDIS_URL): whatever redis-py makes of it - a host, a port, a socket path, a
    keyword argument, or its own error message - goes through describe() without a piece of it."""
    from redis.connection import parse_url

    from scrapy_dedup._util.redis_policy import describe, secrets_of

    template, kind = shape
    url = _shaped(template, kind, password, escaped=False)
    if url is None:
        return
    around = template.replace("{p}", "")
    secrets = secrets_of(url)
    try:
        parsed = parse_url(url)
    except Exception as exc:  # redis-py's own message, e.g. "Port could not be cast to integer value as 'pa'"
        shown = describe(exc, secrets)
        assert leaks(shown, password, around) == [], shown
        return
    # what redis-py's messages print from a parsed URL: "Error -2 connecting to {host}:{port}.",
    # "Error 2 connecting to unix socket: {path}.", "unexpected keyword argument '{name}'"
    standard = {"host", "port", "db", "username", "password", "path", "connection_class"}
    printed = {str(v) for v in parsed.values() if isinstance(v, (str, int))} | (set(parsed) - standard)
    text = (f"Error -2 connecting to {parsed.get('host')}:{parsed.get('port', 6379)}. Error 2 connecting to "
            f"unix socket: {parsed.get('path')}. __init__() got an unexpected keyword argument {sorted(parsed)}")
    shown = describe(ConnectionError(text), secrets)
    assert leaks(shown, password, around) == [], shown
    # a short piece redis-py printed alone (a 2-letter "host" cut from the password) is hidden too
    for value in printed:
        if value and value in password and value not in around and any(c.isalnum() for c in value):
            said = describe(ConnectionError(f"connecting to '{value}'"), secrets)
            assert f"'{value}'".lower() not in said.lower(), said


@pytest.mark.redis
def test_a_redis_py_error_about_a_misread_password_is_logged_without_any_piece_of_it(redis_server, caplog):
    """A real redis-py client built from an unescaped URL (bypassing validate_url, as a URL handed to
    redis-py directly would): redis-py takes what follows the '/' for the socket path, and its
    connection error names that path; the policy's ERROR line must not show it."""
    import redis

    from scrapy_dedup._util.redis_policy import RedisErrorPolicy, RedisUnavailable, secrets_of

    caplog.set_level(logging.DEBUG)
    password = "pw/Hidden-Part-42@Second-Part-17"
    url = f"unix://:{password}@/nonexistent-dir/redis.sock"
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    policy = RedisErrorPolicy("fail_open", name="test", url=url, secrets=secrets_of(url))
    with pytest.raises(RedisUnavailable) as info:
        policy.call(client.ping)
    logged = everything_logged(caplog) + "\n" + str(info.value)
    assert "connecting to /***@***@/nonexistent-dir/redis.sock" in logged  # redis-py's own text, masked
    assert leaks(logged, password, "unix://@/nonexistent-dir/redis.sock") == [], logged
    client.close()


# --- TLS --------------------------------------------------------------------------------------------

def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1/localhost signed by it (valid for one day)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def build(subject, issuer, public_key, signing_key, *, ca: bool, san=None):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "scrapy-dedup test CA")])
    ca_cert = build(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = build(name, ca_name, key.public_key(), ca_key, ca=False,
                 san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    paths = {"ca": directory / "ca.crt", "cert": directory / "server.crt", "key": directory / "server.key"}
    paths["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return paths


@pytest.fixture
def tls_redis(redis_server, tmp_path):
    certs = make_certificates(tmp_path)
    tls_port = free_port()
    server = RedisServer(extra_args=("--tls-port", str(tls_port), "--tls-cert-file", str(certs["cert"]),
                                     "--tls-key-file", str(certs["key"]), "--tls-ca-cert-file", str(certs["ca"]),
                                     "--tls-auth-clients", "no")).start()
    server.tls_url = f"rediss://127.0.0.1:{tls_port}/0"
    server.ca = str(certs["ca"])
    yield server
    server.stop()


@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_rediss_crawl_against_a_tls_redis_server(tls_redis):
    linked = LinkedSite(pages=12, near=3)
    settings = {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter",
        "DEDUP_REDIS_URL": tls_redis.tls_url,
        "DEDUP_REDIS_PARAMS": {"ssl_ca_certs": tls_redis.ca},
        "DEDUP_CONTENT_BACKEND": "redis",
    }
    with LocalSite(linked) as site:
        crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
    hits = Counter(path for _, path in site.fetched())
    assert {p: hits[p] for p in linked.paths if hits[p] != 1} == {}
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert "dedup/content/store_errors" not in crawler.stats.get_stats()
    # the data went over TLS into this server (read back on its plain port)
    plain = tls_redis.client()
    assert plain.scard("dedup:linked:seen") == crawler.stats.get_value("dedup/seen/new")
    assert plain.keys("{dedup:linked:content}*")
    plain.close()


@pytest.mark.redis
def test_rediss_url_query_form_and_an_unverified_certificate(tls_redis):
    from scrapy_dedup._util.redis_conn import connect
    from scrapy_dedup._util.redis_policy import is_transient
    from scrapy_dedup.seen.redis import RedisSeenSet

    client = connect(f"{tls_redis.tls_url}?ssl_ca_certs={tls_redis.ca}")
    seen = RedisSeenSet(client, "tls:q")
    assert seen.add(b"x" * 20) is True and seen.add(b"x" * 20) is False
    client.close()
    # without the CA the server's certificate does not verify: a configuration error, never retried
    import redis

    untrusted = connect(tls_redis.tls_url)
    with pytest.raises(redis.exceptions.ConnectionError) as info:
        untrusted.ping()
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    assert not is_transient(info.value)
    untrusted.close()


@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_rediss_without_the_ca_fails_at_start_up_at_once(tls_redis):
    settings = {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "DEDUP_REDIS_URL": tls_redis.tls_url,
                "DEDUP_REDIS_RETRY_SECONDS": 600}  # were it retried, the test would time out
    with LocalSite(LinkedSite(pages=3, near=0)) as site:
        with pytest.raises(Exception) as info:
            yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
    message = str(refusal_in(info.value))
    assert "CERTIFICATE_VERIFY_FAILED" in message and "rediss://127.0.0.1" in message


# --- Lua scripts ------------------------------------------------------------------------------------

SCRIPT_CALLS = {"register_script", "eval", "evalsha", "script_load", "eval_ro", "evalsha_ro", "fcall"}
#: the same commands sent raw, ``execute_command("EVAL", script, ...)`` (a pipeline's way to run a script)
RAW_SCRIPT_COMMANDS = {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"}


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def script_sources() -> list[tuple[str, list[ast.expr], dict[str, ast.expr]]]:
    """Every call in the package that hands a script to Redis (its arguments from the script on), with its
    module's top-level assignments. Raw ``execute_command("EVAL", ...)`` calls count too."""
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        constants = _module_constants(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            where = f"{path.relative_to(PACKAGE)}:{node.lineno}"
            if node.func.attr in SCRIPT_CALLS:
                calls.append((where, list(node.args), constants))
            elif (node.func.attr == "execute_command" and node.args and isinstance(node.args[0], ast.Constant)
                  and str(node.args[0].value).upper() in RAW_SCRIPT_COMMANDS):
                calls.append((where, list(node.args[1:]), constants))
    return calls


def _is_static(expr: ast.expr, constants: dict[str, ast.expr], depth: int = 0) -> bool:
    """An expression fixed when the module is imported: literals, other such module constants, and
    str/repr/replace/format/concatenation of those (never a function's parameter, a call to I/O, ...)."""
    if depth > 20:
        return False
    again = lambda e: _is_static(e, constants, depth + 1)  # noqa: E731
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in constants and again(constants[expr.id])
    if isinstance(expr, ast.BinOp):
        return again(expr.left) and again(expr.right)
    if isinstance(expr, ast.JoinedStr):
        return all(again(v.value if isinstance(v, ast.FormattedValue) else v) for v in expr.values)
    if isinstance(expr, ast.Call) and not expr.keywords and all(again(a) for a in expr.args):
        func = expr.func
        if isinstance(func, ast.Name) and func.id in ("str", "repr", "int"):
            return True
        if isinstance(func, ast.Attribute) and func.attr in ("replace", "format", "strip") and again(func.value):
            return True
    return False


def lua_constants() -> dict[str, str]:
    """name -> Lua text of every script the package hands to Redis.

    Each must be a module-level name whose value is fixed at import time; the text is read from the
    imported module (so a constant substituted into it, like a maximum id, is included)."""
    import importlib

    texts = {}
    for where, args, constants in script_sources():
        assert args, f"{where}: script passed by keyword"
        arg = args[0]
        assert isinstance(arg, ast.Name), f"{where}: the script must be a module constant, got {ast.dump(arg)}"
        assert arg.id in constants and _is_static(constants[arg.id], constants), (
            f"{where}: {arg.id} must be a module-level constant fixed at import time")
        module = "scrapy_dedup." + where.split(":")[0][:-3].replace("/", ".")
        text = getattr(importlib.import_module(module), arg.id)
        assert isinstance(text, str)
        texts[arg.id] = text
    return texts


def test_lua_scripts_are_constants_and_take_data_only_through_keys_and_argv():
    texts = lua_constants()
    print(f"\n[reliability] Lua: {len(script_sources())} script call sites, {len(texts)} scripts: {sorted(texts)}")
    # the content index's check-and-add, at least (the seen sets send plain SADD / BITFIELD commands)
    assert "LUA_CHECK_AND_ADD" in texts
    for name, text in texts.items():
        assert "KEYS[" in text, f"{name} touches no key given by the caller"
        for forbidden in ("loadstring", "load(", "dofile", "setfenv", "getfenv"):
            assert forbidden not in text, f"{name} uses {forbidden}"
        # keys are computed by the caller and passed in KEYS (for Redis Cluster, and so no key name is built
        # from data inside the script): no concatenation in any redis.call line
        calls = [line.strip() for line in text.splitlines() if "redis.call(" in line or "redis.pcall(" in line]
        assert [line for line in calls if ".." in line] == [], name


def test_the_script_scan_would_catch_a_script_built_from_data():
    """The scanner itself: EVAL source built from data, or from anything not fixed at import, is refused."""
    module = ast.parse("MAX = 5\nOK = 'return 1'.replace('1', str(MAX))\nBAD = open('x').read()\n"
                       "def f(client, x):\n    client.eval('return ' + x, 0)\n")
    constants = _module_constants(module)
    assert _is_static(constants["OK"], constants)
    assert not _is_static(constants["BAD"], constants)
    call = next(n for n in ast.walk(module) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "eval")
    assert not isinstance(call.args[0], ast.Name)  # what lua_constants() asserts against


# --- files and the umask ----------------------------------------------------------------------------

@pytest.fixture(params=[0o022, 0o077], ids=["umask022", "umask077"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def modes_under(directory: Path, exclude: set[Path]) -> dict[str, int]:
    return {str(p.relative_to(directory)): stat.S_IMODE(p.stat().st_mode)
            for p in sorted(directory.rglob("*")) if p.is_file() and p not in exclude}


@pytest.mark.crawl
@inlineCallbacks
def test_every_file_the_suite_writes_follows_the_umask(umask, tmp_path, capsys):
    from scrapy_dedup.cli import main
    from scrapy_dedup.seen.bloom import BloomSeenSet

    out = tmp_path / "out"
    out.mkdir()
    jobdir = out / "job"
    linked = LinkedSite(pages=12, near=3)
    server = RedisServer().start()
    settings = {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "JOBDIR": str(jobdir),
        # a Redis that goes away at the first page and stays away, fail_open: the unconfirmed fingerprints go to
        # JOBDIR (unreachable at start, the crawl would not start)
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter",
        "DEDUP_REDIS_URL": server.url,
        "DEDUP_REDIS_ON_ERROR": "fail_open",
        "DEDUP_AUDIT_FILE": str(out / "audit" / "near.jsonl"),
        "DEDUP_LOG_FILE": str(out / "crawl-log.jsonl"),
    }
    with LocalSite(linked) as site:
        try:
            crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")],
                                      on_response=lambda spider, response: server.stop())
        finally:
            server.stop()
        # the content index checkpoint: a crawl whose seen set is local (with a Redis one, the add-on puts the
        # content index in Redis too)
        yield run_crawl(LinkedSpider, {"ADDONS": {"scrapy_dedup.Addon": 0}, "JOBDIR": str(out / "local-job")},
                        start_urls=[site.url("site.test")])
    assert crawler.stats.get_value("dedup/redis/fail_open") >= len(linked.paths)
    BloomSeenSet(1000, 1e-3).save(out / "seen.bloom")
    assert main(["mine-dust", str(out / "crawl-log.jsonl"), "-o", str(out / "rules.json")]) == 0
    dump = tmp_path / "dump.jsonl"  # an input, outside `out`
    dump.write_text("".join(json.dumps({"url": f"https://x.test/{p}", "html": f"<p>{linked.texts[p]}</p>"}) + "\n"
                            for p in linked.paths))
    assert main(["report", str(dump), "--html", str(out / "report.html"), "--clusters", str(out / "c.jsonl"),
                 "--pairs", str(out / "pairs.jsonl")]) == 0
    capsys.readouterr()

    modes = modes_under(out, exclude=set())
    for name in ("job/redis-unconfirmed.fps", "local-job/dedup-content.idx", "audit/near.jsonl", "crawl-log.jsonl",
                 "seen.bloom", "rules.json", "report.html", "c.jsonl", "pairs.jsonl"):
        assert name in modes, f"{name} was not written: {sorted(modes)}"
    allowed = 0o666 & ~umask
    print(f"\n[reliability] umask {umask:03o}: " + ", ".join(f"{n}={m:03o}" for n, m in modes.items()))
    assert {n: oct(m) for n, m in modes.items() if m & stat.S_IWOTH} == {}  # never world-writable
    assert {n: oct(m) for n, m in modes.items() if m & ~allowed} == {}  # never more than the umask allows
    # the user's umask decides (a checkpoint the user's group may read when the umask says so)
    assert {n: oct(m) for n, m in modes.items() if m != allowed} == {}


def test_content_index_checkpoint_follows_a_permissive_umask(tmp_path):
    from scrapy_dedup.content.engine import MemoryContentStore

    old = os.umask(0o022)
    try:
        MemoryContentStore().save(tmp_path / "content.idx")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "content.idx").stat().st_mode) == 0o644


# --- the HTML report ----------------------------------------------------------------------------------

def test_html_report_escapes_page_content_without_a_browser(tmp_path, capsys):
    """Parse the audit page: the dump's markup appears only as text, never as elements or attributes."""
    from lxml import html as lxml_html

    from scrapy_dedup.cli import main
    from tests.test_report_html_browser import hostile_dump, payloads

    base = "http://attacker.test"
    dump = hostile_dump(tmp_path, base)
    page = tmp_path / "audit.html"
    assert main(["report", str(dump), "--html", str(page), "--sample", "100"]) == 0
    capsys.readouterr()
    source = page.read_text(encoding="utf-8")
    tree = lxml_html.fromstring(source)
    assert tree.xpath("//script | //iframe | //img | //link | //object | //embed | //base | //form") == []
    # one meta http-equiv: the page's own Content-Security-Policy (no refresh from the dump)
    metas = tree.xpath("//meta[@http-equiv]")
    assert [m.get("http-equiv").lower() for m in metas] == ["content-security-policy"]
    assert "default-src 'none'" in metas[0].get("content")
    assert [el.tag for el in tree.iter() if isinstance(el.tag, str)
            for attr in el.attrib if attr.lower().startswith("on")] == []
    assert "attacker.test" not in " ".join(v for el in tree.iter() if isinstance(el.tag, str)
                                           for v in el.attrib.values())
    text = tree.text_content()
    shown = [p for p in payloads(base) if p in text]
    assert shown, "the payloads should be shown as text"
    for payload in payloads(base):
        assert payload not in source or "<" not in payload  # never verbatim markup in the source
