"""What the content layer reads of a Scrapy response: the source of its text, its encoding, its
``rel="canonical"`` link (the thin Scrapy side of ``content/pages.py``, which reads the page)."""
from __future__ import annotations

from typing import Any, cast

from lxml import etree
from scrapy.http import Response, TextResponse
from w3lib.url import safe_url_string

from scrapy_dedup.content.extract import ExtractionPolicy

__all__ = ["source_of", "declared_canonical", "looks_like_html", "encoding_of", "hex_of"]


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


def looks_like_html(value: str | bytes) -> bool:
    head = value[:2048].lstrip()
    return head[:1] in ("<", b"<")


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
