"""structured_kind: which text responses are data (skipped by the content layer) and which are pages."""
from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.structured import SNIFF_BYTES, structured_kind

HTML = b"<!DOCTYPE html><html><head><title>t</title></head><body><p>words</p></body></html>"
XHTML = (b'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
         b'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml">'
         b"<body><p>words</p></body></html>")
RSS = b'<?xml version="1.0"?>\n<rss version="2.0"><channel><title>news</title></channel></rss>'
JSON_OBJECT = b'{"id": 1, "name": "kettle"}'

# (Content-Type, first bytes of the body, expected kind): None is a page, fingerprinted.
TABLE = [
    # pages
    ("text/html; charset=utf-8", HTML, None),
    (b"text/html", HTML, None),  # Scrapy's headers are bytes
    ("application/xhtml+xml", XHTML, None),
    ("application/xml", XHTML, None),  # XHTML served as generic XML: the root element is <html>
    ("text/xml; charset=utf-8", b"\xef\xbb\xbf<!-- generated --><html><body>x</body></html>", None),
    ("text/plain", b"RFC 9110 HTTP Semantics\n\nAbstract\n\n   The Hypertext Transfer Protocol", None),
    ("text/plain", b"[1] Introduction\n\nThis document", None),  # a footnote, not a JSON array
    ("text/plain", b"[[Main Page]] links", None),
    ("text/plain", b"{{template}} and braces", None),
    ("text/markdown", b"# Title\n\nSome prose.", None),
    (None, HTML, None),  # no Content-Type: the body decides, HTML is a page
    ("", b"plain words", None),
    ("application/octet-stream", HTML, None),  # a type not named stays as before (fingerprinted)
    ("text/html", b"", None),
    ("text/html", b"   \n  ", None),
    # JSON by type
    ("application/json", JSON_OBJECT, "json"),
    ("Application/JSON; charset=UTF-8", b"", "json"),
    (b"application/json", b"[1, 2]", "json"),
    ("text/json", b"{}", "json"),
    ("application/ld+json", b'{"@context": "https://schema.org"}', "json"),
    ("application/vnd.api+json", b'{"data": []}', "json"),
    ("application/problem+json", b'{"title": "x"}', "json"),
    ("application/x-ndjson", b'{"a": 1}\n{"a": 2}\n', "json"),
    ("application/json", b"not json at all", "json"),  # the type says so: trusted
    # JSON by its first bytes, whatever it is served as
    ("text/html; charset=utf-8", JSON_OBJECT, "json"),  # PHP's and many frameworks' default type
    ("text/plain", b'  \r\n\t{\n  "results": [', "json"),
    (None, b"[]", "json"),
    ("text/html", b'[{"id": 1}, {"id": 2}]', "json"),
    ("text/html", b'["a", "b"]', "json"),
    ("text/html", b"[[[1, 2], [3]]]", "json"),
    ("text/html", b"[ -1.5e3 , 2]", "json"),
    ("text/html", b"[true, false]", "json"),
    ("text/html", b"[null ,1]", "json"),
    ("text/html", b"{ }", "json"),
    ("text/html", codecs.BOM_UTF8 + JSON_OBJECT, "json"),
    # XML that is not XHTML
    ("application/xml", b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
     "xml"),
    ("text/xml", RSS, "xml"),
    ("application/rss+xml", RSS, "xml"),
    ("application/atom+xml", b'<feed xmlns="http://www.w3.org/2005/Atom"><content type="html">', "xml"),
    ("image/svg+xml", b'<svg xmlns="http://www.w3.org/2000/svg">', "xml"),
    ("application/xml", b"<!-- <html> in a comment is not the root --><rss>", "xml"),
    # scripts and stylesheets
    ("text/javascript", b"var x = 1;", "javascript"),
    ("application/javascript; charset=utf-8", b"(function(){})()", "javascript"),
    ("application/x-javascript", b"", "javascript"),
    ("text/ecmascript", b"", "javascript"),
    ("text/css", b"body { color: red }", "css"),
    ("text/css", b'{"looks": "like json"}', "css"),  # the type decides first
    # tables of data
    ("text/csv", b"id,name\n1,kettle\n", "csv"),
    ("text/tab-separated-values", b"id\tname\n", "csv"),
]


@pytest.mark.parametrize("content_type, head, expected", TABLE)
def test_structured_kind(content_type, head, expected):
    assert structured_kind(content_type, head) == expected


def test_only_the_first_bytes_count():
    assert structured_kind("text/html", b" " * SNIFF_BYTES + JSON_OBJECT) is None
    assert structured_kind("application/xml", b" " * SNIFF_BYTES + b"<html>") == "xml"
    assert structured_kind("text/html", JSON_OBJECT + HTML * 100) == "json"  # a longer head is fine


@settings(max_examples=300, deadline=None)
@given(content_type=st.one_of(st.none(), st.text(max_size=60), st.binary(max_size=60)), head=st.binary(max_size=2000))
def test_any_header_and_body_give_a_kind_or_none(content_type, head):
    assert structured_kind(content_type, head) in (None, "json", "xml", "javascript", "css", "csv")
