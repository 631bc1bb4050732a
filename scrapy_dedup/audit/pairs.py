"""Flagged pairs for a human audit: a likely category from the URLs, and the differing words.

Simhash also pairs templated siblings (two products on one long template):
the audit must make those easy to spot. The category is a hint from the URLs
alone, checked in this order:

* ``regional mirror``: the hosts differ (``example.com`` vs ``example.co.uk``,
  ``www.`` vs bare, a CDN) - the same page served under another host;
* ``query-string mirror``: same host and path, different query (tracking or
  session parameters, a sort order);
* ``stale re-crawl``: same host, path and query - the same URL fetched twice
  (scheme or fragment may differ), with content that moved on a little;
* ``path alias``: same text (exact) at a different path on the same host;
* ``possible templated siblings``: near (not exact) text at a different path -
  the one to check by eye.
"""
from __future__ import annotations

import difflib
from typing import NamedTuple
from urllib.parse import urlsplit

__all__ = ["categorize", "word_diff", "DiffRun", "CATEGORIES"]

CATEGORIES = ("regional mirror", "query-string mirror", "stale re-crawl", "path alias",
              "possible templated siblings")


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


def categorize(url_a: str, url_b: str, kind: str) -> str:
    """Likely category of a flagged pair, from its URLs and its kind (``exact`` or ``near``)."""
    host_a, path_a, query_a = _parts(url_a)
    host_b, path_b, query_b = _parts(url_b)
    if host_a != host_b:
        return "regional mirror"
    if path_a == path_b:
        return "stale re-crawl" if query_a == query_b else "query-string mirror"
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
