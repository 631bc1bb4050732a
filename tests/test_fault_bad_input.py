"""Hostile input, fuzzed: each function either works or says clearly why not; none crashes.

* ``canonicalize`` and the request fingerprinter: arbitrary text with lone surrogates and
  control characters, URLs decoded from arbitrary bytes, huge URLs;
* ``page_text``: random bytes under every declared charset, wrong charsets, invalid
  sequences, deep nesting, empty and binary bodies;
* the offline report's JSONL reader: truncated, non-UTF-8 and absurdly nested lines;
* the DUST rules loader: broken files of every kind.

Crawls over a site serving such responses are in ``test_fault_crawl_bad_input.py``.
"""
from __future__ import annotations

import gzip
import json
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from parsel import Selector
from scrapy import Request

from scrapy_dedup import canonicalize, page_text
from scrapy_dedup.audit.dump import BadLine, DumpError, FieldNames, PageRecord, parse_record, read_lines
from scrapy_dedup.cli import main as cli_main
from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter
from scrapy_dedup.url.dust import DustRulesError, RuleSet

# Every code point, lone surrogates (category Cs) and controls (Cc) included.
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
PREFIXES = st.sampled_from(["http://", "https://", "HTTP://", "http://a.test/", "https://user:pw@a.test:8080/",
                            "http://[::1]/", "http://xn--/", "//", ""])


def bytes_decoded(data: bytes) -> list[str]:
    """The ways a crawler meets URLs made from bytes: lossless (surrogateescape), Latin-1, replaced."""
    return [data.decode("utf-8", "surrogateescape"), data.decode("latin-1"), data.decode("utf-8", "replace")]


def assert_canonical(url: str) -> None:
    once = canonicalize(url)
    assert isinstance(once, str)
    assert canonicalize(once) == once


# --- canonicalize ---------------------------------------------------------------------------------------------

@given(PREFIXES, st.text(alphabet=ANY_CHAR, max_size=200))
@example("http://a.test/", "\ud800\udfff\x00\x7f\x9f")
@example("http://", "\ud800.test/")
def test_canonicalize_any_code_point_never_raises_and_is_idempotent(prefix, rest):
    assert_canonical(prefix + rest)


@given(PREFIXES, st.binary(max_size=200))
def test_canonicalize_urls_decoded_from_bytes(prefix, data):
    for url in bytes_decoded(data):
        assert_canonical(prefix + url)


@pytest.mark.parametrize("url", [
    "http://a.test/" + "a" * 5_000_000,                                     # 5 MB path
    "http://a.test/?" + "&".join(f"p{i}=v" for i in range(100_000)),        # 100,000 parameters
    "http://" + "a." * 100_000 + "test/",                                   # 100,000 host labels
    "http://a.test/" + "%" * 100_000,                                       # 100,000 broken escapes
    "http://a.test/" + "../" * 100_000,                                     # dot segments
    "http://a.test/" + "\ud800" * 100_000,                                  # lone surrogates
])
def test_canonicalize_huge_urls(url):
    assert_canonical(url)


def test_canonical_urls_of_surrogates_are_ascii():
    """A lone surrogate in a parsable URL is percent-escaped: the result can be encoded, logged, hashed."""
    assert canonicalize("http://a.test/\ud800x").isascii()


# --- the request fingerprinter --------------------------------------------------------------------------------

FINGERPRINTER = CanonicalRequestFingerprinter()


def fingerprint_or_refused(url: str):
    """Scrapy itself refuses some URLs when the Request is built (its contract): that is not ours to fix."""
    try:
        request = Request(url)
    except (ValueError, TypeError):
        return None
    fingerprint = FINGERPRINTER.fingerprint(request)
    assert isinstance(fingerprint, bytes) and len(fingerprint) == 20
    assert FINGERPRINTER.fingerprint(Request(url)) == fingerprint
    return fingerprint


@given(PREFIXES, st.text(alphabet=ANY_CHAR, max_size=200))
@example("http://a.test/", "\ud800")
@example("http://a.test/", "\x00\r\n")
def test_fingerprinter_any_code_point(prefix, rest):
    fingerprint_or_refused(prefix + rest)


@given(PREFIXES, st.binary(max_size=200))
def test_fingerprinter_urls_decoded_from_bytes(prefix, data):
    for url in bytes_decoded(data):
        fingerprint_or_refused(prefix + url)


def test_fingerprinter_huge_url_and_variants_agree():
    path = "/" + "x" * 2_000_000
    assert fingerprint_or_refused("http://A.test:80" + path) == fingerprint_or_refused("http://a.test" + path)


