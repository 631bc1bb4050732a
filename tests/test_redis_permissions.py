"""Permissions and TLS are checked when the Redis dupefilters start, not met as outages mid-crawl.

A real redis-server with ACL users (``ACL SETUSER``) lacking one command or restricted to a
key pattern, and a real redis-server with a TLS port (a self-signed certificate made by
openssl here). Each missing permission is refused at start in one ERROR line naming it;
a plain ``redis://`` URL to the TLS port is a start-up error under either outage policy;
``ssl_cert_reqs=none`` is one WARNING.
"""
from __future__ import annotations

import logging
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import Any
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
import pytest_twisted
import scrapy
from scrapy.http import Request

from scrapy_dedup._util.redis_conn import connect
from scrapy_dedup.dupefilters import RedisStartupError
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.support.redis_server import RedisServer, free_port
from tests.test_dupefilters import get_dupefilter

pytestmark = pytest.mark.redis

KEY = "dedup:acl:seen"
FILTERS = {"set": "scrapy_dedup.RedisDupeFilter", "bloom": "scrapy_dedup.RedisBloomDupeFilter"}


@contextmanager
def acl_users(nodes: list, url_of: Callable[[str, str], str]) -> Iterator[Callable[..., str]]:
    """A function rules -> the URL of a new ACL user with those rules on every one of ``nodes`` (ACLs are per
    node); the users are deleted afterwards."""
    made = []

    def make(*rules: str) -> str:
        name, password = f"crawler{secrets.token_hex(3)}", secrets.token_hex(8)
        for node in nodes:
            node.execute_command("ACL", "SETUSER", name, "reset", "on", f">{password}", *rules)
        made.append(name)
        return url_of(name, password)

    try:
        yield make
    finally:
        for node in nodes:
            for name in made:
                node.execute_command("ACL", "DELUSER", name)


@pytest.fixture
def acl_user(redis_url, redis_client):
    """Make an ACL user with the given rules; yields a function rules -> the user's URL."""
    parts = urlsplit(redis_url)
    with acl_users([redis_client], lambda name, password: f"redis://{name}:{password}@{parts.hostname}:"
                                                          f"{parts.port}/0") as make:
        yield make


def start_filter(kind: str, url: str, **settings):
    return get_dupefilter(settings={"DUPEFILTER_CLASS": FILTERS[kind], "DEDUP_REDIS_URL": url,
                                    "DEDUP_REDIS_KEY": KEY, "DEDUP_BLOOM_CAPACITY": 10_000, **settings})


def crawl_refused_or_not(spider: type, settings: dict, site: LocalSite) -> Any:
    """``run_crawl`` from ``site``'s ``acl.test/``; a start refused by scrapy-dedup (``RedisStartupError``: Scrapy's own
    lines follow ours) is an outcome like a crawl, which the test reads in the log and the site's hits."""
    return run_crawl(spider, settings, start_urls=[site.url("acl.test", "/")]).addErrback(
        lambda failure: failure.trap(RedisStartupError) and None)


