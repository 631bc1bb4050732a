"""Paragraph dedup in the offline audit (``scrapy-dedup report --paragraphs``): the block-level ratio.

One pass, in dump order, the crawl's mechanism (:class:`~scrapy_dedup.content.paragraphs.ParagraphDeduplicator`):
the workers cut each page into blocks and hash them (:func:`block_digests_of`), this process looks
the digests up in order, so the result is the same for any ``--jobs``. The seen set is exact by
default (a Python set: about 100 bytes a distinct block); ``--paragraphs-bloom`` puts it in a Bloom
filter (:class:`~scrapy_dedup.seen.bloom.BloomSeenSet`, false positives at most 1e-6, growing as
needed). A WARC revisit (an identical copy of a page already read) counts its page's blocks again,
all of them repeats. No Scrapy imports.
"""
from __future__ import annotations

from array import array
from typing import Any

from scrapy_dedup.content.boilerplate import host_of
from scrapy_dedup.content.paragraphs import ExactBlockSet, ParagraphDeduplicator, block_digests
from scrapy_dedup.seen.base import SeenSet

__all__ = ["ParagraphAudit", "block_digests_of", "BLOOM_START_CAPACITY", "BLOOM_ERROR_RATE"]

#: blocks the audit's Bloom filter is sized for first (3.75 MB at 1e-6); it grows past it, its bound held
BLOOM_START_CAPACITY = 1_000_000
BLOOM_ERROR_RATE = 1e-6


def block_digests_of(blocks: list[str], cfg: Any) -> list[bytes | None]:
    """The digests a worker hands this process for a page of ``blocks`` (None for a short block)."""
    return block_digests(blocks, cfg.paragraphs_min_chars)


class ParagraphAudit:
    """The blocks of every page of a dump against one seen set; per page, its counts (for revisits)."""

    def __init__(self, cfg: Any):
        seen: SeenSet
        if cfg.paragraphs_bloom:
            from scrapy_dedup.seen.bloom import BloomSeenSet

            seen = BloomSeenSet(BLOOM_START_CAPACITY, BLOOM_ERROR_RATE)
        else:
            seen = ExactBlockSet()
        self.store = "bloom" if cfg.paragraphs_bloom else "exact"
        self.dedup = ParagraphDeduplicator(seen, cfg.paragraphs_min_chars)
        # per page, in page order (8 bytes a page): its counted and short blocks, for a revisit of it
        self._counted = array("i")
        self._short = array("i")

    def check(self, index: int, url: str, digests: list[bytes | None] | None) -> None:
        """Count the page at ``index``, the next page of the dump (``digests`` None: it has no text to cut)."""
        assert index == len(self._counted), "pages are counted in dump order, each once"
        counted = short = 0
        if digests is not None:
            self.dedup.check_digests(host_of(url), digests)
            counted = sum(d is not None for d in digests)
            short = len(digests) - counted
        self._counted.append(counted)
        self._short.append(short)

    def copy(self, index: int, url: str, target: int) -> None:
        """A WARC revisit at ``index`` of the page at ``target``: its counted blocks, all repeats."""
        assert index == len(self._counted), "pages are counted in dump order, each once"
        counted, short = self._counted[target], self._short[target]
        self.dedup.count_copy(host_of(url), counted, short)
        self._counted.append(counted)
        self._short.append(short)

    def summary(self, hosts: int = 20) -> dict[str, Any]:
        """The JSON report's ``paragraphs`` object (see docs/usage.md's "Paragraph-level dedup")."""
        total = self.dedup.total
        return {**total.to_dict(), "min_chars": self.dedup.min_chars, "store": self.store,
                "store_bytes": self.dedup.seen.size_bytes() if self.store == "bloom" else None,
                "hosts": [{"host": host, **counts.to_dict()} for host, counts in list(self.dedup.by_host())[:hosts]]}
