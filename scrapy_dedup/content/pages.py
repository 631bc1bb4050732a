"""A page read once for the content layer: its host's extraction policy, its main text (and blocks),
its fingerprint; no Scrapy here (the crawl's extension hands in what a response holds).

* :func:`extraction_policies`: the extraction policy per host, from the engine's parameters and the
  per-domain overrides (``DEDUP_CONTENT_POLICIES``);
* :class:`PageReader`: one page in (its URL, Content-Type, body, and what to extract from), a
  :class:`PageReading` out (why it was skipped, or its policy, fingerprint, blocks and title), with
  one fingerprinter per degenerate-page rule and the fingerprints of the last texts remembered.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scrapy_dedup.content.boilerplate import host_of
from scrapy_dedup.content.engine import ContentFingerprint, ContentFingerprinter, Verdict
from scrapy_dedup.content.extract import POLICY_KEYS, ExtractionPolicy, extract_text
from scrapy_dedup.content.paragraphs import ParagraphCheck, text_blocks
from scrapy_dedup.content.params import ParamError
from scrapy_dedup.content.structured import SNIFF_BYTES, looks_binary, structured_kind
from scrapy_dedup._util.domains import DomainMap

__all__ = ["FINGERPRINT_CACHE_SIZE", "extraction_policies", "PageReading", "PageReader", "looks_like_html",
           "media_kind"]

logger = logging.getLogger("scrapy_dedup.extensions")  # the crawl's lines, under the logger they always had

#: fingerprints remembered by text digest: an exact duplicate's text (a mirror, a tracking or
#: session variant the URL layer could not fold) is not tokenized and hashed again. A few KB each.
FINGERPRINT_CACHE_SIZE = 512


def extraction_policies(cfg: Any) -> DomainMap[ExtractionPolicy]:
    """The crawl's extraction policy per host: ``DEDUP_STRIP_*``, ``DEDUP_MIN_WORDS``, ``DEDUP_MAX_BYTES``,
    overridden per domain by ``DEDUP_CONTENT_POLICIES``."""
    default = ExtractionPolicy.from_values({key: getattr(cfg, key) for key in POLICY_KEYS})
    per_domain = {}
    for domain, overrides in cfg.content_policies.items():
        policy = per_domain[domain] = default.overridden(overrides, f"DEDUP_CONTENT_POLICIES[{domain!r}]")
        if policy.min_words < cfg.shingle_size:
            raise ParamError(
                f"DEDUP_CONTENT_POLICIES: min_words ({policy.min_words}) must be at least "
                f"DEDUP_SHINGLE_SIZE ({cfg.shingle_size})"
            )
    return DomainMap(default, per_domain)


@dataclass
class PageReading:
    """What one page (a response) gave, remembered by its caller until it is judged (the crawl: weakly per
    response object)."""

    url: str
    #: why it has no fingerprint: ``skipped_non_text``, ``skipped_non_html`` or ``extraction_errors``
    skipped: str | None = None
    policy: ExtractionPolicy | None = None
    fingerprint: ContentFingerprint | None = None
    #: the main text cut at block elements, when its host learns boilerplate
    blocks: list[str] | None = None
    #: its name, its <title>, headings and subtitle (with its blocks; None without a title or heading): a near
    #: match across two names is not taken
    title: str | None = None
    truncated: bool = False
    judged: bool = False
    verdict: Verdict | None = None
    #: the page its URL serves at the URL-level strictness when not its verdict's cluster (content/judge.py)
    url_page: str | None = None
    #: its blocks checked for repeats (paragraph dedup on for its host), once judged
    paragraphs: ParagraphCheck | None = None
    #: a plain text's lines (an item's text content): its blocks for paragraph dedup, never judged as blocks
    lines: list[str] | None = None
    #: what it is for the URL-level sameness (``content/judge.py``: ``MEDIA_KINDS``), None when not told
    media: str | None = None


class PageReader:
    """Reads pages under their host's extraction policy into :class:`PageReading` (see the module doc).

    ``params``: the engine's parameters (shingle size, bits, sketch size); ``policies``: per host. Thread-safe
    (the pipeline's ``DEDUP_CONTENT_FIELD`` path may run in threads).
    """

    def __init__(self, params: Any, policies: DomainMap[ExtractionPolicy]):
        self.params = params
        self.policies = policies
        # One fingerprinter per distinct min_words (degenerate pages are decided per host).
        self._fingerprinters: dict[int, ContentFingerprinter] = {}
        self._cache: OrderedDict[tuple[int, bytes], ContentFingerprint] = OrderedDict()
        self._lock = threading.Lock()
        self._structured_logged = False

    def use(self, fingerprinter: ContentFingerprinter) -> None:
        """Fingerprint pages of ``fingerprinter.min_words`` with it (the engine's own, for the default policy)."""
        self._fingerprinters.setdefault(fingerprinter.min_words, fingerprinter)

    def fingerprinter_for(self, policy: ExtractionPolicy) -> ContentFingerprinter:
        """The fingerprinter of ``policy``'s degenerate-page rule (one per distinct ``min_words``)."""
        fp = self._fingerprinters.get(policy.min_words)
        if fp is None:
            fp = self._fingerprinters[policy.min_words] = ContentFingerprinter(
                shingle_size=self.params.shingle_size, bits=self.params.fingerprint_bits, min_words=policy.min_words,
                sketch_size=self.params.sketch_size,
            )
        return fp

    def fingerprint(self, fingerprinter: ContentFingerprinter, text: str) -> ContentFingerprint:
        """``fingerprinter.fingerprint(text)``, remembered for the last ``FINGERPRINT_CACHE_SIZE`` texts.

        The fingerprint is a pure function of the text, so an exact duplicate's text (on a
        duplicate-rich crawl, most fetched duplicates) costs a 16-byte digest (a few
        microseconds) instead of tokenizing, hashing every word and shingle and sketching.
        """
        key = (id(fingerprinter), hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        cache = self._cache
        with self._lock:
            fp = cache.get(key)
            if fp is not None:
                cache.move_to_end(key)
                return fp
        fp = fingerprinter.fingerprint(text)
        with self._lock:
            cache[key] = fp
            if len(cache) > FINGERPRINT_CACHE_SIZE:
                cache.popitem(last=False)
        return fp

    def read(self, url: str, content_type: bytes | None, body: bytes, *, is_text: bool,
             source: Callable[[ExtractionPolicy], tuple[Any, str | None]]) -> PageReading:
        """Read one page: ``content_type`` and ``body`` as fetched, ``is_text`` whether its fetcher decoded
        it as text; ``source(policy)``: what ``extract_text`` reads of it under its host's ``policy``, and
        its encoding (the crawl: the tree Scrapy parsed, or the body cut at the policy's ``max_bytes``)."""
        # JSON, XML feeds, CSS, JavaScript are data, not pages (content/structured.py says why). Asked of
        # every response: Scrapy makes some of them (``+json``) plain Responses, text all the same.
        page = PageReading(url)
        kind = structured_kind(content_type, body[:SNIFF_BYTES])
        if looks_binary(body) or (kind is None and not is_text):
            page.skipped = "skipped_non_text"
            return page
        if kind is not None:
            if not self._structured_logged:  # once per crawl: a line per response would flood the log
                self._structured_logged = True
                logger.info("Structured responses (JSON, XML feeds, CSS, JavaScript, CSV) are not fingerprinted, "
                            "only counted in dedup/content/skipped_non_html (the first: %s at %s)", kind, url)
            page.skipped = "skipped_non_html"
            return page
        page.policy = policy = self.policies.lookup(host_of(url))
        page.media = media_kind(content_type, body)
        source_value, encoding = source(policy)
        text = self._extracted(page, policy, source_value, encoding, "the response", "page not fingerprinted")
        if text is not None:
            page.fingerprint = self.fingerprint(self.fingerprinter_for(policy), text)
        return page

    @staticmethod
    def _extracted(page: PageReading, policy: ExtractionPolicy, value: Any, encoding: str | None, what: str,
                   then: str) -> str | None:
        """``value``'s main text under ``policy``, its truncation, blocks and title set on ``page``; None
        (``page.skipped``) when its markup cannot be read, told in one WARNING line naming ``what`` was read and
        what ``then`` happens."""
        try:
            extraction = extract_text(value, policy, encoding=encoding, blocks=policy.needs_blocks)
        except Exception as exc:  # hostile markup never stops the crawl
            logger.warning("Could not extract text of %s of %s (%s: %s); %s", what, page.url, type(exc).__name__,
                           exc, then)
            page.skipped = "extraction_errors"
            return None
        page.truncated = extraction.truncated
        page.blocks, page.title = extraction.blocks, extraction.title
        return extraction.text

    def read_content(self, url: str, value: Any) -> PageReading:
        """Read an item's content (``DEDUP_CONTENT_FIELD``) as the page at ``url``: HTML extracted under the
        host's policy as a response is, anything else taken as the page's text (its :attr:`~PageReading.lines`
        its blocks for paragraph dedup when the host has it on)."""
        page = PageReading(url)
        page.policy = policy = self.policies.lookup(host_of(url))
        if isinstance(value, (bytearray, memoryview)):  # bytes by another type: its bytes, not its repr
            value = bytes(value)
        if isinstance(value, (bytes, str)) and looks_like_html(value):
            extracted = self._extracted(page, policy, value, None, "the DEDUP_CONTENT_FIELD HTML", "item kept")
            if extracted is None:
                return page
            text = extracted
        else:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            page.lines = text_blocks(text) if policy.paragraphs else None
        page.fingerprint = self.fingerprint(self.fingerprinter_for(policy), text)
        return page


def media_kind(content_type: bytes | None, body: bytes) -> str:
    """``"html"`` for a response whose Content-Type names HTML (or, without one, whose body looks like it), else
    ``"text"`` (a raw file: ``text/plain``, Markdown, source code): the media kinds of the URL-level sameness."""
    media = (content_type or b"").split(b";", 1)[0].strip().lower()
    if media:
        return "html" if b"html" in media else "text"
    return "html" if looks_like_html(body[:2048]) else "text"


def looks_like_html(value: str | bytes) -> bool:
    """Whether an item's content is HTML (its first non-blank character is ``<``), not the page's text."""
    head = value[:2048].lstrip()
    return head[:1] in ("<", b"<")