def refusal(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


#: (filter, ACL rules of a user missing one thing, what the refusal must name)
MISSING = [
    ("set", ("~*", "+@all", "-sadd"), "SADD on key 'dedup:acl:seen:probe'"),
    ("bloom", ("~*", "+@all", "-bitfield"), "BITFIELD on key '{dedup:acl:seen:0:probe}'"),
    ("set", ("~*", "+@all", "-scard"), "SCARD on key 'dedup:acl:seen'"),
    ("set", ("~other:*", "+@all"), "on key 'dedup:acl:seen"),
    ("bloom", ("~other:*", "+@all"), "on key 'dedup:acl:seen"),
    ("set", ("~dedup:acl:seen", "+@all"), "SET on key 'dedup:acl:seen:generation:probe'"),
]


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.parametrize("kind,rules,named", MISSING, ids=[f"{k}-{' '.join(r)}" for k, r, _ in MISSING])
def test_a_missing_permission_is_refused_at_start_in_one_line(acl_user, caplog, kind, rules, named, mode):
    url = acl_user(*rules)
    with caplog.at_level(logging.INFO), pytest.raises(RedisStartupError) as info:
        start_filter(kind, url, DEDUP_REDIS_ON_ERROR=mode)
    lines = refusal(caplog)
    assert len(lines) == 1 and lines[0] == str(info.value), lines
    assert named in lines[0] and "may not run" in lines[0] and "permission" in lines[0]
    assert "unavailable" not in lines[0]
    assert "\n" not in lines[0] and url.split("@")[0].split(":")[-1] not in lines[0]  # no password


@pytest.mark.parametrize("kind", list(FILTERS))
def test_a_user_granted_what_the_crawl_needs_starts_and_leaves_no_probe_key(acl_user, redis_client, kind):
    url = acl_user("~dedup:acl:*", "~{dedup:acl:*", "+@all")  # (the Bloom filter's shards: {KEY:<i>})
    df = start_filter(kind, url)
    assert df.request_seen(Request("http://a.test/1")) is False
    assert df.request_seen(Request("http://a.test/1")) is True
    df.close("finished")
    assert [k for k in redis_client.keys("*") if b"probe" in k] == []


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """A redis-server with a plain port and a TLS port (self-signed certificate)."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test's certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "server.crt", where / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    tls_port = free_port()
    server = RedisServer(extra_args=("--tls-port", str(tls_port), "--tls-cert-file", str(cert),
                                     "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
                                     "--tls-auth-clients", "no")).start()
    yield tls_port, cert
    server.stop()


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.parametrize("kind", list(FILTERS))
def test_a_plain_url_to_a_tls_port_is_a_start_up_error(tls_server, caplog, kind, mode):
    tls_port, _ = tls_server
    with caplog.at_level(logging.INFO), pytest.raises(RedisStartupError, match="speaks TLS.*rediss://"):
        start_filter(kind, f"redis://127.0.0.1:{tls_port}/0", DEDUP_REDIS_ON_ERROR=mode)
    assert len(refusal(caplog)) == 1


def test_switching_certificate_checks_off_is_one_warning(tls_server, caplog):
    tls_port, _ = tls_server
    url = f"rediss://127.0.0.1:{tls_port}/0"
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            client = connect(url, {"ssl_cert_reqs": "none"})
            assert client.ping()
            client.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "ssl_cert_reqs" in
                r.getMessage()]
    assert len(warnings) == 1 and "not checked" in warnings[0]


def test_checked_certificates_are_not_warned_about(tls_server, caplog):
    tls_port, cert = tls_server
    with caplog.at_level(logging.INFO):
        client = connect(f"rediss://127.0.0.1:{tls_port}/0", {"ssl_ca_certs": str(cert)})
        assert client.ping()
        client.close()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


# --- the content index in Redis: its script and the commands the script runs ---

class _OnePage(scrapy.Spider):
    name = "acl_content"

    def parse(self, response):
        yield {"url": response.url}


@pytest.mark.parametrize("rules,named", [
    (("~*", "+@all", "-evalsha"), "EVALSHA on key '{dedup:acl:index}:probe:hash'"),
    (("~*", "+@all", "-hincrby"), "HINCRBY on key '{dedup:acl:index}:probe:hash'"),
    (("~other:*", "+@all"), "on key '{dedup:acl:index}:probe:hash'"),
])
@pytest_twisted.inlineCallbacks
def test_a_content_index_user_missing_a_command_is_refused_before_any_page(acl_user, caplog, rules, named):
    url = acl_user(*rules)
    site = LocalSite({("acl.test", "/"): Page("<html><body><p>" + "word " * 50 + "</p></body></html>")})
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
                "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": url, "DEDUP_REDIS_INDEX_KEY": "dedup:acl:index"}
    with site, caplog.at_level(logging.INFO):
        yield crawl_refused_or_not(_OnePage, settings, site)
    assert sum(site.hits.values()) == 0
    lines = [line for line in refusal(caplog) if "content index: the Redis user" in line]
    assert len(lines) == 1 and named in lines[0], refusal(caplog)


@pytest_twisted.inlineCallbacks
def test_a_content_index_on_a_plain_url_to_a_tls_port_is_refused_before_any_page(tls_server, caplog):
    tls_port, _ = tls_server
    site = LocalSite({("acl.test", "/"): Page("<html><body><p>" + "word " * 50 + "</p></body></html>")})
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
                "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": f"redis://127.0.0.1:{tls_port}/0"}
    with site, caplog.at_level(logging.INFO):
        yield crawl_refused_or_not(_OnePage, settings, site)
    assert sum(site.hits.values()) == 0
    lines = [line for line in refusal(caplog) if "speaks TLS" in line]
    assert len(lines) == 1 and "rediss://" in lines[0], refusal(caplog)


# --- what the content index shares in Redis: the boilerplate tables and the paragraph seen set ---

INDEX_KEY = "dedup:acl:index"
TABLES = f"{{{INDEX_KEY}}}:boilerplate"


def _content_settings(url: str, **more) -> dict:
    return {"ADDONS": {"scrapy_dedup.Addon": 0}, "ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
            "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": url, "DEDUP_REDIS_INDEX_KEY": INDEX_KEY,
            "DEDUP_PARAGRAPHS_CAPACITY": 10_000, **more}


#: (ACL rules of a user missing one thing, settings, what the refusal must name); boilerplate learning is on
#: by default, the paragraph seen set only with DEDUP_PARAGRAPHS
SHARED_MISSING = [
    (("~*", "+@all", "-smembers"), {}, f"SMEMBERS on key '{TABLES}:probe.invalid:boilerplate:probe'"),
    (("~*", "+@all", "-hmget"), {}, f"HMGET on key '{TABLES}:probe.invalid:counts:probe'"),
    (("~*", "+@all", "-set"), {}, f"SET on key '{TABLES}:salt:probe'"),
    (("~*", "+@all", "-hmget"), {"DEDUP_CONTENT_POLICIES": {"b.test": {"boilerplate": True}},
                                 "DEDUP_BOILERPLATE": False}, "HMGET on key"),  # learnt on one host only
    (("~*", "+@all", "-bitfield"), {"DEDUP_PARAGRAPHS": True},
     f"BITFIELD on key '{{{INDEX_KEY}:paragraphs:0:probe}}'"),  # (its bits in shards, each under its own tag)
    # the index's hash tag granted, the paragraph seen set (beside it, not under it) not
    ((f"~{{{INDEX_KEY}}}:*", "+@all"), {"DEDUP_PARAGRAPHS": True}, f"on key '{INDEX_KEY}:paragraphs:"),
]


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.parametrize("rules,more,named", SHARED_MISSING,
                         ids=[" ".join(r) + (" paragraphs" if m.get("DEDUP_PARAGRAPHS") else "")
                              + (" one-host" if "DEDUP_CONTENT_POLICIES" in m else "") for r, m, _ in SHARED_MISSING])
@pytest_twisted.inlineCallbacks
def test_a_user_missing_a_boilerplate_or_paragraph_command_is_refused_before_any_page(acl_user, redis_client, caplog,
                                                                                      rules, more, named, mode):
    url = acl_user(*rules)
    site = LocalSite({("acl.test", "/"): _article(60)})
    with site, caplog.at_level(logging.INFO):
        yield crawl_refused_or_not(_Pages, _content_settings(url, DEDUP_REDIS_ON_ERROR=mode, **more), site)
    assert sum(site.hits.values()) == 0
    lines = [line for line in refusal(caplog) if "content index: the Redis user" in line]
    assert len(lines) == 1 and named in lines[0], refusal(caplog)
    assert "unavailable" not in lines[0] and "\n" not in lines[0] and urlsplit(url).password not in lines[0]
    assert [k for k in redis_client.keys("*") if b"probe" in k] == []


#: exactly what the one-slot content index, its boilerplate tables and its paragraph seen set need: their keys,
#: their commands, and DEL (without it the probe keys are left to expire)
SHARED_NEEDS = (f"~{{{INDEX_KEY}}}:*", f"~{INDEX_KEY}:paragraphs:*", f"~{{{INDEX_KEY}:paragraphs:*", "+ping", "+evalsha", "+script|load", "+hset",
                "+hget", "+hincrby", "+hlen", "+hgetall", "+hdel", "+hmget", "+incr", "+get", "+set", "+sadd",
                "+scard", "+smembers", "+bitfield", "+bitfield_ro", "+expire", "+del")


def _start_content(url: str, **more):
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    return DedupExtension(get_crawler(_Pages, _content_settings(url, DEDUP_PARAGRAPHS=True, **more))).open_content()


@pytest_twisted.inlineCallbacks
def test_a_user_granted_exactly_what_boilerplate_and_paragraphs_need_crawls_and_leaves_no_probe_key(
        acl_user, redis_client, caplog):
    url = acl_user(*SHARED_NEEDS)
    links = '<a href="/copy">c</a> <a href="/other">o</a>'
    pages = {("acl.test", "/"): _article(60, links), ("acl.test", "/copy"): _article(60),
             ("acl.test", "/other"): _article(60, stem="z")}
    with LocalSite(pages) as site, caplog.at_level(logging.INFO):
        crawler = yield run_crawl(_Pages, _content_settings(url, DEDUP_PARAGRAPHS=True),
                                  start_urls=[site.url("acl.test", "/")])
    assert len(site.hits) == 3, site.hits
    assert refusal(caplog) == [], refusal(caplog)
    stats = crawler.stats.get_stats()
    assert stats.get("dedup/content/store_errors", 0) == 0 and stats.get("dedup/paragraphs/store_errors", 0) == 0
    assert stats.get("dedup/content/redundant", 0) == 1 and stats.get("dedup/paragraphs/blocks", 0) > 0, stats
    assert int(redis_client.get(f"{TABLES}:acl.test:pages") or 0) >= 2  # the host's table written through this user
    assert [k for k in redis_client.keys("*") if b"probe" in k] == []


@pytest.mark.parametrize("grant", [g for g in SHARED_NEEDS if g not in ("+ping", "+del")])
def test_every_grant_boilerplate_and_paragraphs_need_is_probed_at_start(acl_user, redis_client, caplog, grant):
    """Each command and key pattern of SHARED_NEEDS taken away is refused when the content starts, in one line."""
    url = acl_user(*(g for g in SHARED_NEEDS if g != grant))
    with caplog.at_level(logging.INFO), pytest.raises(RedisStartupError) as info:
        _start_content(url)
    lines = refusal(caplog)
    assert len(lines) == 1 and lines[0] == str(info.value), lines
    name = grant[1:].replace("|", " ").upper()
    named = (f"{name} on key", f"{name} (") if grant.startswith("+") else (f"on key '{grant[1:].rstrip('*')}",)
    assert any(n in lines[0] for n in named), lines[0]
    assert [k for k in redis_client.keys("*") if b"probe" in k] == []


# --- deleting the content state (DEDUP_REDIS_FLUSH_ON_START, DEDUP_REDIS_PERSIST = False): SCAN, then DEL ---

DELETES = [{"DEDUP_REDIS_FLUSH_ON_START": True}, {"DEDUP_REDIS_PERSIST": False}]


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.parametrize("deletes", DELETES, ids=["flush", "not-persist"])
@pytest.mark.parametrize("rules,named", [
    ((*SHARED_NEEDS,), "SCAN (this user has no permissions to run the 'scan' command)"),  # before: the flush failed at start, or the deletion at close
    ((*(g for g in SHARED_NEEDS if g != "+del"), "+scan"), f"DEL on key '{{{INDEX_KEY}}}:probe:hash'"),
], ids=["no-scan", "no-del"])
@pytest_twisted.inlineCallbacks
def test_a_user_who_may_not_delete_the_content_state_is_refused_before_any_page(acl_user, redis_client, caplog,
                                                                                rules, named, deletes, mode):
    url = acl_user(*rules)
    site = LocalSite({("acl.test", "/"): _article(60)})
    with site, caplog.at_level(logging.INFO):
        settings = _content_settings(url, DEDUP_PARAGRAPHS=True, DEDUP_REDIS_ON_ERROR=mode, **deletes)
        yield crawl_refused_or_not(_Pages, settings, site)
    assert sum(site.hits.values()) == 0
    assert len(refusal(caplog)) == 1, refusal(caplog)
    line = refusal(caplog)[0]
    assert line.startswith("content index: the Redis user") and named in line and "\n" not in line, line
    assert urlsplit(url).password not in line
    # the probe keys: deleted, or (a user without DEL) left to expire
    assert all(redis_client.ttl(k) > 0 for k in redis_client.keys("*") if b"probe" in k)
    assert "+del" not in rules or [k for k in redis_client.keys("*") if b"probe" in k] == []


@pytest.mark.parametrize("deletes", DELETES, ids=["flush", "not-persist"])
@pytest_twisted.inlineCallbacks
def test_a_user_who_may_delete_the_content_state_crawls_and_it_is_deleted(acl_user, redis_client, caplog, deletes):
    redis_client.hset(f"{{{INDEX_KEY}}}:stale", "f", "1")  # a previous crawl's key: flushed at start
    url = acl_user(*SHARED_NEEDS, "+scan")
    pages = {("acl.test", "/"): _article(60, '<a href="/copy">c</a>'), ("acl.test", "/copy"): _article(60)}
    with LocalSite(pages) as site, caplog.at_level(logging.INFO):
        crawler = yield run_crawl(_Pages, _content_settings(url, DEDUP_PARAGRAPHS=True, **deletes),
                                  start_urls=[site.url("acl.test", "/")])
    assert len(site.hits) == 2, site.hits
    assert refusal(caplog) == [], refusal(caplog)
    stats = crawler.stats.get_stats()
    assert stats.get("dedup/content/store_errors", 0) == 0 and stats.get("dedup/content/redundant", 0) == 1, stats
    left = [k for k in redis_client.keys("*") if INDEX_KEY.encode() in k]
    assert f"{{{INDEX_KEY}}}:stale".encode() not in left
    if "DEDUP_REDIS_PERSIST" in deletes:
        assert left == [], left  # deleted at close
    else:
        assert left and [k for k in left if b"probe" in k] == []  # this crawl's index stays


# --- the content index sharded over a Redis Cluster: its commands on probe keys in their slots ---

SHARD_KEY = "dedup:acl:shard"


@pytest.fixture
def cluster_user(redis_cluster):
    """Make an ACL user with the given rules on every node of the cluster; yields a function rules -> the user's
    URL (node 0; the client finds the others)."""
    import redis

    nodes = [redis.Redis(port=node.port) for node in redis_cluster]
    for node in nodes:
        if node.execute_command("ROLE")[0] in (b"master", "master"):
            node.flushall()
    with acl_users(nodes, lambda name, password: f"redis://{name}:{password}@127.0.0.1:"
                                                 f"{redis_cluster[0].port}/0") as make:
        yield make
    for node in nodes:
        node.close()


def _sharded_settings(url: str, **more) -> dict:
    return {"ADDONS": {"scrapy_dedup.Addon": 0}, "ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
            "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": url, "DEDUP_REDIS_INDEX_KEY": SHARD_KEY,
            "DEDUP_REDIS_PARAMS": {"redis_cls": "redis.cluster.RedisCluster"}, **more}


class _Pages(scrapy.Spider):
    name = "acl_shard"

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a")


def _article(words: int, link: str = "", stem: str = "w") -> Page:
    text = " ".join(f"{stem}{i}" for i in range(words))
    return Page(f"<html><body><article><p>{text}</p></article>{link}</body></html>")


#: (ACL rules of a user missing one thing, what the refusal must name)
SHARD_MISSING = [
    (("~*", "+@all", "-hsetnx"), f"HSETNX on key '{{{SHARD_KEY}}}:probe:meta'"),
    (("~*", "+@all", "-eval"), f"EVAL on key '{{{SHARD_KEY}:b0:probe}}'"),
    (("~*", "+@all", "-hdel"), f"HDEL on key '{{{SHARD_KEY}:r:probe}}'"),
    ((f"~{{{SHARD_KEY}}}:*", "+@all"), f"on key '{{{SHARD_KEY}:x:probe}}'"),  # the slot-spread keys not granted
]


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.parametrize("rules,named", SHARD_MISSING, ids=[" ".join(r) for r, _ in SHARD_MISSING])
@pytest_twisted.inlineCallbacks
def test_a_sharded_content_index_user_missing_a_command_is_refused_before_any_page(cluster_user, caplog, rules,
                                                                                   named, mode):
    url = cluster_user(*rules)
    site = LocalSite({("acl.test", "/"): _article(60)})
    with site, caplog.at_level(logging.INFO):
        yield crawl_refused_or_not(_Pages, _sharded_settings(url, DEDUP_REDIS_ON_ERROR=mode), site)
    assert sum(site.hits.values()) == 0
    lines = [line for line in refusal(caplog) if "content index: the Redis user" in line]
    assert len(lines) == 1 and named in lines[0], refusal(caplog)
    assert "\n" not in lines[0] and urlsplit(url).password not in lines[0]


#: exactly what the sharded index needs: its hash-slot key patterns, its commands, the cluster client's own, and
#: DEL (without it the probe keys are left to expire)
SHARD_NEEDS = (f"~{{{SHARD_KEY}}}:*", f"~{{{SHARD_KEY}:*", "+ping", "+cluster|slots", "+cluster|shards", "+command",
               "+hget", "+hset", "+hsetnx", "+hdel", "+hincrby", "+hlen", "+eval", "+expire", "+del")


@pytest_twisted.inlineCallbacks
def test_a_sharded_content_index_user_with_exactly_its_permissions_crawls_and_leaves_no_probe_key(
        cluster_user, redis_cluster):
    import redis

    url = cluster_user(*SHARD_NEEDS)
    pages = {("acl.test", "/"): _article(60, '<a href="/copy">c</a> <a href="/other">o</a>'),
             ("acl.test", "/copy"): _article(60), ("acl.test", "/other"): _article(60, stem="z")}
    with LocalSite(pages) as site:
        crawler = yield run_crawl(_Pages, _sharded_settings(url, DEDUP_REDIS_TTL=3600, DEDUP_BOILERPLATE=False),
                                  start_urls=[site.url("acl.test", "/")])
    stats = crawler.stats.get_stats()
    assert stats.get("dedup/content/store_errors", 0) == 0, stats
    assert stats.get("dedup/content/redundant", 0) == 1 and stats.get("dedup/content/unique", 0) == 2, stats
    for node in redis_cluster:
        client = redis.Redis(port=node.port)
        assert [k for k in client.keys("*") if b"probe" in k] == []
        client.close()


@pytest.mark.parametrize("deletes", DELETES, ids=["flush", "not-persist"])
@pytest_twisted.inlineCallbacks
def test_a_sharded_content_index_user_without_scan_is_refused_and_with_it_crawls(cluster_user, redis_cluster, caplog,
                                                                                 deletes):
    import redis

    pages = {("acl.test", "/"): _article(60, '<a href="/copy">c</a>'), ("acl.test", "/copy"): _article(60)}
    settings = _sharded_settings(cluster_user(*SHARD_NEEDS), DEDUP_BOILERPLATE=False, **deletes)
    with LocalSite(pages) as site, caplog.at_level(logging.INFO):
        yield crawl_refused_or_not(_Pages, settings, site)
        assert sum(site.hits.values()) == 0 and len(refusal(caplog)) == 1, refusal(caplog)
        assert "may not run what the crawl needs: SCAN (" in refusal(caplog)[0]
        caplog.clear()
        settings = _sharded_settings(cluster_user(*SHARD_NEEDS, "+scan"), DEDUP_BOILERPLATE=False, **deletes)
        crawler = yield run_crawl(_Pages, settings, start_urls=[site.url("acl.test", "/")])
    assert refusal(caplog) == [] and len(site.hits) == 2, (refusal(caplog), site.hits)
    assert crawler.stats.get_value("dedup/content/redundant") == 1
    for node in redis_cluster:
        client = redis.Redis(port=node.port)
        keys = client.keys("*")
        assert [k for k in keys if b"probe" in k] == []
        assert "DEDUP_REDIS_PERSIST" not in deletes or keys == [], keys  # deleted at close, on every node
        client.close()


@pytest.mark.parametrize("node", [0, 1, 2])
@pytest_twisted.inlineCallbacks
def test_a_cluster_user_without_scan_on_one_primary_is_refused(cluster_user, redis_cluster, caplog, node):
    """ACLs are per node and the deletion SCANs every primary: the probe runs where the deletion will, so a user
    denied SCAN on any one of them (the node of the URL or another) is refused at start, not at the deletion."""
    import redis

    url = cluster_user(*SHARD_NEEDS, "+scan")
    primaries = [n for n in redis_cluster
                 if redis.Redis(port=n.port).execute_command("ROLE")[0] in (b"master", "master")]
    denied = redis.Redis(port=primaries[node % len(primaries)].port)
    denied.execute_command("ACL", "SETUSER", urlsplit(url).username, "-scan")
    denied.close()
    pages = {("acl.test", "/"): _article(60)}
    with LocalSite(pages) as site, caplog.at_level(logging.INFO):
        settings = _sharded_settings(url, DEDUP_BOILERPLATE=False, DEDUP_REDIS_FLUSH_ON_START=True)
        yield crawl_refused_or_not(_Pages, settings, site)
    assert sum(site.hits.values()) == 0, site.hits
    assert len(refusal(caplog)) == 1 and "may not run what the crawl needs: SCAN (" in refusal(caplog)[0], \
        refusal(caplog)


# --- AckPriorityQueue: its scripts and the commands they run, on probe keys shaped like its keys ---

QUEUE_KEY = "q:requests"


def start_queue(url: str, **settings):
    import redis
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.redis_queue import AckPriorityQueue

    crawler = get_crawler(scrapy.Spider, {"DEDUP_REDIS_STARTUP_SECONDS": 0.5, **settings})
    spider = scrapy.Spider.from_crawler(crawler, name="q")
    return AckPriorityQueue(redis.Redis.from_url(url), spider, QUEUE_KEY)


#: (ACL rules of a user missing one thing, what the refusal must name)
QUEUE_MISSING = [
    (("~*", "+@all", "-evalsha"), f"EVALSHA on key '{QUEUE_KEY}:probe'"),
    (("~*", "+@all", "-script|load"), "SCRIPT LOAD ("),
    (("~*", "+@all", "-zunionstore"), f"ZUNIONSTORE on key '{QUEUE_KEY}:probe'"),
    (("~*", "+@all", "-srem"), f"SREM on key '{QUEUE_KEY}:workers:probe'"),
    # every key of the queue but the heartbeat's ``alive`` keys
    ((f"~{QUEUE_KEY}", f"~{QUEUE_KEY}:probe", f"~{QUEUE_KEY}:inflight:*", f"~{QUEUE_KEY}:workers*",
      f"~{QUEUE_KEY}:marker*", "+@all"), f"SET on key '{QUEUE_KEY}:alive:"),
]


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.parametrize("rules,named", QUEUE_MISSING, ids=[" ".join(r) for r, _ in QUEUE_MISSING])
def test_a_queue_user_missing_a_command_or_key_is_refused_at_start_in_one_line(acl_user, redis_client, caplog,
                                                                               rules, named, mode):
    url = acl_user(*rules)
    with caplog.at_level(logging.INFO), pytest.raises(RedisStartupError) as info:
        start_queue(url, DEDUP_REDIS_ON_ERROR=mode)
    lines = refusal(caplog)
    assert len(lines) == 1 and lines[0] == str(info.value), lines
    assert lines[0].startswith("AckPriorityQueue: the Redis user") and named in lines[0], lines[0]
    assert "unavailable" not in lines[0] and "\n" not in lines[0] and urlsplit(url).password not in lines[0]
    assert redis_client.keys(f"{QUEUE_KEY}*") == []  # nothing written but probe keys, and those deleted


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
def test_a_queue_on_a_plain_url_to_a_tls_port_is_a_start_up_error(tls_server, caplog, mode):
    tls_port, _ = tls_server
    url = f"redis://127.0.0.1:{tls_port}/0"
    with caplog.at_level(logging.INFO), pytest.raises(RedisStartupError, match="speaks TLS.*rediss://"):
        start_queue(url, REDIS_URL=url, DEDUP_REDIS_ON_ERROR=mode)
    assert len(refusal(caplog)) == 1, refusal(caplog)


class _Links(scrapy.Spider):
    name = "acl_queue"

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a")


def _queue_crawl_settings(url: str, **more) -> dict:
    return {"SCHEDULER": "scrapy_dedup.redis_queue.AckScheduler", "SCHEDULER_PERSIST": True,
            "SCHEDULER_QUEUE_CLASS": "scrapy_dedup.redis_queue.AckPriorityQueue",
            "SCHEDULER_QUEUE_KEY": QUEUE_KEY, "REDIS_URL": url, "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter",
            "DEDUP_REDIS_URL": url, "DEDUP_REDIS_KEY": "q:seen", "DEDUP_REDIS_STARTUP_SECONDS": 0.5, **more}


_LINKED = {("q.test", "/"): Page('<a href="/a">a</a> <a href="/b">b</a>'),
           ("q.test", "/a"): Page('<a href="/b">b</a> <a href="/">home</a>'), ("q.test", "/b"): Page("<p>b</p>")}


@pytest.mark.parametrize("mode", ["retry", "fail_open"])
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@pytest_twisted.inlineCallbacks
def test_a_queue_crawl_whose_user_may_not_run_evalsha_fails_to_start_fetching_nothing(acl_user, caplog, mode):
    url = acl_user("~*", "+@all", "-evalsha")
    with LocalSite(_LINKED) as site, caplog.at_level(logging.INFO), pytest.raises(Exception) as failed:
        yield run_crawl(_Links, _queue_crawl_settings(url, DEDUP_REDIS_ON_ERROR=mode),
                        start_urls=[site.url("q.test", "/")])
    assert sum(site.hits.values()) == 0
    # checked where AckScheduler is built, before Scrapy's engine gives it a slot: the one line, no cascade of Scrapy's
    lines = refusal(caplog)
    assert len(lines) == 1 and f"EVALSHA on key '{QUEUE_KEY}:probe'" in lines[0], lines
    assert urlsplit(url).password not in lines[0]
    error: BaseException | None = failed.value  # (Scrapy's own error closing the engine may come after it)
    while error is not None and not isinstance(error, RedisStartupError):
        error = error.__cause__ or error.__context__
    assert str(error) == lines[0]


#: exactly what the queue and the paired RedisDupeFilter need: their keys, their commands
QUEUE_NEEDS = ("~q:*", "+ping", "+evalsha", "+script|load", "+zadd", "+zrange", "+zrem", "+zcard", "+zunionstore",
               "+sadd", "+srem", "+smembers", "+scard", "+sismember", "+set", "+get", "+exists", "+del", "+type")


@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@pytest_twisted.inlineCallbacks
def test_a_queue_user_with_exactly_its_permissions_crawls_and_leaves_no_probe_key(acl_user, redis_client, caplog):
    url = acl_user(*QUEUE_NEEDS)
    with LocalSite(_LINKED) as site, caplog.at_level(logging.INFO):
        crawler = yield run_crawl(_Links, _queue_crawl_settings(url), start_urls=[site.url("q.test", "/")])
    assert sorted(site.hits) == [("q.test", "/"), ("q.test", "/a"), ("q.test", "/b")], site.hits
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert refusal(caplog) == [], refusal(caplog)
    assert [k for k in redis_client.keys("*") if b"probe" in k] == []
    assert redis_client.zcard(QUEUE_KEY) == 0


@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@pytest_twisted.inlineCallbacks
def test_a_dupefilter_refused_under_scrapy_redis_s_scheduler_closes_the_crawl_before_any_page(acl_user, caplog):
    """scrapy-redis's scheduler never opens the dupefilter: its start-up is met by the first request, whose
    raise ends that request only; the others must not pass, nor the crawl end as ``finished``."""
    needs = [rule for rule in QUEUE_NEEDS if rule != "+sismember"]  # the queue may do all it needs
    url = acl_user(*needs)
    with LocalSite(_LINKED) as site, caplog.at_level(logging.INFO):
        crawler = yield run_crawl(_Links, _queue_crawl_settings(url), start_urls=[site.url("q.test", "/"),
                                                                                 site.url("q.test", "/a")])
    assert sum(site.hits.values()) == 0, site.hits
    assert crawler.stats.get_value("finish_reason") == "dedup_redis_refused"
    lines = refusal(caplog)
    assert len(lines) == 1 and "SISMEMBER on key 'q:seen'" in lines[0], lines


def test_scrapy_crawl_exits_non_zero_when_a_dupefilter_is_refused_under_scrapy_redis_s_scheduler(acl_user,
                                                                                                   tmp_path):
    """The refusal met by the first request (the scheduler never opens the dupefilter) closes the crawl with
    ``dedup_redis_refused``: a start that failed, so the exit status is not 0 (it was)."""
    from tests.test_startup_errors import before_tracebacks, project, scrapy_crawl

    url = acl_user(*(rule for rule in QUEUE_NEEDS if rule != "+sismember"))
    settings = {**_queue_crawl_settings(url), "ADDONS": {}}
    with LocalSite({("127.0.0.1", path): page for (_, path), page in _LINKED.items()}) as site:
        root = project(tmp_path, "".join(f"{name} = {value!r}\n" for name, value in settings.items()))
        code, output = scrapy_crawl(root, "-a", f"start_url={site.url('127.0.0.1', '/')}")
        assert sum(site.hits.values()) == 0, output[-3000:]
    assert code != 0, output[-3000:]
    assert "'finish_reason': 'dedup_redis_refused'" in output, output[-3000:]
    errors = [line for line in before_tracebacks(output).splitlines() if "] ERROR: " in line]
    assert len(errors) == 1 and "SISMEMBER on key 'q:seen'" in errors[0], errors
    assert urlsplit(url).password not in output
