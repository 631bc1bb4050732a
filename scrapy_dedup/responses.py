"""What the content layer reads of a Scrapy response: the source of its text, its encoding, its
``rel="canonical"`` link (the thin Scrapy side of ``content/pages.py``, which reads the page); and
which request fetched a kept page (:class:`KeptRequests`: what tells a refetch)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

from lxml import etree
from scrapy import Request
from scrapy.http import Response, TextResponse
from w3lib.url import safe_url_string

from scrapy_dedup.content.engine import Verdict
from scrapy_dedup.content.extract import ExtractionPolicy

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["source_of", "declared_canonical", "encoding_of", "hex_of", "KeptRequests"]


def source_of(response: TextResponse, policy: ExtractionPolicy) -> tuple[Any, str | None]:
    """What ``extract_text`` reads of a response, and its encoding: the tree Scrapy already parsed for the
    spider (not modified), or the bytes of a body longer than the policy's max_bytes (cut, not parsed
    whole) or of one Scrapy could not decode (a declared codec that is no text encoding: ours can)."""
    if len(response.body) > policy.max_bytes:
        return response.body, encoding_of(response)
    try:
        return response.selector.root, None
    except Exception:
        return response.body, None


#: the page's rel="canonical" link in its head (rel is a list of tokens, matched case-insensitively);
#: compiled once, and a path from the root, not ``//``: about 30 microseconds a page, not 300
CANONICAL_LINK = etree.XPath("/html/head/link[contains(concat(' ', normalize-space(translate(@rel, "
                              "'CANONICAL', 'canonical')), ' '), ' canonical ')]/@href")


def declared_canonical(response: Response, max_bytes: int | None = None) -> str | None:
    """The absolute URL of the page's first ``rel="canonical"`` link, None when it has none (or is no HTML).

    Read from the tree Scrapy parsed for the spider (and the extraction); a body over the policy's
    ``max_bytes`` is not parsed whole for the extraction, nor for this: it declares nothing here.
    DUST learning reads the HTML head with it too (after the HTTP ``Link`` header), with no cap.
    """
    if not isinstance(response, TextResponse) or (max_bytes is not None and len(response.body) > max_bytes):
        return None
    try:
        hrefs = cast("list[Any]", CANONICAL_LINK(response.selector.root))  # lxml-stubs: any XPath result type
        href = str(hrefs[0]).strip() if hrefs else ""
        return response.urljoin(safe_url_string(href)) if href else None
    except Exception:  # markup Scrapy cannot parse, or a link that is no URL: no declaration
        return None


def encoding_of(response: TextResponse) -> str | None:
    """The response's encoding as Scrapy reads it, or None where Scrapy's own lookup fails."""
    try:
        return response.encoding
    except Exception:
        return None


def hex_of(value: Any) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, int):
        return format(value, "x")
    return str(value)


class KeptRequests:
    """Which request fetched each kept page, when its URL alone does not tell (a fragment the crawl keeps, a
    POST): a verdict that matched a kept page of its own URL is a refetch only if the same request fetched it."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        #: a kept page's URL -> the fingerprint of the request that fetched it (only where the URL does not tell)
        self._kept_by_request: dict[str, bytes] = {}

    def same_request(self, verdict: Verdict, request: Request) -> Verdict:
        """``verdict`` with ``same_request`` False when it matched a kept page of its URL that another request
        fetched: the page's URL lost what told the requests apart (Scrapy's response URL has no fragment)."""
        identity = self._request_identity(request)
        if verdict.kind == "unique":
            if identity is None:
                self._kept_by_request.pop(verdict.url, None)
            else:
                self._kept_by_request[verdict.url] = identity
        elif verdict.is_refetch and self._kept_by_request.get(verdict.url) != identity:
            verdict = dataclasses.replace(verdict, same_request=False)
        return verdict

    def _request_identity(self, request: Request) -> bytes | None:
        """None when the page's URL identifies ``request`` (a GET whose canonical URL keeps no fragment), else
        its request fingerprint."""
        fingerprinter = self.crawler.request_fingerprinter
        if request.method == "GET" and not request.body:
            canonical_url = getattr(fingerprinter, "canonical_url", None)
            if "#" not in request.url or canonical_url is None or "#" not in canonical_url(request):
                return None
        return fingerprinter.fingerprint(request)
