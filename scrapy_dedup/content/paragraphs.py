"""Paragraph-level exact deduplication: which blocks of a page were already seen on an earlier page.

Corpus builders (CCNet, Dolma) deduplicate below the page: a paragraph that was already kept once is
removed from every later document, whatever the rest of the document is. This module does that for
the crawl (``DEDUP_PARAGRAPHS``) and the offline audit (``scrapy-dedup report --paragraphs``), one
mechanism for both: :class:`ParagraphDeduplicator`.

What counts, and why:

* **A block** is what :func:`~scrapy_dedup.content.text.page_blocks` cuts the main text into
  (a paragraph, a list item, a table cell, a heading; a text record: a line, :func:`text_blocks`).
* **Normal form**: the boilerplate learner's (:func:`~scrapy_dedup.content.boilerplate.normalize_block`,
  as CCNet: lowercase, ASCII punctuation deleted, digit runs to ``0``), so ``"Updated 2026-01-05"`` and
  ``"updated 2025-12-31"`` are one block. Its BLAKE2b digest (20 bytes, unkeyed: the same in every
  process and in the audit) is the key of a seen set (``scrapy_dedup.seen``).
* **Short blocks are not deduplicated**: a block whose normal form has fewer than ``min_chars``
  characters (``"Home"``, ``"Next"``, ``"Yes"`` in a table) is left in the text and counted apart
  (``short``), never as a block nor as a duplicate: such lines recur everywhere without being
  repeated content, as CCNet and Dolma keep a length threshold for.
* **Order**: the first occurrence is kept, every later one is a repeat: blocks are looked up in page
  order, pages in the order they are checked (the crawl's verdict order; the dump's order). So a block
  repeated inside one page is a repeat from its second occurrence on.
* **Per host**: counted blocks and repeats, by the host of the page (the share of repeated blocks a
  host serves); the seen set itself is global (a paragraph copied from another site is a repeat too).

The seen set is a :class:`~scrapy_dedup.seen.base.SeenSet`: a local :class:`~scrapy_dedup.seen.bloom.BloomSeenSet`
(its false positives, at most its error rate, make a new block a repeat: it would be removed from the
text), a :class:`~scrapy_dedup.seen.redis.RedisBloomSeenSet` shared by the processes of a crawl (one
atomic ``BITFIELD`` per block: of two processes meeting a new block at once, exactly one sees it new),
or :class:`ExactBlockSet` (the audit's default: no false positive, about 100 bytes a block). One page's
blocks go to the set in one call (``add_many``: one pipelined round trip in Redis). No Scrapy imports.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from hashlib import blake2b

import numpy as np

from scrapy_dedup.content.boilerplate import in_sorted, normalize_block
from scrapy_dedup.seen.base import SeenSet

__all__ = ["ParagraphDeduplicator", "ParagraphCheck", "BlockCounts", "ExactBlockSet", "block_digests",
           "page_blocks_held", "strictly_nested", "text_blocks", "DEFAULT_MIN_CHARS"]

#: blocks whose normal form is shorter than this are not deduplicated (``DEDUP_PARAGRAPHS_MIN_CHARS``)
DEFAULT_MIN_CHARS = 40


def block_digests(blocks: Sequence[str], min_chars: int = DEFAULT_MIN_CHARS) -> list[bytes | None]:
    """The 20-byte digest of each block's normal form; None for a block under ``min_chars`` (not deduplicated).

    One normalization pass for the page (blocks hold no newline: :func:`page_blocks` and
    :func:`text_blocks` collapsed whitespace).
    """
    if not blocks:
        return []
    normalized = normalize_block("\n".join(blocks)).split("\n")
    return [blake2b(norm.encode("utf-8", "surrogatepass"), digest_size=20).digest() if len(norm) >= min_chars
            else None for norm in normalized]


def page_blocks_held(blocks: Sequence[str]) -> np.ndarray:
    """Every block of a page, short ones too, as the first 8 bytes of its :func:`block_digests` (uint64), sorted,
    a block as often as the page holds it (two entries of a list that differ only in a number are two of one
    block in normal form): what :func:`strictly_nested` compares. 8 bytes a block."""
    digests = block_digests(blocks, min_chars=0)
    return np.sort(np.array([int.from_bytes(d[:8], "little") for d in digests if d is not None], dtype=np.uint64))


def strictly_nested(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether one of two pages (their :func:`page_blocks_held`) holds every block of the other, as often, and
    more: a window of a listing and a longer window of it (the last 100 changes and the last 250, when there
    are 101). False when they hold the same blocks, or each holds a block the other lacks (a page edited in
    place: a sentence rewritten)."""
    if len(ours) == len(theirs):
        return False
    small, large = (ours, theirs) if len(ours) < len(theirs) else (theirs, ours)
    values, counts = np.unique(small, return_counts=True)
    known, known_counts = np.unique(large, return_counts=True)
    if not in_sorted(known, values).all():
        return False
    return bool((counts <= known_counts[np.searchsorted(known, values)]).all())


