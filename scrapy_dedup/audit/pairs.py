"""Flagged pairs for a human audit: a likely category from the URLs, and the differing words.

Simhash also pairs templated siblings (two products on one long template):
the audit must make those easy to spot. The category is a hint from the URLs
alone, checked in this order:

* ``mirror host``: the hosts differ (``example.com`` vs ``example.co.uk``,
  ``www.`` vs bare, a CDN, or the same name on another port) - the same page
  served by another host; the Mirrors block counts hosts the same way (:func:`site_of`);
* ``stale re-crawl``: same host, path and query - the same URL fetched twice
  (scheme or fragment may differ), with content that moved on a little;
* ``query-string mirror``: same host and path, different query (tracking or
  session parameters, a sort order);
* ``URL variant mirror``: the paths differ only by letter case, a trailing
  slash, an index file or a print view (``/print/x``, ``/x/printable``):
  the same page under a variant of its URL;
* ``path alias``: same text (exact) at a different path on the same host;
* ``possible templated siblings``: near (not exact) text at a different path that
  is no variant of the other - the one to check by eye.
"""
from __future__ import annotations

import difflib
import re
from typing import NamedTuple
from urllib.parse import urlsplit

__all__ = ["categorize", "site_of", "word_diff", "DiffRun", "CATEGORIES"]

CATEGORIES = ("mirror host", "stale re-crawl", "query-string mirror", "URL variant mirror", "path alias",
              "possible templated siblings")

#: a path segment or query parameter that asks for a print view of the page
_PRINT = re.compile(r"print(?:able|er)?(?:[-_]?(?:friendly|version|view|page))?", re.I)
#: index documents a server serves for their directory
_INDEX = re.compile(r"(?:index|default)\.(?:html?|php|aspx?|jsp)", re.I)


def _parts(url: str) -> tuple[str, str, str]:
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:  # e.g. a bad port: compare the raw string
        return url, "", ""
    if port and port not in (80, 443):
        host = f"{host}:{port}"
    return host, parts.path or "/", parts.query


def site_of(url: str) -> str:
    """The host a pair's page is on, as the audit counts hosts: the name, lowercased, and a port other than 80/443."""
    return _parts(url)[0]


def _variant_path(path: str) -> str:
    """``path`` without what makes a URL variant of one page: case, trailing slash, index file, print view
    (a print view asked for in the query leaves the path alone: a query-string mirror)."""
    segments = [s for s in path.lower().split("/") if s and not _PRINT.fullmatch(s)]
    if segments and _INDEX.fullmatch(segments[-1]):
        segments.pop()
    return "/" + "/".join(segments)


def categorize(url_a: str, url_b: str, kind: str) -> str:
    """Likely category of a flagged pair, from its URLs and its kind (``exact`` or ``near``)."""
    host_a, path_a, query_a = _parts(url_a)
    host_b, path_b, query_b = _parts(url_b)
    if host_a != host_b:
        return "mirror host"
    if path_a == path_b:
        return "stale re-crawl" if query_a == query_b else "query-string mirror"
    if _variant_path(path_a) == _variant_path(path_b):
        return "URL variant mirror"
    return "path alias" if kind == "exact" else "possible templated siblings"


class DiffRun(NamedTuple):
    """A run of words: ``op`` is ``equal``, ``delete`` (only in a), ``insert`` (only in b) or ``replace``."""

    op: str
    a: list
    b: list


def word_diff(words_a: list, words_b: list, max_words: int = 4000) -> list[DiffRun]:
    """The word-level diff of two texts (each cut to ``max_words`` words to bound the cost)."""
    a, b = words_a[:max_words], words_b[:max_words]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [DiffRun(op, a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes()]
