"""Which of two URLs of one page names it better: the URL sort key the representative policy ranks by.

The representative policy (``content/representative.py``) decides on the URLs of a cluster's
members without knowing what a URL is made of; its callers (the crawl's extension, the audit)
pass it :func:`url_preference`, which reads the canonicalizer's own tracking and session tables.
"""
from __future__ import annotations

from functools import lru_cache

from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.policy import UrlPolicy

__all__ = ["url_preference"]

#: only the two parameter switches: the question is "does this URL carry session or tracking noise?"
_NOISE = Canonicalizer(UrlPolicy(strip_tracking=True, strip_session=True, sort_query=False, drop_fragment=False))
_NOISE_SWITCHES = frozenset({"strip_tracking", "strip_session"})


@lru_cache(maxsize=16384)
def url_preference(url: str) -> tuple[int, int, int, int, str]:
    """The ``canonical`` sort key of a URL alone; smaller is better.

    (has session or tracking parameters, number of query parameters, length without
    the scheme, 0 for https else 1, the URL itself).
    """
    noisy = not _NOISE_SWITCHES.isdisjoint(_NOISE.canonicalize_with_info(url).fired)
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    query = rest.split("#", 1)[0].partition("?")[2]
    params = sum(1 for part in query.split("&") if part)
    return int(noisy), params, len(rest), 0 if scheme.lower() == "https" else 1, url
