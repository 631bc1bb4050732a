"""Security: Redis secrets never leak, TLS works, Lua takes data only as KEYS/ARGV, files follow the umask,
the HTML report escapes page content. Real servers throughout (redis-server with a password, with TLS).
"""
from __future__ import annotations

import ast
import datetime
import hashlib
import json
import logging
import os
import stat
from collections import Counter
from pathlib import Path

import pytest
from pytest_twisted import inlineCallbacks

import scrapy_dedup
from scrapy_dedup.dupefilters import RedisStartupError
from scrapy_dedup.settings import DedupConfigError, read_settings
from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import RedisServer, free_port

PASSWORD = "s3cr3t-Pa55w0rd-7f1c"
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


# --- secrets ----------------------------------------------------------------------------------------

@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_password_never_reaches_logs_or_stats_even_through_an_outage(password_redis, caplog):
    caplog.set_level(logging.DEBUG)
    linked = LinkedSite(pages=20, near=4, delay=0.02, entry_links_all=False)
    count = {"n": 0}

    def outage(spider, response):  # the server is killed mid-crawl: error messages are logged too
        count["n"] += 1
        if count["n"] == 5:
            password_redis.proc.kill()
            password_redis.proc.wait()
            password_redis.proc = None
        if count["n"] == 10:
            password_redis.start()  # back while pages remain: the scripts are loaded again

    settings = {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisBloomDupeFilter",
        "DEDUP_BLOOM_CAPACITY": 100_000,
        "DEDUP_REDIS_URL": password_redis.url,
        "DEDUP_CONTENT_BACKEND": "redis",
        "DEDUP_REDIS_ON_ERROR": "fail_open",
        "DUPEFILTER_DEBUG": True,
        "CONCURRENT_REQUESTS": 2,
    }
    assert PASSWORD in password_redis.url
    with LocalSite(linked) as site:
        crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")], on_response=outage)
    logged = everything_logged(caplog)
    stats = crawler.stats.get_stats()
    assert stats["dedup/redis/errors"] >= 1  # the outage happened and was logged
    assert "redis://:***@127.0.0.1" in logged  # the server is named, masked
    assert PASSWORD not in logged
    assert PASSWORD not in repr(stats)
    print(f"\n[reliability] password crawl: {len(caplog.records)} log records, {len(logged)} characters, "
          f"password found 0 times; stats {len(stats)} values, password found 0 times; "
          f"redis errors={stats['dedup/redis/errors']}")
    assert not [p for p in linked.paths if not site.hits[("site.test", p)]]  # and nothing was lost

    # Every script Redis holds now is one of the package's constant scripts (nothing built from data).
    client = password_redis.client()
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
        with pytest.raises(RedisStartupError) as info:
            yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
        assert not site.hits  # nothing was crawled
    message = str(info.value)
    assert "AuthenticationError" in message and "redis://:***@127.0.0.1" in message
    assert "DEDUP_REDIS_URL" in message
    for secret in (wrong, PASSWORD):
        assert secret not in message
        assert secret not in everything_logged(caplog)


def test_config_errors_mask_the_password():
    for url in (f"http://user:{PASSWORD}@host:6379/0", f"redis+tcp://:{PASSWORD}@host/0",
                f"ftp://host/0?password={PASSWORD}"):
        with pytest.raises(DedupConfigError) as info:
            read_settings({"DEDUP_REDIS_URL": url})
        assert "DEDUP_REDIS_URL" in str(info.value) and PASSWORD not in str(info.value)


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
    from scrapy_dedup.redis_conn import connect
    from scrapy_dedup.redis_policy import is_transient
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
        with pytest.raises(RedisStartupError) as info:
            yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value) and "rediss://127.0.0.1" in str(info.value)


# --- Lua scripts ------------------------------------------------------------------------------------

SCRIPT_CALLS = {"register_script", "eval", "evalsha", "script_load", "eval_ro", "evalsha_ro", "fcall"}


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def script_sources() -> list[tuple[str, ast.Call, dict[str, ast.expr]]]:
    """Every call in the package that hands a script to Redis, with its module's top-level assignments."""
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        constants = _module_constants(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in SCRIPT_CALLS):
                calls.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", node, constants))
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
    for where, call, constants in script_sources():
        assert call.args, f"{where}: script passed by keyword"
        arg = call.args[0]
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
    settings = {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "JOBDIR": str(jobdir),
        # a Redis that is down for the whole crawl, fail_open: the unconfirmed fingerprints go to JOBDIR
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter",
        "DEDUP_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "DEDUP_REDIS_ON_ERROR": "fail_open",
        "DEDUP_AUDIT_FILE": str(out / "audit" / "near.jsonl"),
        "DEDUP_LOG_FILE": str(out / "crawl-log.jsonl"),
    }
    with LocalSite(linked) as site:
        crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
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
    for name in ("job/redis-unconfirmed.fps", "job/dedup-content.idx", "audit/near.jsonl", "crawl-log.jsonl",
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
