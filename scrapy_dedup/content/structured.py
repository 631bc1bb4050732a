"""Is a text response a page to fingerprint, or structured data (JSON, an XML feed, CSS, JavaScript)?

The content fingerprints measure whether two pages say the same thing to a reader.
Structured text has no such text: a JSON API answer, an RSS/Atom feed or a sitemap,
a stylesheet or a script is data for programs. Fingerprinting it gives nothing useful
(a feed changes with every new item; two JSON answers that differ in their ids are
"near duplicates" of each other), and its bytes are not even HTML (Scrapy parses a JSON
response into a dict, not a tree). Such responses are skipped before extraction and
counted (``dedup/content/skipped_non_html``), never logged one by one.

What stays a page (fingerprinted):

* HTML and XHTML (``text/html``, ``application/xhtml+xml``, and an XML type whose root
  element is ``<html>``: XHTML served as ``application/xml``);
* ``text/plain`` and every other ``text/*`` type not named below (``text/markdown``,
  ``text/x-rst``, ...): documents written for readers, e.g. an RFC or a README mirrored
  on several hosts, whose duplicates are as real as HTML ones;
* no ``Content-Type`` at all, and any type not named below (what was fingerprinted
  before stays fingerprinted).

What is structured (skipped), by the type's essence (parameters and case ignored):

* JSON: any subtype containing ``json`` (``application/json``, ``text/json``,
  ``application/ld+json``, ``application/x-ndjson``, ...); also any body whose first
  bytes are the start of a JSON object or array (``{"`` / ``{}``, ``[{``, ``["``,
  ``[[{``, ``[]``, ``[1,``), whatever it is served as: frameworks serve JSON as
  ``text/html`` or ``text/plain`` by default, and no HTML or prose begins that way;
* XML that is not XHTML: ``application/xml``, ``text/xml``, any ``+xml`` subtype
  (``application/rss+xml``, ``application/atom+xml``, ``image/svg+xml``): feeds,
  sitemaps, data;
* JavaScript (``text/javascript``, ``application/javascript``, ``application/x-javascript``,
  ``ecmascript``) and CSS (``text/css``);
* tables of data: ``text/csv``, ``text/tab-separated-values``.

Binary bodies are a separate decision (``dedup/content/skipped_non_text``, in the Scrapy
adapter), taken before this one.
"""
from __future__ import annotations

import re

__all__ = ["structured_kind", "looks_binary", "SNIFF_BYTES"]

#: How much of the body :func:`structured_kind` looks at (a caller may pass more; the rest is ignored).
SNIFF_BYTES = 1024

_JSON_WHITESPACE = b" \t\r\n"
_UTF8_BOM = b"\xef\xbb\xbf"
# A JSON scalar and what must follow it for the body to be a JSON array of them (``[1, 2]``):
# "[1] Introduction" is prose, "[1, 2, 3]" is not.
_SCALAR_THEN_COMMA = re.compile(rb"(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)[ \t\r\n]*,")
# The root element of an XML document: after the declaration, PIs, comments and the doctype.
_XML_ROOT = re.compile(
    rb"(?:\s|<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>\[]*(?:\[.*?\])?\s*>)*<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)",
    re.DOTALL | re.IGNORECASE,
)


def structured_kind(content_type: str | bytes | None, head: bytes) -> str | None:
    """``"json"``, ``"xml"``, ``"javascript"``, ``"css"`` or ``"csv"`` for structured text, None for a page.

    ``content_type`` is the response's ``Content-Type`` header (None when absent), ``head``
    the first bytes of its body (:data:`SNIFF_BYTES` are enough). The rules and why are in
    the module doc. Pure and cheap: no decoding of the body, no parsing past its start.
    """
    essence = _essence(content_type)
    _, _, subtype = essence.partition("/")
    if "json" in subtype:
        return "json"
    if "javascript" in subtype or "ecmascript" in subtype:
        return "javascript"
    if essence == "text/css":
        return "css"
    if essence in ("text/csv", "text/tab-separated-values"):
        return "csv"
    head = head[:SNIFF_BYTES]
    if (subtype == "xml" or subtype.endswith("+xml")) and subtype != "xhtml+xml" and not _is_xhtml(head):
        return "xml"
    if _starts_like_json(head):
        return "json"
    return None


def _essence(content_type: str | bytes | None) -> str:
    """``type/subtype`` of a Content-Type value, lower-cased (empty when absent or unreadable)."""
    if not content_type:
        return ""
    if isinstance(content_type, (bytes, bytearray)):
        content_type = bytes(content_type).decode("latin-1")  # header bytes: any byte is a character
    return content_type.split(";", 1)[0].strip().lower()


def _is_xhtml(head: bytes) -> bool:
    match = _XML_ROOT.match(head.removeprefix(_UTF8_BOM))
    return match is not None and match.group(1).lower() == b"html"


def _starts_like_json(head: bytes) -> bool:
    """Whether ``head`` begins like a JSON object or array (see the module doc); blanks and a UTF-8 BOM skipped."""
    rest = head.removeprefix(_UTF8_BOM).lstrip(_JSON_WHITESPACE)
    if rest[:1] == b"{":
        return rest[1:].lstrip(_JSON_WHITESPACE)[:1] in (b'"', b"}")
    if rest[:1] != b"[":
        return False
    while rest[:1] == b"[":  # nested arrays: decide on the first element that is not one
        rest = rest[1:].lstrip(_JSON_WHITESPACE)
    first = rest[:1]
    if first == b"{":
        return rest[1:].lstrip(_JSON_WHITESPACE)[:1] in (b'"', b"}")
    return first in (b'"', b"]") or _SCALAR_THEN_COMMA.match(rest) is not None


_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13))


def looks_binary(body: bytes) -> bool:
    """A body served as text but mostly control bytes (an image, a zip) is not fingerprinted (``skipped_non_text``).

    A few stray NULs in real HTML do not count: more than 10% control bytes in the
    first 4 KiB do (text in any encoding, UTF-16 aside, has almost none).
    """
    head = body[:4096]
    if not head:
        return False
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return controls * 10 > len(head) and not head.startswith((b"\xff\xfe", b"\xfe\xff"))
