"""Per-host boilerplate learning: text that recurs on many pages of one site is not content.

Per-fetch chrome that no tag marks as chrome (a "generated at ... by worker ..." line in a
plain ``<div>``, a rotating "related articles" list, a cookie banner, an A/B hero block)
survives :func:`~scrapy_dedup.content.text.page_text`, so two fetches of one page differ
by it. CCNet's remedy, per host: cut each page into blocks
(:func:`~scrapy_dedup.content.text.page_blocks`), normalize each block (:func:`normalize_block`),
hash it (64 bits) and count on how many distinct pages of the host it occurs; a block seen
on at least ``min_pages`` of them is boilerplate and is left out of the text that is
fingerprinted (:func:`text_to_fingerprint`).

The rules (:class:`BoilerplateRule`), and why:

* **Only pages judged unique are counted** (:meth:`BoilerplateLearner.learn`). A duplicate's
  blocks are its kept page's blocks again: counting them would make a page's own paragraphs
  "boilerplate" once it had been fetched ``min_pages`` times under different URLs.
* **Short blocks never count** (fewer than ``min_block_words`` words: a "Yes" table cell, a
  "Next" link): two pages that differ only in which short cells they hold must stay apart.
* **Never below ``min_words``**: when the blocks left would hold fewer words than that, the
  page is fingerprinted on its whole text (a page made only of template is judged as today).
* **Warm-up, then a re-check.** Until a host has ``warmup_pages`` unique pages counted, its
  pages are fingerprinted on their whole text: no verdict depends on a template still being
  learned, so none drops an item because of it. When the warm-up ends, the learner hands back
  those pages' reduced texts (:attr:`Reduction.recheck`), which the caller stores under their
  own URLs, so that their later duplicates (judged on reduced text) find them. A block that
  becomes boilerplate after the warm-up does not change a kept page's stored fingerprint: a
  later duplicate is then judged against the older text, which can only miss a duplicate (keep
  an item), as without learning.

Bounded memory (:class:`BlockTable`): at most ``capacity`` blocks per host, as three numpy
arrays (hash uint64, count uint32, last page uint32: 16 bytes a block, 64 KiB per host at
the default 4,096, plus the warm-up pages' blocks until the warm-up ends). When a page's new
blocks take the table past its capacity, the blocks with the lowest counts leave (the
least recently seen first) until three quarters of it are left. Counts are never above the
truth (an evicted block that comes back starts again at one), so eviction can only delay a
block becoming boilerplate, never make content boilerplate; a block on every page of the
host outranks the one-page blocks that fill the table, so it stays. No Scrapy imports.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BoilerplateRule", "BlockTable", "BoilerplateLearner", "Reduction", "normalize_block",
           "block_hashes", "text_to_fingerprint"]

_HAS_DIGIT = re.compile(r"\w*\d\w*")
_NOT_WORD = re.compile(r"[^\w\s]+|_+")


def normalize_block(block: str) -> str:
    """CCNet-style normal form: lowercase, every word holding a digit one ``0``, punctuation
    removed, whitespace collapsed. ``"Generated 2026-01-05 12:00 by app-07"`` and
    ``"generated 2025-12-31 09:41 by app-3"`` both give ``"generated 0 0 0 0 by app 0"``."""
    text = _NOT_WORD.sub(" ", block.lower())
    return " ".join(_HAS_DIGIT.sub("0", text).split())


def block_hashes(blocks: list[str], min_block_words: int) -> np.ndarray:
    """64-bit hashes (uint64) of the normalized blocks; 0 for a block too short to count."""
    out = np.zeros(len(blocks), dtype=np.uint64)
    for i, block in enumerate(blocks):
        norm = normalize_block(block)
        if norm.count(" ") + 1 >= min_block_words and norm:
            # never 0 (0 means "does not count"): blake2b's top bit set
            out[i] = int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "big") | 1 << 63
    return out


@dataclass(frozen=True)
class BoilerplateRule:
    """When a block is boilerplate, and what the learner may hold (see the module doc)."""

    min_pages: int = 4
    min_block_words: int = 3
    warmup_pages: int = 20
    capacity: int = 4096
    min_words: int = 20

    def __post_init__(self) -> None:
        for name in ("min_pages", "min_block_words", "capacity", "min_words"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"boilerplate {name} must be a positive integer, got {value!r}")
        if not isinstance(self.warmup_pages, int) or self.warmup_pages < 0:
            raise ValueError(f"boilerplate warmup_pages must be an integer >= 0, got {self.warmup_pages!r}")


class BlockTable:
    """One host's block counts: on how many counted pages each block hash occurs, bounded by ``capacity``."""

    __slots__ = ("capacity", "pages", "_keys", "_counts", "_seen")

    def __init__(self, capacity: int = BoilerplateRule.capacity):
        self.capacity = capacity
        self.pages = 0  # pages counted
        self._keys = np.zeros(0, dtype=np.uint64)  # sorted
        self._counts = np.zeros(0, dtype=np.uint32)
        self._seen = np.zeros(0, dtype=np.uint32)  # the last page (its number) each block was on

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def nbytes(self) -> int:
        return self._keys.nbytes + self._counts.nbytes + self._seen.nbytes

    def counts(self, hashes: np.ndarray) -> np.ndarray:
        """The count of each hash (0 for one not in the table)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if not len(self._keys):
            return np.zeros(len(hashes), dtype=np.uint32)
        pos = np.minimum(np.searchsorted(self._keys, hashes), len(self._keys) - 1)
        return np.where(self._keys[pos] == hashes, self._counts[pos], 0).astype(np.uint32)

    def add_page(self, hashes: np.ndarray) -> None:
        """Count one page: each distinct nonzero hash once."""
        page = np.unique(np.asarray(hashes, dtype=np.uint64))
        page = page[page != 0]
        self.pages += 1
        if not len(page):
            return
        pos = np.searchsorted(self._keys, page)
        found = pos < len(self._keys)
        found[found] = self._keys[pos[found]] == page[found]
        self._counts[pos[found]] += 1
        self._seen[pos[found]] = self.pages
        new, at = page[~found], pos[~found]
        self._keys = np.insert(self._keys, at, new)
        self._counts = np.insert(self._counts, at, np.uint32(1))
        self._seen = np.insert(self._seen, at, np.uint32(self.pages))
        if len(self._keys) > self.capacity:
            self._evict(self.capacity * 3 // 4)

    def _evict(self, keep: int) -> None:
        """Keep the ``keep`` blocks of highest count (the most recently seen among equal counts)."""
        order = np.lexsort((self._seen, self._counts))  # ascending: lowest count, oldest first
        kept = np.sort(order[len(order) - keep:])  # positions in key order
        self._keys, self._counts, self._seen = self._keys[kept], self._counts[kept], self._seen[kept]


@dataclass(frozen=True)
class Reduction:
    """The text to fingerprint for one page, and how it came about.

    ``state``: ``"warmup"`` (the host is still learning: the whole text), ``"reduced"``
    (``removed`` boilerplate blocks left out), ``"whole"`` (none found, or what was left
    would be under ``min_words``). ``recheck``: (URL, reduced text) of the host's warm-up
    pages, set once, on the page whose learning ended the warm-up (see the module doc).
    """

    text: str
    state: str
    removed: int = 0
    hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64), repr=False)
    blocks: tuple[str, ...] = field(default=(), repr=False)
    recheck: tuple[tuple[str, str], ...] = ()


def text_to_fingerprint(table: BlockTable, blocks: list[str], rule: BoilerplateRule = BoilerplateRule(),
                        hashes: np.ndarray | None = None) -> Reduction:
    """The text to fingerprint of a page of ``blocks`` given its host's ``table`` (see the module doc).

    ``hashes`` are :func:`block_hashes` of ``blocks`` if already computed.
    """
    if hashes is None:
        hashes = block_hashes(blocks, rule.min_block_words)
    whole = " ".join(blocks)
    if table.pages < rule.warmup_pages:
        return Reduction(whole, "warmup", 0, hashes, tuple(blocks))
    boiler = table.counts(hashes) >= rule.min_pages
    if not boiler.any():
        return Reduction(whole, "whole", 0, hashes, tuple(blocks))
    kept = [block for block, drop in zip(blocks, boiler) if not drop]
    text = " ".join(kept)
    if len(text.split()) < rule.min_words:
        return Reduction(whole, "whole", 0, hashes, tuple(blocks))
    return Reduction(text, "reduced", int(boiler.sum()), hashes, tuple(blocks))


class BoilerplateLearner:
    """Hosts -> :class:`BlockTable`: ``prepare`` a page, decide on ``Reduction.text``, then ``learn`` it if unique.

    Not thread-safe (one per crawl thread, or a lock around both calls).
    """

    def __init__(self, rule: BoilerplateRule = BoilerplateRule()):
        self.rule = rule
        self.tables: dict[str, BlockTable] = {}
        self._warmup: dict[str, list[tuple[str, tuple[str, ...], np.ndarray]]] = {}

    def table(self, host: str) -> BlockTable:
        table = self.tables.get(host)
        if table is None:
            table = self.tables[host] = BlockTable(self.rule.capacity)
        return table

    def prepare(self, host: str, blocks: list[str]) -> Reduction:
        """The text to fingerprint of a page of ``host`` (nothing is learned yet)."""
        return text_to_fingerprint(self.table(host), blocks, self.rule)

    def learn(self, host: str, url: str, reduction: Reduction) -> tuple[tuple[str, str], ...]:
        """Count a page judged unique; returns the warm-up pages to re-check when this page ended the warm-up.

        Each returned (URL, text) is a kept page's reduced text, to be stored under its URL.
        """
        table = self.table(host)
        table.add_page(reduction.hashes)
        if reduction.state != "warmup":
            return ()
        pending = self._warmup.setdefault(host, [])
        pending.append((url, reduction.blocks, reduction.hashes))
        if table.pages < self.rule.warmup_pages:
            return ()
        del self._warmup[host]
        out = []
        for kept_url, blocks, hashes in pending:
            again = text_to_fingerprint(table, list(blocks), self.rule, hashes)
            if again.state == "reduced":
                out.append((kept_url, again.text))
        return tuple(out)

    @property
    def nbytes(self) -> int:
        """Bytes of the block tables (the warm-up pages' blocks, held until each host's warm-up ends, apart)."""
        return sum(t.nbytes for t in self.tables.values())
