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


@pytest.fixture
def acl_user(redis_url, redis_client):
    """Make an ACL user with the given rules; yields a function rules -> the user's URL."""
    made = []

    def make(*rules: str) -> str:
        name, password = f"crawler{secrets.token_hex(3)}", secrets.token_hex(8)
        redis_client.execute_command("ACL", "SETUSER", name, "reset", "on", f">{password}", *rules)
        made.append(name)
        parts = urlsplit(redis_url)
        return f"redis://{name}:{password}@{parts.hostname}:{parts.port}/0"

    yield make
    for name in made:
        redis_client.execute_command("ACL", "DELUSER", name)


def start_filter(kind: str, url: str, **settings):
    return get_dupefilter(settings={"DUPEFILTER_CLASS": FILTERS[kind], "DEDUP_REDIS_URL": url,
                                    "DEDUP_REDIS_KEY": KEY, "DEDUP_BLOOM_CAPACITY": 10_000, **settings})


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
        try:
            yield run_crawl(_OnePage, settings, start_urls=[site.url("acl.test", "/")])
        except RedisStartupError:  # the crawl's start failed (Scrapy's own lines follow ours)
            pass
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
        try:
            yield run_crawl(_OnePage, settings, start_urls=[site.url("acl.test", "/")])
        except RedisStartupError:
            pass
    assert sum(site.hits.values()) == 0
    lines = [line for line in refusal(caplog) if "speaks TLS" in line]
    assert len(lines) == 1 and "rediss://" in lines[0], refusal(caplog)