def text_blocks(text: str) -> list[str]:
    """The blocks of a plain text (a record's or an item's text, not HTML): its lines, whitespace collapsed,
    empty ones left out."""
    return [line for line in (" ".join(raw.split()) for raw in text.splitlines()) if line]


class ExactBlockSet(SeenSet):
    """An exact in-memory seen set (a Python set of digests): no false positive, about 100 bytes a key."""

    def __init__(self) -> None:
        self._keys: set[bytes] = set()

    def add(self, key: bytes) -> bool:
        size = len(self._keys)
        self._keys.add(key)
        return len(self._keys) != size

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def clear(self) -> None:
        self._keys.clear()


@dataclass
class BlockCounts:
    """Blocks counted (``blocks``: at least ``min_chars`` long), those already seen (``duplicates``), and the
    short blocks left alone (``short``)."""

    blocks: int = 0
    duplicates: int = 0
    short: int = 0

    @property
    def duplicate_share(self) -> float:
        """Repeated blocks over counted blocks (0.0 when none was counted)."""
        return self.duplicates / self.blocks if self.blocks else 0.0

    def add(self, other: "BlockCounts") -> None:
        self.blocks += other.blocks
        self.duplicates += other.duplicates
        self.short += other.short

    def to_dict(self) -> dict[str, int | float]:
        return {"blocks": self.blocks, "duplicate_blocks": self.duplicates, "short_blocks": self.short,
                "duplicate_block_ratio": self.duplicate_share}


@dataclass(frozen=True)
class ParagraphCheck:
    """One page checked: its ``blocks``, which of them are repeats (``repeated``, one flag each: a short
    block is never one), and the page's counts."""

    blocks: tuple[str, ...]
    repeated: tuple[bool, ...]
    counts: BlockCounts = field(default_factory=BlockCounts)

    @property
    def text(self) -> str:
        """The main text less its repeated blocks (blocks joined by a space, as the page text is)."""
        return " ".join(block for block, again in zip(self.blocks, self.repeated) if not again)


class ParagraphDeduplicator:
    """Pages' blocks against one seen set, in the order pages are checked; counts per host (see the module doc).

    Thread-safe (one lock around a page's look-up and its counts, so a page's blocks are looked up
    together and in order). A failing seen set (Redis away) raises from :meth:`check` with nothing
    counted: the caller decides (the crawl keeps the item with its whole text, under its outage policy).
    """

    def __init__(self, seen: SeenSet, min_chars: int = DEFAULT_MIN_CHARS):
        if not isinstance(min_chars, int) or isinstance(min_chars, bool) or min_chars < 1:
            raise ValueError(f"min_chars must be an integer >= 1, got {min_chars!r}")
        self.seen = seen
        self.min_chars = min_chars
        self.total = BlockCounts()
        self.hosts: dict[str, BlockCounts] = {}
        self._lock = threading.Lock()

    def check(self, host: str, blocks: Sequence[str]) -> ParagraphCheck:
        """Look the page's ``blocks`` up (and add the new ones); counts them under ``host``."""
        blocks = tuple(blocks)
        return ParagraphCheck(blocks, *self._check_digests(host, block_digests(blocks, self.min_chars)))

    def check_digests(self, host: str, digests: Sequence[bytes | None]) -> tuple[bool, ...]:
        """:meth:`check` from :func:`block_digests` already computed (the audit's workers compute them)."""
        return self._check_digests(host, digests)[0]

    def _check_digests(self, host: str, digests: Sequence[bytes | None]) -> tuple[tuple[bool, ...], BlockCounts]:
        keys = [d for d in digests if d is not None]
        with self._lock:
            new = iter(self.seen.add_many(keys) if keys else ())
            repeated = tuple(False if d is None else not next(new) for d in digests)
            page = BlockCounts(len(keys), sum(repeated), len(digests) - len(keys))
            self.total.add(page)
            self.hosts.setdefault(host, BlockCounts()).add(page)
        return repeated, page

    def count_copy(self, host: str, counted: int, short: int) -> None:
        """Count an identical copy of a page checked before (a WARC revisit): its ``counted`` blocks all repeats."""
        page = BlockCounts(counted, counted, short)
        with self._lock:
            self.total.add(page)
            self.hosts.setdefault(host, BlockCounts()).add(page)

    def host_counts(self, host: str) -> BlockCounts:
        return self.hosts.get(host) or BlockCounts()

    def by_host(self) -> Iterable[tuple[str, BlockCounts]]:
        """``(host, counts)``, hosts with the most repeated blocks first."""
        return sorted(self.hosts.items(), key=lambda kv: (-kv[1].duplicates, kv[0]))