# --- page_text ------------------------------------------------------------------------------------------------

CHARSETS = ["utf-8", "utf-16", "utf-16-le", "utf-32", "shift_jis", "euc-jp", "iso-2022-jp", "gb18030", "big5",
            "euc-kr", "koi8-r", "cp1251", "cp1252", "iso-8859-1", "utf-7", "x-no-such-charset", ""]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CHARSETS), st.binary(max_size=2000), st.booleans())
def test_page_text_random_bytes_under_any_declared_charset(charset, data, as_argument):
    """Random bytes declared in a ``<meta>`` or passed as ``encoding=``: always a str, never an exception."""
    if as_argument:
        text = page_text(data, encoding=charset or None)
    else:
        text = page_text(f'<html><head><meta charset="{charset}"></head><body>'.encode() + data)
    assert isinstance(text, str)
    assert text == " ".join(text.split())


# Invalid sequences of each encoding, and text that is valid in one charset but declared as another.
ENCODING_ERRORS = {
    "utf-8": [b"\xff\xfe\xfd", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"],
    "utf-16": [b"\xff\xfe\x00\xd8", b"\x00"],
    "shift_jis": [b"\x81", b"\xa0\xfd"],
    "euc-jp": [b"\x8e", b"\xff\xff"],
    "iso-2022-jp": [b"\x1b$B\x7f\x7f", b"\x1b(Z"],
    "gb18030": [b"\x81\x30", b"\xff"],
    "big5": [b"\xf9\xfe\xff", b"\x80"],
}
WRONGLY_DECLARED = [("Grüße aus Köln, 東京 und Москва".encode("utf-8"), "shift_jis"),
                    ("Grüße aus Köln".encode("cp1252"), "utf-8"),
                    ("東京の天気".encode("shift_jis"), "utf-8"),
                    ("Москва".encode("koi8-r"), "utf-16"),
                    ("plain ascii".encode("utf-16"), "iso-8859-1")]


@pytest.mark.parametrize("charset,bad", [(c, b) for c, bads in ENCODING_ERRORS.items() for b in bads])
def test_page_text_every_encoding_error(charset, bad):
    body = b"<html><body><p>before words " + bad + b" after words</p></body></html>"
    for text in (page_text(body, encoding=charset),
                 page_text(f'<meta charset="{charset}">'.encode() + body)):
        assert isinstance(text, str)
    if charset == "utf-8":  # an ASCII-compatible charset keeps the readable words around the bad bytes
        assert "before words" in page_text(body, encoding=charset) and "after words" in page_text(body)


@pytest.mark.parametrize("body,declared", WRONGLY_DECLARED)
def test_page_text_wrongly_declared_charset(body, declared):
    html = f'<html><head><meta charset="{declared}"></head><body><p>'.encode() + body + b"</p></body></html>"
    assert isinstance(page_text(html), str)
    assert isinstance(page_text(html, encoding=declared), str)


def nested(depth: int) -> str:
    return ("<html><body><p>before words</p>" + "<div>" * depth + "deep words" + "</div>" * depth
            + "<p>after words</p></body></html>")


@pytest.mark.parametrize("depth", [300, 1000])
def test_deep_nesting_gives_the_same_text_as_scrapys_tree(depth):
    """Text from str or bytes (offline report, truncated bodies) equals text from Scrapy's parsed tree."""
    html = nested(depth)
    expected = page_text(Selector(text=html).root)
    assert expected == "before words deep words after words"
    assert page_text(html) == expected
    assert page_text(html.encode()) == expected


@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_nesting_beyond_the_parsers_limit_keeps_the_text_before_it(depth):
    """libxml2 stops at about 2,048 levels (also in Scrapy's own selectors): the text before the limit is kept."""
    html = nested(depth)
    text = page_text(html)
    assert text.startswith("before words")
    assert text == page_text(Selector(text=html).root) == page_text(html.encode())


@pytest.mark.parametrize("body", [b"", b" \n\t", b"\x00" * 100, "".encode("utf-16"), b"<html></html>",
                                  b"<!DOCTYPE html>", b"<?xml version='1.0'?>", b"<![CDATA[", b"<!--"])
def test_empty_and_degenerate_bodies(body):
    assert page_text(body) == ""


def test_binary_bodies():
    gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,"
    for body in (gif * 100, gzip.compress(b"<p>hidden words</p>" * 100), os.urandom(1 << 20)):
        assert isinstance(page_text(body), str)


# --- the JSONL reader of the offline report ------------------------------------------------------------------

FIELDS = FieldNames()


@given(st.binary(max_size=300))
def test_parse_record_any_bytes(raw):
    parsed = parse_record(1, raw, FIELDS)
    if not isinstance(parsed, PageRecord):
        bad, keys = parsed
        assert isinstance(bad, BadLine) and bad.reason


@pytest.mark.parametrize("raw,reason", [
    (b'{"url": "http://a.test/", "html": "<p>cut here', "invalid JSON"),
    (b'{"url": "http://a.test/", "html": "\xff\xfe"}', "not UTF-8"),
    (b'{"url": "http://a.test/\xc3", "text": "x"}', "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
    (b'{"url": ' + b"[" * 100_000, "JSON nested too deeply"),
    (b'{"url": "http://a.test/", "text": "\\ud800"}', None),  # a lone surrogate escape is valid JSON
])
def test_parse_record_bad_lines(raw, reason):
    parsed = parse_record(7, raw, FIELDS)
    if reason is None:
        assert isinstance(parsed, PageRecord)
    else:
        assert parsed[0] == BadLine(7, reason)


def test_report_counts_bad_lines_and_goes_on(tmp_path, capsys):
    good = [json.dumps({"url": f"http://a.test/{i}", "text": f"page number {i} " * 20}) for i in range(5)]
    lines = [good[0].encode(), good[1].encode()[:30], b'{"url": "http://a.test/x", "text": "\xff"}', good[2].encode(),
             b"[" * 50_000, good[3].encode(), b"\x00\x01\x02", good[4].encode()[:-1]]
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(b"\n".join(lines))  # the last line truncated, no newline
    code = cli_main(["report", str(dump), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(out)
    assert report["bad_lines"]["count"] == 5
    assert {r["reason"]: r["count"] for r in report["bad_lines"]["reasons"]} == {
        "invalid JSON": 3, "not UTF-8": 1, "JSON nested too deeply": 1}


def test_truncated_gzip_dump_is_a_clear_error(tmp_path):
    path = tmp_path / "dump.jsonl.gz"
    data = gzip.compress(b"".join(b'{"url": "a%d", "text": "%x"}\n' % (i, i * 7919) for i in range(5000)))
    path.write_bytes(data[: len(data) // 2])
    with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as stream:
        with pytest.raises(DumpError, match="truncated or corrupt after line"):
            list(read_lines(stream))


# --- the DUST rules loader ------------------------------------------------------------------------------------

BROKEN_RULE_FILES = {
    "empty": b"",
    "binary": bytes(range(256)),
    "not UTF-8": b'{"format": "scrapy-dedup-dust/1", "hosts": {"\xff.test": []}}',
    "truncated": b'{"format": "scrapy-dedup-dust/1", "hosts": {"a.test": [{"kind": "drop_param", ',
    "nested": b"[" * 100_000 + b"]" * 100_000,
    "a list": b"[]",
    "wrong format": b'{"format": "other/9", "hosts": {}}',
    "rule not an object": b'{"format": "scrapy-dedup-dust/1", "hosts": {"a.test": [42]}}',
    "unknown kind": b'{"format": "scrapy-dedup-dust/1", "hosts": {"a.test": [{"kind": "regex"}]}}',
    "host with scheme": b'{"format": "scrapy-dedup-dust/1", "hosts": {"http://a.test": []}}',
    "NaN support": b'{"format": "scrapy-dedup-dust/1", "hosts": {"a.test": [{"kind": "drop_param", '
                   b'"param": "x", "prefix": "/", "support": NaN}]}}',
}


@pytest.mark.parametrize("name", sorted(BROKEN_RULE_FILES))
def test_rules_loader_broken_files_name_the_file(tmp_path, name):
    path = tmp_path / "rules.json"
    path.write_bytes(BROKEN_RULE_FILES[name])
    with pytest.raises(DustRulesError) as caught:
        RuleSet.load(path)
    assert str(path) in str(caught.value)


def test_rules_loader_directory_and_missing_file(tmp_path):
    for path, message in ((tmp_path, "not a regular file"), (tmp_path / "missing.json", "cannot read DUST rules file")):
        with pytest.raises(DustRulesError, match=message):
            RuleSet.load(path)


@given(st.binary(max_size=400))
def test_rules_loader_any_bytes(data):
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(data)
        f.flush()
        try:
            RuleSet.load(f.name)
        except DustRulesError as exc:
            assert f.name in str(exc)
