"""Per-host boilerplate learning: text that recurs on many pages of one site is not content.

Per-fetch chrome that no tag marks as chrome (a "generated at ... by worker ..." line in a
plain ``<div>``, a rotating "related articles" list, a cookie banner, an A/B hero block)
survives :func:`~scrapy_dedup.content.text.page_text`, so two fetches of one page differ
by it. CCNet's remedy, per host: cut each page into blocks
(:func:`~scrapy_dedup.content.text.page_blocks`), normalize each block (:func:`normalize_block`:
lowercase, punctuation deleted, digit runs to ``0``), hash it and count on how many distinct
pages of the host it occurs; a block seen on at least ``min_pages`` of them is boilerplate
and is left out of the text that is fingerprinted (:func:`text_to_fingerprint`). How a page is
then judged, the same in the crawl, the offline audit and ``benchmarks/bench_quality.py``:
:class:`BoilerplateJudge`.

The rules (:class:`BoilerplateRule`), and why:

* **Only pages judged unique are counted** (:meth:`BoilerplateLearner.learn`). A duplicate's
  blocks are its kept page's blocks again: counting them would make a page's own paragraphs
  "boilerplate" once it had been fetched ``min_pages`` times under different URLs.
* **Short and long blocks never count**: fewer than ``min_block_words`` words (a "Yes" table
  cell: two pages that differ only in such cells must stay apart), or longer than
  :data:`MAX_BLOCK_CHARS` (a paragraph is content; chrome is a line or a banner).
* **Never below ``min_words``**: when the blocks left would hold fewer words than that, the
  page is fingerprinted on its whole text (a page made only of template is judged as today).
* **Warm-up.** Until a host has ``warmup_pages`` unique pages counted, its pages are
  fingerprinted on their whole text: no verdict rests on a template seen on a handful of pages.
  A page unique by it is compared with the host's recent kept pages, both less the host's boilerplate
  so far (:meth:`BoilerplateJudge._warmup_match`; the table counts the warm-up's pages too): per-fetch
  chrome already on ``min_pages`` pages no longer keeps two fetches of one page apart.
* **Once boilerplate, always** (per host, at most ``capacity // 4`` blocks): eviction from the
  counts never turns a learnt block back into content, so a page's text does not flip back.
* **Re-check.** The learner remembers the last ``recheck_pages`` kept pages of each host. When
  the warm-up ends (the page that ends it included), and whenever a block becomes boilerplate,
  it hands back those of them whose text to fingerprint changed (the return of
  :meth:`BoilerplateLearner.learn`), for the caller to store under their own URLs as well
  (``add_unless_exact``: even when the newer text is near the page's older one, which a later
  duplicate may not be near): their later duplicates, judged on the newer text, find them. A page
  kept before that window keeps its older fingerprint; a later duplicate of it is found by its whole
  text, as without learning (:class:`BoilerplateJudge` checks both).

What is not learnt: a line that varies in words rather than numbers on every fetch (a weekday
and month name, a hexadecimal request id) never hashes alike twice; the verification stage
(``content/sketch.py``) has to absorb it, as without learning.

Bounded memory, per host: the counts (:class:`BlockTable`) hold at most ``capacity`` blocks
as numpy arrays (hash uint64, count uint32, last page uint32: 16 bytes a block) plus at most
``capacity // 4`` boilerplate hashes (8 bytes each): 72 KiB at the default 4,096; plus, for each
of the last ``recheck_pages`` kept pages, its blocks (its main text) and, when the judge fingerprinted
it with the engine's own fingerprinter, its words (:class:`PageWords`: their text, about the main
text's size again, 8 bytes a word for their hashes and 8 a block, its block hashes and its last
:data:`PRINTS_KEPT` fingerprints, about 2 KB each), so that its re-checks are not tokenized again: at the
default 32 pages, about 1.4 MB a host for pages of 2,000 words.
Per process, apart from the hosts: the hashes of the last blocks hashed (at most 32,768 blocks of at
most :data:`MAX_BLOCK_CHARS` characters, about 100 bytes each: a host's template is the same strings
on every page, normalized and hashed once). When a page's new blocks take
the counts past ``capacity``, the blocks with the lowest counts leave (the least recently seen
first) until three quarters are left. Counts are never above the truth (an evicted block that
comes back starts again at one), so eviction can only delay a block becoming boilerplate,
never make content boilerplate; a block on every page outranks the one-page blocks that fill
the table, so it stays. The hashes are BLAKE2b of the normalized bytes (63 bits: no page can aim
at a learnt block's hash), the same in every process: among blocks of equal count last seen on
the same page, eviction goes by hash, so Python's per-process ``hash()`` made the verdicts differ
from one process to the next. A table shared through Redis (``content/redis_boilerplate.py``)
keys BLAKE2b with a salt kept there. No Scrapy imports.
"""
from __future__ import annotations

import difflib
import functools
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from hashlib import blake2b
from itertools import compress, repeat
from operator import is_, itemgetter
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprint, ContentFingerprinter, Verdict
from scrapy_dedup.content.simhash import byte_token_digests, byte_token_hashes, exact_hash, hamming, \
    hashes_of_digests, word_bytes_per_block
from scrapy_dedup.content.sketch import VerifyRule
from scrapy_dedup.content.text import MAX_NAME_CHARS, SUBTITLE_MARK

__all__ = ["BoilerplateRule", "BlockTable", "BoilerplateLearner", "BoilerplateJudge", "Judgement", "Reduction",
           "normalize_block", "normal_lines", "normal_digest", "block_hashes", "text_to_fingerprint", "host_of",
           "RecentBlocks"]

# One byte table does all of the normal form on UTF-8 bytes, in C: ASCII letters lowercased, ASCII
# punctuation and symbols deleted (as CCNet: "app-07" is "app0"), every digit to "0" (runs of "0" then
# collapse to one). Non-ASCII bytes stay as they are: a letter of another script is a letter (not
# lowercased: rare in chrome), and so is non-ASCII punctuation (a dash, a non-breaking space).
_NORMAL = bytes(c + 32 if 65 <= c <= 90 else 48 if 48 <= c <= 57 else c for c in range(256))
_PUNCTUATION = bytes(c for c in range(128) if not (chr(c).isalnum() or chr(c) in " \n"))
_ZEROS = re.compile(rb"00+")
# What else a per-fetch line varies in, to the digits' placeholder too, in a block that holds a number: English
# weekday and month names (full or short: "Tue, 03 Mar 2026"), and hexadecimal ids (a word of 6+ hexadecimal
# characters with a digit: a request id "a3f9c2e1-b2c4", its dash deleted). A content block holding one of them
# is a block still: it hashes alike only with a block the same in every other word.
_DATE_NAMES = ("monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun "
               "january february march april may june july august september october november december "
               "jan feb mar apr jun jul aug sep sept oct nov dec").split()
# (the lookahead after the first \b admits only the first characters of the alternatives: the same matches, and
# most word starts are passed over without trying the 40 names, a third faster)
_VARYING = re.compile(rb"\b(?=[0a-f" + "".join(sorted({name[0] for name in _DATE_NAMES})).encode()
                      + rb"])(?:(?=[0a-f]{6,}\b)[a-f]*0[0a-f]*|" + "|".join(
                          sorted(_DATE_NAMES, key=len, reverse=True)).encode() + rb")\b")
_TOP_BIT = 1 << 63


def _normal_lines(text: str) -> list[bytes]:
    """The normal form of each line of ``text`` (blocks joined by newlines), as UTF-8: one translation of all."""
    data = text.encode("utf-8", "surrogatepass").translate(_NORMAL, _PUNCTUATION)
    lines = data.split(b"\n")
    if b"0" not in data:
        return lines
    # names and ids only in a block that holds a number (a per-fetch line does): the regular expressions run
    # once over those lines joined (no match crosses a newline: it is neither a word nor a hexadecimal
    # character, and it is a word boundary), not over the page
    numbered = [i for i, line in enumerate(lines) if b"0" in line]
    done = _ZEROS.sub(b"0", _VARYING.sub(b"0", b"\n".join([lines[i] for i in numbered]))).split(b"\n")
    for i, line in zip(numbered, done):
        lines[i] = line
    return lines


def normal_lines(text: str) -> list[bytes]:
    """The normal form (:func:`normalize_block`) of each line of ``text``, as UTF-8: of each block of a page,
    given its blocks joined by newlines."""
    return _normal_lines(text)


def normal_digest(lines: list[bytes]) -> str:
    """The hash of a page's whole text in normal form, from its :func:`normal_lines`: BLAKE2b, 8 bytes, hex
    (``content/judge.py``, :func:`~scrapy_dedup.content.judge.normal_text_hash`)."""
    return blake2b(b"\n".join(lines), digest_size=8).hexdigest()


def normalize_block(block: str) -> str:
    """The CCNet-style normal form that is hashed: ASCII letters lowercased, ASCII punctuation deleted,
    every run of digits one ``0``, and so are, in a block with a number, weekday and month names and
    hexadecimal ids (whitespace as in
    the block: :func:`~scrapy_dedup.content.text.page_blocks` collapsed it; a lone punctuation mark deleted
    leaves its two spaces). ``"Generated 2026-01-05 12:00 by app-07"`` and ``"generated 2025-12-31 09:41 by
    app-3"`` both give ``"generated 0 0 by app0"``; ``"Tue, 03 Mar"`` and ``"Fri, 12 Jun"`` ``"0 0 0"``."""
    return b"\n".join(_normal_lines(block)).decode("utf-8", "surrogatepass")


#: a title's words, a version number one word ("2.99.2" is not "2.99" plus a "2")
_TITLE_WORD = re.compile(r"\w+(?:[.\-]\w+)*")
#: stored pages per host whose name (``<title>``, headings and subtitle; the first two at most
#: ``text.MAX_NAME_CHARS``) the judge remembers: at most about 4 MB a host, about 0.5 MB for names of 100 characters
TITLES_KEPT = 4096

_DIGITS = re.compile(r"\d+")


def _substituted(ours: list[str], theirs: list[str], numbers: bool = True) -> bool:
    """Whether each of two lists of lines (a title, a page's headings) has a line the other has not, even with
    words added or left out (``"X: difference between revisions"`` has ``"X"``); False when one is empty
    (nothing to tell by). ``numbers``: a number is a word of its own ("2.74" is not "2.76"); else every run of
    digits is one (a page's headings with a number changed are its headings)."""
    if not ours or not theirs or ours == theirs:
        return False
    if not numbers:
        ours, theirs = [_DIGITS.sub("0", line) for line in ours], [_DIGITS.sub("0", line) for line in theirs]
    a, b = ([set(_TITLE_WORD.findall(line.lower())) for line in lines] for lines in (ours, theirs))

    def unmatched(mine: list[set[str]], other: list[set[str]]) -> bool:
        return any(not any(m <= o or o <= m for o in other) for m in mine if m)

    return unmatched(a, b) and unmatched(b, a)


def _name_lines(named: str) -> list[str]:
    """A page's ``<title>`` and headings, one a line (``Extraction.title`` before its subtitle), less the last line
    when the name was cut at ``text.MAX_NAME_CHARS``: that line may be a heading cut short, not the page's."""
    lines = named.split("\n")
    return lines[:-1] if len(named) >= MAX_NAME_CHARS else lines


def _words_added(ours: list[str], theirs: list[str]) -> bool:
    """Whether, of two pages' headings (digits one word, as in :func:`_substituted` without ``numbers``), one has a
    heading that holds every word of the other's heading in its place and more: ``"40 check-ins related to
    "trunk""`` where the other has ``"40 check-ins"``. The headings are aligned by those both have the same (a
    heading added or left out between two others, a section of a page edited, is no heading changed)."""
    if not ours or not theirs or ours == theirs:
        return False
    a, b = ([frozenset(_TITLE_WORD.findall(_DIGITS.sub("0", line).lower())) for line in lines]
            for lines in (ours, theirs))
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return any(m and o and (m < o or o < m) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag == "replace"
               for m in a[i1:i2] for o in b[j1:j2])


#: blocks longer than this (characters) are content, never boilerplate: a cookie banner or a footer is
#: a few hundred characters; a paragraph of a page is what tells it apart (and skipping it keeps this cheap)
MAX_BLOCK_CHARS = 400


def block_hashes(blocks: list[str], min_block_words: int, key: bytes | None = None,
                 normal: list[bytes] | None = None, block_words: np.ndarray | None = None) -> np.ndarray:
    """Hashes (uint64, top bit set: 63 bits) of the normalized blocks; 0 for a block that does not count:
    fewer than ``min_block_words`` words or longer than :data:`MAX_BLOCK_CHARS`. ``normal``: the normal form
    of every block (:func:`normal_lines` of the blocks joined by newlines) when the caller has it;
    ``block_words``: the words of each block as the rule counts them (:func:`_block_words`) when it has them.

    BLAKE2b (8 bytes), keyed by ``key`` when given (a table shared through Redis, whose key is a random salt
    kept there): the same in every process, so that which blocks a full table evicts, or a host's last room
    for boilerplate takes (both ordered by hash among equals), and so the verdicts, do not depend on the
    process (Python's ``hash()`` is keyed per process)."""
    out = np.zeros(len(blocks), dtype=np.uint64)
    if not blocks:
        return out
    lengths = np.fromiter(map(len, blocks), dtype=np.int64, count=len(blocks))
    if block_words is None:
        block_words = _block_words(blocks)
    candidates = np.flatnonzero((lengths <= MAX_BLOCK_CHARS) & (block_words >= min_block_words))
    if not len(candidates):
        return out
    # A host's template blocks recur on each of its pages, as the same strings: their hashes are remembered
    # (per key, in this process); the others get one normalization pass over them all (a newline cannot
    # be in a block: it is whitespace). The top bit set: never 0, which means "does not count".
    picked = [blocks[i] for i in candidates.tolist()]
    cache = _BLOCK_HASH_CACHE.get(key)
    if cache is None or len(cache) > _BLOCK_HASH_CACHE_LIMIT:
        cache = _BLOCK_HASH_CACHE[key] = {}
    values = list(map(cache.get, picked))
    new = [i for i, value in enumerate(values) if value is None]
    if new:
        normalized = (_normal_lines("\n".join([picked[i] for i in new])) if normal is None
                      else [normal[i] for i in candidates[new].tolist()])
        digest = functools.partial(blake2b, digest_size=8, key=key) if key else functools.partial(blake2b,
                                                                                                   digest_size=8)
        hashes = [int.from_bytes(digest(norm).digest(), "little") | _TOP_BIT for norm in normalized]
        for i, value in zip(new, hashes):
            values[i] = cache[picked[i]] = value
    out[candidates] = np.array(values, dtype=np.uint64)
    return out


#: key -> block -> its hash (see block_hashes); emptied when past the limit (about 100 bytes a block)
_BLOCK_HASH_CACHE: dict[bytes | None, dict[str, int]] = {}
_BLOCK_HASH_CACHE_LIMIT = 1 << 15


def _block_words(blocks: Sequence[str]) -> np.ndarray:
    """The words of each block as the rule counts them: its spaces and one (``page_blocks`` collapsed its
    whitespace), counted in C, summed by the caller in numpy (a Python sum over a page's blocks cost more)."""
    return np.fromiter(map(str.count, blocks, repeat(" ")), dtype=np.int64, count=len(blocks)) + 1


def _rule_words(blocks: Sequence[str], words: PageWords | None) -> np.ndarray:
    """:func:`_block_words` of a page's ``blocks``, from its :class:`PageWords` of them (counted once) when given:
    counting the spaces of a page's blocks costs about a tokenization's tenth, and a page is asked several times
    (its block hashes, its text to fingerprint in both passes of the audit, its own words)."""
    return words.rule_words(blocks) if words is not None else _block_words(blocks)


def in_sorted(table: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Which of ``hashes`` are in ``table`` (sorted uint64), as a boolean array (binary search)."""
    hashes = np.asarray(hashes, dtype=np.uint64)
    if not len(table):
        return np.zeros(len(hashes), dtype=bool)
    pos = np.minimum(np.searchsorted(table, hashes), len(table) - 1)
    return table[pos] == hashes


@dataclass(frozen=True)
class BoilerplateRule:
    """When a block is boilerplate, and what the learner may hold (see the module doc)."""

    min_pages: int = 4
    min_block_words: int = 2
    warmup_pages: int = 10
    capacity: int = 4096
    min_words: int = 20
    recheck_pages: int = 32

    @classmethod
    def from_params(cls, params: Any) -> "BoilerplateRule":
        """The rule of an object with the engine parameters' ``boilerplate_*`` attributes (the crawl's
        settings, the audit's config, the parameters' defaults)."""
        return cls(min_pages=params.boilerplate_min_pages, warmup_pages=params.boilerplate_warmup_pages,
                   capacity=params.boilerplate_capacity)

    def __post_init__(self) -> None:
        for name in ("min_pages", "min_block_words", "capacity", "min_words"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"boilerplate {name} must be a positive integer, got {value!r}")
        for name in ("warmup_pages", "recheck_pages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"boilerplate {name} must be an integer >= 0, got {value!r}")


class BlockTable:
    """One host's block counts (on how many counted pages each block hash occurs, at most ``capacity``
    blocks) and its boilerplate: the blocks that reached ``min_pages``, kept once in (at most
    ``capacity // 4``; past that, no block becomes boilerplate any more)."""

    __slots__ = ("capacity", "min_pages", "pages", "_keys", "_counts", "_seen", "_boiler")

    def __init__(self, capacity: int = BoilerplateRule.capacity, min_pages: int = BoilerplateRule.min_pages):
        self.capacity = capacity
        self.min_pages = min_pages
        self.pages = 0  # pages counted
        self._keys = np.zeros(0, dtype=np.uint64)  # sorted
        self._counts = np.zeros(0, dtype=np.uint32)
        self._seen = np.zeros(0, dtype=np.uint32)  # the last page (its number) each block was on
        self._boiler = np.zeros(0, dtype=np.uint64)  # sorted

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def nbytes(self) -> int:
        return self._keys.nbytes + self._counts.nbytes + self._seen.nbytes + self._boiler.nbytes

    @property
    def boilerplate(self) -> np.ndarray:
        """The boilerplate block hashes (sorted)."""
        return self._boiler

    def counts(self, hashes: np.ndarray) -> np.ndarray:
        """The count of each hash (0 for one not in the table)."""
        return _lookup(self._keys, self._counts, np.asarray(hashes, dtype=np.uint64))

    def is_boilerplate(self, hashes: np.ndarray) -> np.ndarray:
        return in_sorted(self._boiler, hashes)

    def add_page(self, hashes: np.ndarray) -> np.ndarray:
        """Count one page (each distinct nonzero hash once); returns the hashes that became boilerplate."""
        page = np.unique(np.asarray(hashes, dtype=np.uint64))
        page = page[page != 0]
        self.pages += 1
        if not len(page):
            return page
        pos = np.searchsorted(self._keys, page)
        found = pos < len(self._keys)
        found[found] = self._keys[pos[found]] == page[found]
        self._counts[pos[found]] += 1
        self._seen[pos[found]] = self.pages
        new, at = page[~found], pos[~found]
        self._keys = np.insert(self._keys, at, new)
        self._counts = np.insert(self._counts, at, np.uint32(1))
        self._seen = np.insert(self._seen, at, np.uint32(self.pages))
        grown = page[(self.counts(page) >= self.min_pages) & ~self.is_boilerplate(page)]
        grown = grown[: max(0, self.capacity // 4 - len(self._boiler))]
        if len(grown):
            self._boiler = np.union1d(self._boiler, grown)
        if len(self._keys) > self.capacity:
            self._evict(self.capacity * 3 // 4)
        return grown

    def _evict(self, keep: int) -> None:
        """Keep the ``keep`` blocks of highest count (the most recently seen among equal counts)."""
        order = np.lexsort((self._seen, self._counts))  # ascending: lowest count, oldest first
        kept = np.sort(order[len(order) - keep:])  # positions in key order
        self._keys, self._counts, self._seen = self._keys[kept], self._counts[kept], self._seen[kept]


def _lookup(keys: np.ndarray, values: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    if not len(keys):
        return np.zeros(len(hashes), dtype=values.dtype)
    pos = np.minimum(np.searchsorted(keys, hashes), len(keys) - 1)
    return np.where(keys[pos] == hashes, values[pos], 0).astype(values.dtype)


@dataclass(frozen=True)
class Reduction:
    """The text to fingerprint for one page, and how it came about.

    ``state``: ``"warmup"`` (the host is still learning: the whole text), ``"reduced"``
    (``removed`` boilerplate blocks left out), ``"whole"`` (none found), ``"template"`` (what
    would be left is under ``min_words``: the page is only what its host's other pages carry, and
    :class:`BoilerplateJudge` keeps it undecided; ``text`` is the whole text).
    """

    #: the text less boilerplate (``reduced``); None: the whole text, :attr:`text` joins it when first read
    given_text: str | None
    state: str
    removed: int = 0
    hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64), repr=False)
    blocks: tuple[str, ...] = field(default=(), repr=False)
    #: the page's words (:class:`PageWords`) when the judge tokenized it: its other texts, and its
    #: re-checks while it is a recent kept page, are fingerprinted from them without tokenizing again
    words: PageWords | None = field(default=None, repr=False, compare=False)
    #: which blocks its text holds (``reduced``: a boolean per block; None: all of them)
    kept: np.ndarray | None = field(default=None, repr=False, compare=False)

    @cached_property
    def text(self) -> str:
        """The text to fingerprint: the text given, else its blocks (those kept) joined, only when read (a judge
        with the page's words fingerprints from them, and the join widens every block of another string width
        character by character)."""
        if self.given_text is not None:
            return self.given_text
        if self.kept is not None:
            return " ".join(compress(self.blocks, self.kept.tolist()))
        return " ".join(self.blocks)


def text_to_fingerprint(table: BlockTable, blocks: Sequence[str], rule: BoilerplateRule = BoilerplateRule(),
                        hashes: np.ndarray | None = None, *, warmup: bool = True,
                        words: PageWords | None = None) -> Reduction:
    """The text to fingerprint of a page of ``blocks`` given its host's ``table`` (see the module doc).

    ``hashes`` are :func:`block_hashes` of ``blocks`` if already computed. ``warmup=False``: the
    blocks the table holds as boilerplate so far are left out even during the warm-up (the guard of
    :class:`BoilerplateJudge` asks what a decision would be with the template known so far).
    ``words``: the page's words if tokenized, kept with the result.
    """
    if hashes is None:
        hashes = block_hashes(list(blocks), rule.min_block_words)
    blocks = tuple(blocks)  # a recent page's are a tuple already: not copied
    if warmup and table.pages < rule.warmup_pages:
        return Reduction(None, "warmup", 0, hashes, blocks, words)
    boiler = table.is_boilerplate(hashes)
    if not boiler.any():
        return Reduction(None, "whole", 0, hashes, blocks, words)
    kept = ~boiler
    # the words of the text less boilerplate, " ".join of the kept blocks (an empty text: one word), counted as
    # the rule counts them (spaces and one) without joining it
    if (int(_rule_words(blocks, words)[kept].sum()) if kept.any() else 1) < rule.min_words:
        return Reduction(None, "template", 0, hashes, blocks, words)
    return Reduction(None, "reduced", int(boiler.sum()), hashes, blocks, words, kept)


class BoilerplateLearner:
    """Hosts -> :class:`BlockTable`: ``prepare`` a page, decide on ``Reduction.text``, then ``learn`` it if unique.

    ``tables`` makes a host's table (default: a local :class:`BlockTable`; ``content/redis_boilerplate.py``
    has one shared through Redis), ``hash_key`` keys the block hashes (:func:`block_hashes`: None, per
    process). Not thread-safe (one per crawl thread, or a lock around both calls: :class:`BoilerplateJudge`).
    """

    def __init__(self, rule: BoilerplateRule = BoilerplateRule(), tables: Callable[[str], Any] | None = None,
                 hash_key: bytes | Callable[[], bytes] | None = None):
        self.rule = rule
        self.tables: dict[str, Any] = {}
        self._new_table = tables or (lambda host: BlockTable(rule.capacity, rule.min_pages))
        #: a callable is asked on first use (a salt read from Redis, under the caller's outage policy)
        self.hash_key = hash_key
        self._recent: dict[str, deque[tuple[str, Reduction]]] = {}
        #: frozen (:meth:`freeze`): every host's template is known, nothing more is learnt
        self.frozen = False

    def freeze(self) -> None:
        """Stop learning: from now on every page is judged less its host's whole template (no warm-up, no
        counting, no re-check): the offline audit's second pass, after a first one counted every host."""
        self.frozen = True
        self._recent.clear()

    def table(self, host: str) -> BlockTable:
        table = self.tables.get(host)
        if table is None:
            table = self.tables[host] = self._new_table(host)
        return table

    def prepare(self, host: str, blocks: list[str], words: PageWords | None = None) -> Reduction:
        """The text to fingerprint of a page of ``host`` (nothing is learned yet); ``words``: the page's words
        (:class:`PageWords` of ``blocks``), which keep its block hashes for its other judgements."""
        table = self.table(host)
        refresh = getattr(table, "refresh", None)
        if refresh is not None:  # a shared table reads what other processes learnt
            refresh()
        if callable(self.hash_key):
            self.hash_key = self.hash_key()
        hashes = (words.block_hashes(blocks, self.rule.min_block_words, self.hash_key) if words is not None
                  else block_hashes(blocks, self.rule.min_block_words, self.hash_key))
        return text_to_fingerprint(table, blocks, self.rule, hashes, warmup=not self.frozen, words=words)

    def learn(self, host: str, url: str, reduction: Reduction) -> list[tuple[str, str]]:
        """Count a page judged unique; returns the recent kept pages whose text to fingerprint changed.

        Each returned (URL, text) is a recently kept page's text under the boilerplate learned
        now, to be stored under its URL (the re-check of the module doc): when the warm-up ends,
        every recent page; after it, those holding a block that has just become boilerplate.
        """
        return [(kept_url, again.text) for kept_url, again in self.learn_pages(host, url, reduction)]

    def learn_pages(self, host: str, url: str, reduction: Reduction) -> list[tuple[str, Reduction]]:
        """:meth:`learn`, each re-checked page returned as its :class:`Reduction` under the boilerplate
        learned now (its ``text`` what :meth:`learn` returns; its ``words`` kept from its own judgement)."""
        if self.frozen:
            return []
        table = self.table(host)
        before = table.pages
        grown = table.add_page(reduction.hashes)
        ended_warmup = before < self.rule.warmup_pages <= table.pages
        recent = self._recent.get(host)
        if recent is None:
            recent = self._recent[host] = deque(maxlen=self.rule.recheck_pages)
        out = []
        if ended_warmup:  # this page was fingerprinted on its whole text too: it is re-checked with the others
            recent.append((url, reduction))
        if len(grown) or ended_warmup:
            grown = np.sort(np.asarray(grown, dtype=np.uint64))  # searched by in_sorted: cheaper than np.isin
            for kept_url, earlier in recent:
                if not ended_warmup and not in_sorted(grown, earlier.hashes).any():
                    continue
                again = text_to_fingerprint(table, earlier.blocks, self.rule, earlier.hashes,
                                            words=earlier.words)
                if again.text != earlier.text:
                    out.append((kept_url, again))
        if ended_warmup and recent:
            recent.pop()
        if self.rule.recheck_pages:
            recent.append((url, text_to_fingerprint(table, reduction.blocks, self.rule, reduction.hashes,
                                                    words=reduction.words)))
        return out

    def recent_pages(self, host: str) -> list[tuple[str, Reduction]]:
        """The last ``recheck_pages`` kept pages of ``host`` (URL, blocks), the most recent first."""
        return list(reversed(self._recent.get(host, ())))

    def recent(self, host: str, url: str) -> Reduction | None:
        """The blocks of ``url`` if it is one of the last ``recheck_pages`` kept pages of ``host``."""
        for kept_url, reduction in reversed(self._recent.get(host, ())):
            if kept_url == url:
                return reduction
        return None

    def blocks_learned(self, host: str) -> int:
        """Blocks of ``host`` that are boilerplate."""
        table = self.tables.get(host)
        return 0 if table is None else len(table.boilerplate)

    @property
    def nbytes(self) -> int:
        """Bytes of the block tables (the recent pages' blocks, at most ``recheck_pages`` a host, apart)."""
        return sum(t.nbytes for t in self.tables.values())


@dataclass(frozen=True)
class Judgement:
    """One page judged with boilerplate learning: the engine's ``verdict``, the ``fingerprint`` it rests
    on, the page's ``reduction``, whether a match was set aside because the host's template undoes it
    (``guarded``: the page kept) and how many recent kept pages were stored again (``rechecked``)."""

    verdict: Verdict
    fingerprint: ContentFingerprint
    reduction: Reduction
    guarded: bool = False
    rechecked: int = 0
    #: only its host's template was left (``reduction.state == "template"``): kept, neither stored nor learnt
    undecidable: bool = False
    #: the verdict is a near match that may rest on text less boilerplate: the two pages' reduced texts (step
    #: 1), or the whole text against the kept page's entries once its host has boilerplate (a reduced or
    #: re-checked text): enough to drop an item, not to call two URLs one page (``url/mining.py``:
    #: ``same_page_evidence``)
    reduced_match: bool = False

    def counts(self) -> dict[str, int]:
        """What a crawl counts of this judgement (``dedup/content/boilerplate/*``): its page's state when not
        ``whole`` (reduced: fingerprinted with boilerplate removed; warmup), a guarded match, the re-checks."""
        state = self.reduction.state
        counts = {f"boilerplate/{state}": 1} if state != "whole" else {}
        if self.guarded:
            counts["boilerplate/guarded"] = 1
        if self.rechecked:
            counts["boilerplate/rechecked"] = self.rechecked
        return counts


def second_key(exact: bytes) -> bytes:
    """The exact-layer key of a page's other entries in the store (its whole text when its reduced text came
    first, a re-checked text): derived from their exact hash, so that no exact hash of a page's whole text
    finds one of them (an exact match means the same whole text, nothing less)."""
    return blake2b(exact, digest_size=16, person=b"boilerplate-2nd").digest()


def host_of(url: str) -> str:
    """The host a page's blocks are counted under (lowercase; "" for a URL without one)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


#: fingerprints a :class:`PageWords` keeps (its texts asked for again; about 2 KB each at the default sketch size)
PRINTS_KEPT = 6


class PageWords:
    """A page's words, tokenized once, from which the fingerprint of any of its texts (its blocks less some
    blocks) is made without tokenizing again: the whole text, the text less its host's boilerplate, and
    while it is one of its host's recent kept pages, its re-checks and the guard's texts.

    The words of blocks joined by spaces are the blocks' words one after the other (a space is no word
    character, and lowercasing is the same on either side of one), so the words of the text of the blocks
    ``kept`` are the page's words of those blocks, and every fingerprint is the fingerprinter's own of that
    text (the shingles of each text are formed from its own word sequence, across the places where left-out
    blocks were). Held: ``text``, the words joined by spaces (UTF-8: what the exact hash hashes, about the
    size of the page's text), ``hashes`` (8 bytes a word), ``counts`` (the words of each block, 8 bytes a
    block)."""

    __slots__ = ("fingerprinter", "text", "hashes", "counts", "_bounds", "_block_hashes", "_prints", "_normal_hash",
                 "_rule_words", "_recent")

    def __init__(self, fingerprinter: ContentFingerprinter, blocks: list[str], recent: RecentBlocks | None = None):
        """``recent``: the words and normal forms of the last blocks read (:class:`RecentBlocks`), which a block
        read again takes instead of being cut, hashed and normalized again (not pickled with the page)."""
        self.fingerprinter = fingerprinter
        self._recent = recent
        read = recent.words(blocks) if recent is not None else None
        self._rule_words: np.ndarray | None = None
        if read is not None:
            self.hashes, self.counts, self.text, self._rule_words = read
        else:
            tokens, self.counts = word_bytes_per_block(blocks)
            self.hashes = byte_token_hashes(tokens)
            self.text = b" ".join(tokens)
        self._bounds: tuple[np.ndarray, np.ndarray] | None = None
        self._block_hashes: dict[tuple, np.ndarray] = {}
        self._prints: dict[tuple, ContentFingerprint] = {}  # (kept blocks, exact) -> fingerprint
        self._normal_hash: str | None = None

    def rule_words(self, blocks: Sequence[str]) -> np.ndarray:
        """:func:`_block_words` of the page's ``blocks`` (those it was made of), counted once."""
        if self._rule_words is None:
            self._rule_words = _block_words(blocks)
        return self._rule_words

    def block_hashes(self, blocks: list[str], min_block_words: int, key: bytes | None = None) -> np.ndarray:
        """:func:`block_hashes` of the page's ``blocks`` (those it was made of), computed once for each
        ``(min_block_words, key)``: the offline audit judges a page three times (its two passes, the DUST
        miner of its mirrors report)."""
        memo = (min_block_words, key)
        hashes = self._block_hashes.get(memo)
        if hashes is None:
            normal = None
            if self._normal_hash is None:  # the first time: every block normalized, for the normal hash too
                normal = self._normal_lines(blocks)
                self._normal_hash = normal_digest(normal)
                if len(normal) != len(blocks):  # a block holding a newline (page_blocks makes none)
                    normal = None
            hashes = self._block_hashes[memo] = block_hashes(blocks, min_block_words, key, normal,
                                                             self.rule_words(blocks))
        return hashes

    def normal_hash(self, blocks: list[str]) -> str:
        """:func:`~scrapy_dedup.content.judge.normal_text_hash` of the page's ``blocks`` (those it was made of),
        from the normal form its block hashes were made of: the audit's first pass asks for both (boilerplate
        learning, the URL-level sameness), and each normalizes every block of the page."""
        if self._normal_hash is None:
            self._normal_hash = normal_digest(self._normal_lines(blocks))
        return self._normal_hash

    def _normal_lines(self, blocks: list[str]) -> list[bytes]:
        """:func:`normal_lines` of the page's ``blocks`` joined by newlines (those of its recent blocks remembered)."""
        normal = self._recent.normal_lines(blocks) if self._recent is not None else None
        return normal_lines("\n".join(blocks)) if normal is None else normal

    def made_like(self, fingerprinter: ContentFingerprinter) -> bool:
        """Whether this page's fingerprints are those ``fingerprinter`` makes (shingles, bits, sketch): a copy
        of the same fingerprinter in another process is, whatever its ``min_words``."""
        mine = self.fingerprinter
        return mine is fingerprinter or (mine.shingle_size, mine.bits, mine.sketch_size) == (
            fingerprinter.shingle_size, fingerprinter.bits, fingerprinter.sketch_size)

    def exact(self, kept: np.ndarray | None = None) -> bytes:
        """The exact hash of the text of the blocks ``kept`` (a boolean per block; None: all)."""
        if kept is None or kept.all():
            return blake2b(self.text, digest_size=16).digest()
        if self._bounds is None:  # where each word starts and ends in ``text``
            spaces = np.flatnonzero(np.frombuffer(self.text, dtype=np.uint8) == 32)
            self._bounds = (np.concatenate(([0], spaces + 1)), np.concatenate((spaces, [len(self.text)])))
        starts, ends = self._bounds
        first = np.concatenate(([0], np.cumsum(self.counts)))  # the first word of each block
        edges = np.diff(np.concatenate(([0], kept.view(np.int8), [0])))
        runs = zip(first[np.flatnonzero(edges == 1)].tolist(), first[np.flatnonzero(edges == -1)].tolist())
        text = b" ".join([self.text[starts[a]:ends[b - 1]] for a, b in runs if b > a])
        return blake2b(text, digest_size=16).digest()

    def fingerprint(self, kept: np.ndarray | None = None, exact: bytes | None = None) -> ContentFingerprint:
        """The fingerprint of the text of the blocks ``kept`` (None: the whole text); ``exact``: its exact
        hash if the caller has it. The last few are kept: the audit's judgements of a page (its two passes,
        the mirrors report's miner, which judges as its first pass) ask for the same texts again."""
        memo = (None if kept is None else kept.tobytes(), exact)
        fp = self._prints.get(memo)
        if fp is None:
            hashes = self.hashes if kept is None else self.hashes[np.repeat(kept, self.counts)]
            fp = self.fingerprinter.fingerprint_hashes(hashes, self.exact(kept) if exact is None else exact)
            if len(self._prints) >= PRINTS_KEPT:
                del self._prints[next(iter(self._prints))]  # the oldest
            self._prints[memo] = fp
        return fp

    def __reduce__(self) -> tuple:
        # Pickled (the audit's spool between its passes, a worker's pages) with its arrays as bytes: numpy
        # pickles an array by a generic path, about ten times the time of its bytes, and a page has several.
        # Where its words start and end in ``text`` is left out (made again when asked for).
        return (_page_words, (self.fingerprinter, self.text, self.hashes.tobytes(), self.counts.tobytes(),
                              {memo: hashes.tobytes() for memo, hashes in self._block_hashes.items()},
                              self._prints, self._normal_hash,
                              None if self._rule_words is None else self._rule_words.tobytes()))


def _page_words(fingerprinter: ContentFingerprinter, text: bytes, hashes: bytes, counts: bytes,
                block_hashes: dict[tuple, bytes], prints: dict[tuple, ContentFingerprint],
                normal_hash: str | None, rule_words: bytes | None = None) -> PageWords:
    """A :class:`PageWords` unpickled (:meth:`PageWords.__reduce__`); its arrays read-only views of the bytes."""
    words = PageWords.__new__(PageWords)
    words.fingerprinter, words.text, words._bounds, words._recent = fingerprinter, text, None, None
    words.hashes, words.counts = np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(counts, dtype=np.int64)
    words._block_hashes = {memo: np.frombuffer(value, dtype=np.uint64) for memo, value in block_hashes.items()}
    words._prints, words._normal_hash = prints, normal_hash
    words._rule_words = None if rule_words is None else np.frombuffer(rule_words, dtype=np.int64)
    return words


#: characters of the blocks whose words and normal form a :class:`RecentBlocks` remembers: about 5 bytes each (the
#: block, its words, their hashes, its normal form), so about 20 MB. Set with the audit benchmark's real corpus at
#: hand (development material for this choice): it holds the last 4.2 of its 5.3 million characters of distinct
#: blocks, and 71% of the text of the pages it tokenizes is among them (82% with no bound)
RECENT_BLOCK_CHARS = 1 << 22


class RecentBlocks:
    """The words (their hashes, how many, their UTF-8 bytes joined by spaces) and the normal form
    (:func:`normal_lines`) of the last blocks read, by their text, at most :data:`RECENT_BLOCK_CHARS` characters
    of them (the oldest leave first): a page's words and normal form are its blocks' one after the other (a
    block's words and normal form are a function of the block alone: a newline separates two blocks and no word,
    lowercasing or normal-form match crosses one), so a page is cut, hashed and normalized only in the blocks
    not read lately. The pages of a site share blocks: those of its template that survive the extraction, and
    a near duplicate most of its paragraphs. Not thread-safe (one per worker)."""

    def __init__(self, max_chars: int | None = None):
        self.max_chars = RECENT_BLOCK_CHARS if max_chars is None else max_chars
        #: block -> [its words' digests (8 bytes each), its words joined by spaces, how many, its normal form or None,
        #: its words as the rule counts them (:func:`_block_words`)]
        self._blocks: OrderedDict[str, list[Any]] = OrderedDict()
        self._chars = 0

    def words(self, blocks: Sequence[str]) -> tuple[np.ndarray, np.ndarray, bytes, np.ndarray] | None:
        """The word hashes, the words of each block and the words joined by spaces of the page of ``blocks``
        (what :func:`word_bytes_per_block` and :func:`byte_token_hashes` give of it), and the words of each
        block as the rule counts them (:func:`_block_words`); None without blocks."""
        if not blocks:
            return None
        entries: list[Any] = list(map(self._blocks.get, blocks))  # (None: a block not read lately)
        missing = list(compress(range(len(entries)), map(is_, entries, repeat(None))))
        if missing:
            texts = [blocks[i] for i in missing]
            tokens, counts = word_bytes_per_block(texts)
            digests = byte_token_digests(tokens)
            ends = np.cumsum(counts)
            new = [[digests[8 * start:8 * end], b" ".join(tokens[start:end]), end - start, None, rule]
                   for start, end, rule in zip((ends - counts).tolist(), ends.tolist(), _block_words(texts).tolist())]
            for i, entry in zip(missing, new):
                entries[i] = entry
            self._remember(dict(zip(texts, new)))  # (a block twice on the page: once)
        return (hashes_of_digests(b"".join(map(itemgetter(0), entries))),
                np.fromiter(map(itemgetter(2), entries), dtype=np.int64, count=len(entries)),
                b" ".join(filter(None, map(itemgetter(1), entries))),  # (a block without words: none)
                np.fromiter(map(itemgetter(4), entries), dtype=np.int64, count=len(entries)))

    def normal_lines(self, blocks: Sequence[str]) -> list[bytes] | None:
        """:func:`normal_lines` of ``blocks`` joined by newlines (None when a block holds a newline itself)."""
        if not blocks:
            return None
        entries: list[Any] = list(map(self._blocks.get, blocks))
        lines = (list(map(itemgetter(3), entries)) if None not in entries
                 else [None if entry is None else entry[3] for entry in entries])
        missing = list(compress(range(len(lines)), map(is_, lines, repeat(None))))
        if missing:
            normal = normal_lines("\n".join([blocks[i] for i in missing]))
            if len(normal) != len(missing):
                return None
            for i, line in zip(missing, normal):
                lines[i] = line
                if entries[i] is not None:
                    entries[i][3] = line
        return lines  # type: ignore[return-value]  # every line filled

    def _remember(self, new: dict[str, list[Any]]) -> None:
        self._blocks.update(new)
        self._chars += sum(map(len, new))
        while self._chars > self.max_chars and self._blocks:
            oldest, _ = self._blocks.popitem(last=False)
            self._chars -= len(oldest)


class BoilerplateJudge:
    """The decision rule of boilerplate learning, one for the crawl, the audit and the quality benchmark.

    For each page (its blocks, from :func:`~scrapy_dedup.content.text.page_blocks`), first: a page that,
    less its host's site-wide template, has under ``min_words`` words (:meth:`_site_words`) is
    undecidable: kept, counted and named (``Judgement.undecidable``,
    :meth:`ContentDeduplicator.record_undecidable`), neither stored nor learnt. Else:

    1. Its text less its host's boilerplate (:meth:`BoilerplateLearner.prepare`), when anything was
       left out, is checked first, under the exact hash of the page's *whole* text: the page's first
       entry in the store. An exact match is the verdict: the same whole text, whatever the host's
       template did since the kept page was stored (an exact copy is always counted exact; a page
       whose text differs from it only in its boilerplate is a near duplicate at distance 0). A near
       match is the verdict when it is with a page of the same host (once a host's template is gone,
       what is left may be a paragraph another site also shows) and rests on at least ``min_words``
       words of the page's own (:meth:`_own_words`: not in blocks counted on two pages or more, so
       not the post teasers a blog's index page shares with its archive and tag pages).
    2. Else its whole text is checked (stored under a key derived from its exact hash when step 1
       stored that hash): an exact match is the verdict, then a near match. The whole text is what
       finds a page kept before its host learnt a block (that block is in its stored fingerprint: its
       re-fetch, judged on the reduced text alone, would be missed); in the warm-up it is the only one.
    3. A near match of the whole text is a decision taken without the host's (whole) template: the
       guard. When the kept page is one of the last ``recheck_pages`` kept pages of the same host (its
       blocks at hand), both pages are compared again less what may become the template
       (:meth:`_template_undoes`), even in the warm-up; if that undoes the match, the page is kept
       (``Judgement.guarded``). A kept page older than that is judged as without learning.
       A near match (of step 1 or 2) between two pages of one host whose names differ (``<title>``,
       headings, subtitle) is not taken either (:meth:`_titles_differ`): the same page edited keeps its
       name, a sibling that shares most of its text (the next release's notes, a listing of another
       subject) has its own (docs/content.md).
       In the warm-up, a page left unique so is compared with each of the host's recent kept pages,
       both less the host's boilerplate so far (:meth:`_warmup_match`); a match there is a near match
       (``reduced_match``).
    4. A page kept is learnt (its blocks counted) and the recent kept pages whose text changed are
       stored again under their URLs (the re-check; under keys no whole text's exact hash finds). Each
       text that was new is stored (a page whose reduced text differs from its whole text has two
       entries), so one that is then judged a duplicate on its other text may stay in the store under
       its URL.

    Thread-safe (one lock around the learner and the two store calls of a page).
    """

    def __init__(self, engine: ContentDeduplicator, learner: BoilerplateLearner,
                 host_of_key: Callable[[str], str] = host_of, page_of_key: Callable[[str], str] | None = None):
        self.engine = engine
        self.learner = learner
        #: the host of a store key (a URL; the audit's keys are page numbers, their hosts known apart)
        self.host_of = host_of_key
        #: the page a store key's URL shows or is a view of, by its URL alone (the crawl's: url/views.py page_key;
        #: None: each key its own), for :meth:`_titles_differ`
        self.page_of = page_of_key
        #: host -> the names of its last stored pages (URL -> title, headings, subtitle), for :meth:`_titles_differ`
        self._titles: dict[str, OrderedDict[str, str]] = {}
        self._lock = threading.Lock()

    def check(self, url: str, blocks: list[str], *, host: str | None = None,
              fingerprint: Callable[[str], ContentFingerprint] | None = None,
              degenerate: Callable[[ContentFingerprint], bool] | None = None,
              whole: ContentFingerprint | None = None, timestamp: float | None = None,
              declares: str | None = None, title: str | None = None, words: PageWords | None = None) -> Judgement:
        """Judge the page at ``url`` made of ``blocks`` (``fingerprint``/``degenerate``: the caller's
        fingerprinter of the page's host, default the engine's; ``whole``: the fingerprint of the whole
        text if the caller has it; ``timestamp``/``declares``: what the representative policy may look
        at, as in :meth:`ContentDeduplicator.check_fingerprint`; ``title``: the page's name, its ``<title>``,
        headings and subtitle (``Extraction.title``), None when it has none or the caller does not know it;
        ``words``: the page's :class:`PageWords` of ``blocks`` if the caller tokenized them already, used when made with
        the fingerprint parameters of the engine's fingerprinter: the page is not tokenized again)."""
        engine, learner = self.engine, self.learner
        record = functools.partial(engine.record_answer, timestamp=timestamp, declares=declares)
        host = self.host_of(url) if host is None else host
        # with the engine's own fingerprinter, every text of a page is fingerprinted from one tokenization
        # (PageWords); a caller's fingerprint function (the crawl's, cached) is called on each text
        fingerprinter = engine.fingerprinter if fingerprint is None else None
        fingerprint = fingerprint or engine.fingerprint
        degenerate = degenerate or engine.fingerprinter.is_degenerate
        with self._lock:
            usable = fingerprinter is not None and words is not None and words.made_like(fingerprinter)
            reduction = learner.prepare(host, blocks, words if usable else None)
            table = learner.table(host)
            page = None
            if usable:
                page = words  # tokenized by the caller: the same words, every fingerprint the same
                reduction = replace(reduction, words=page)
            elif fingerprinter is not None and (whole is None or reduction.state == "reduced"):
                page = PageWords(fingerprinter, blocks)
                reduction = replace(reduction, words=page)
            text = functools.partial(" ".join, blocks)  # the whole text: joined where read (without the page's words)
            if whole is None and reduction.state != "reduced":
                whole = page.fingerprint() if page is not None else fingerprint(text())
            if whole is not None and degenerate(whole):
                return Judgement(engine.check_fingerprint(url, whole, degenerate=True), whole, reduction)
            store = engine.store
            reduced = None
            if reduction.state == "reduced":
                # the page's first entry: its reduced text's simhash and sketch under its whole text's exact
                # hash, so that an exact copy is found exact whatever its host's template did since
                exact = whole.exact if whole is not None else page.exact() if page is not None else exact_hash(text())
                if page is not None:
                    reduced = page.fingerprint(~table.is_boilerplate(reduction.hashes), exact)
                else:
                    reduced = replace(fingerprint(reduction.text), exact=exact)
            if reduced is not None and degenerate(reduced):  # the host's min_words is above the rule's
                reduction = replace(reduction, given_text=None, state="template", removed=0, kept=None)
                reduced = None
                whole = whole or (page.fingerprint(exact=exact) if page is not None
                                  else fingerprint(text()))
                if degenerate(whole):
                    return Judgement(engine.check_fingerprint(url, whole, degenerate=True), whole, reduction)
            if reduction.state == "template" and self._site_words(host, reduction) < learner.rule.min_words:
                # only what most of its host's pages carry: no text of its own to judge it by
                whole = whole or (page.fingerprint() if page is not None else fingerprint(text()))
                return Judgement(engine.record_undecidable(url, timestamp=timestamp, declares=declares), whole,
                                 reduction, undecidable=True)
            reduced_stored = False
            if reduced is not None:
                answer = store.check_and_add(url, reduced)
                if answer[0] == "exact":
                    return Judgement(record(url, answer), reduced, reduction)
                if (answer[0] == "near" and self.host_of(answer[1] or "") == host
                        and (learner.frozen or self._own_words(host, reduction) >= learner.rule.min_words)
                        and not self._titles_differ(host, title, answer[1] or "", url)):
                    return Judgement(record(url, answer), reduced, reduction, reduced_match=True)
                reduced_stored = answer[0] == "unique"
                if reduced_stored:  # its entry stays under its URL: a later page matching it is told by its name
                    self._remember_title(host, url, title)
            whole = whole or (page.fingerprint(exact=reduced.exact if reduced is not None else None)
                              if page is not None else fingerprint(text()))
            # a page whose first entry holds its whole text's exact hash stores its whole text under another key
            answer = store.check_and_add(url, replace(whole, exact=second_key(whole.exact)) if reduced_stored
                                         else whole)
            if answer[0] == "exact":  # the same words: whatever the template, the same page
                return Judgement(record(url, answer), whole, reduction)
            if answer[0] == "near" and answer[1] == url and reduced_stored:
                answer = ("unique", None, None)  # its own reduced text, stored a moment ago
            guarded = answer[0] == "near" and (
                self._titles_differ(host, title, answer[1] or "", url)
                or self._template_undoes(host, reduction, answer[1] or "", fingerprint, degenerate, fingerprinter))
            if answer[0] == "near" and not guarded:  # the kept page's entry may be its text less boilerplate
                return Judgement(record(url, answer), whole, reduction,
                                 reduced_match=learner.blocks_learned(self.host_of(answer[1] or "")) > 0)
            if reduction.state == "warmup":  # nothing left out yet: the host's other pages tell its chrome
                paired = self._warmup_match(host, url, reduction, title, fingerprint, degenerate, fingerprinter)
                if paired is not None:
                    if answer[0] == "unique":  # its whole text stays in the store under its URL
                        self._remember_title(host, url, title)
                    return Judgement(record(url, paired), whole, reduction, reduced_match=True)
            verdict = record(url, ("unique", None, None))
            self._remember_title(host, url, title)
            rechecked = 0
            for kept_url, again in learner.learn_pages(host, url, reduction):
                if fingerprinter is not None and again.words is not None:  # its words kept: not tokenized again
                    kept = ~table.is_boilerplate(again.hashes) if again.state == "reduced" else None
                    fp = again.words.fingerprint(kept)
                else:
                    fp = fingerprint(again.text)
                if not degenerate(fp):  # stored even when near its older text: what is near the new text may not be
                    store.add_unless_exact(kept_url, replace(fp, exact=second_key(fp.exact)))
                    rechecked += 1
            return Judgement(verdict, reduced if reduced is not None else whole, reduction, guarded, rechecked)

    def _remember_title(self, host: str, url: str, title: str | None) -> None:
        """Keep the name of a page of ``host`` whose text was stored under its URL (a kept page, or a duplicate
        whose text less boilerplate was new): its last ``TITLES_KEPT`` such pages with one."""
        if title is None:
            return
        titles = self._titles.get(host)
        if titles is None:
            titles = self._titles[host] = OrderedDict()
        titles[url] = title
        titles.move_to_end(url)
        if len(titles) > TITLES_KEPT:
            titles.popitem(last=False)

    def _titles_differ(self, host: str, title: str | None, kept_url: str, url: str) -> bool:
        """Whether the page and ``kept_url`` (of ``host``, one of its last ``TITLES_KEPT`` stored pages with a
        name) have different names (``<title>``, headings, subtitle: ``title`` and the kept page's): the same
        page re-fetched or edited keeps its name; a sibling that shares most of its text (the release notes of
        the next version, a versioned manual's next page, a listing of another subject) has its own. False
        when that cannot be told (no name, another host, the kept page's name gone)."""
        if title is None or self.host_of(kept_url) != host:
            return False
        titles = self._titles.get(host)
        kept = titles.get(kept_url) if titles is not None else None
        if kept is None or kept == title:
            return False
        # A name is the page's <title>, then its headings one a line (text.page_blocks_titled); the titles and
        # the headings are compared apart. A title that only adds words to the other's names a view of that
        # page (a wiki's "X (printable version)", "X: difference between revisions") or the page again; headings
        # or subtitle lines added or left out, the page edited (a section added): the same page, whose item the
        # keeper chooses. A sibling substitutes words: "GLib 2.74 release notes" for "GLib 2.76 release notes";
        # under one title, a listing of another subject its heading ("Search in [root]" for "Files in [root]",
        # "26 events occurring around C." for "25 events by user U occurring around T."), or its subtitle ("<- X"
        # under "Related changes", the related changes of page X). A heading that adds words in its place names
        # what the page shows too: '40 check-ins related to "trunk"' over the same entries as "40 check-ins", a
        # listing filtered (_words_added), unless the two URLs show one page by their view parameters (page_of:
        # a wiki's diff, headed "X: Difference between revisions", and its article; a view's item waits for its
        # page's in the item keeper). In headings a number is any number: a page edited may change one
        # ("Changes in release 3.2"); its title names the version. A subtitle is read in the normal form, and
        # only its lines of the page's own (_naming_lines).
        (named, _, our_sub), (kept_named, _, their_sub) = title.partition(SUBTITLE_MARK), kept.partition(SUBTITLE_MARK)
        ours, theirs = _name_lines(named), _name_lines(kept_named)
        return (_substituted(ours[:1], theirs[:1]) or _substituted(ours[1:], theirs[1:], numbers=False)
                or (_words_added(ours[1:], theirs[1:]) and not self._one_page(url, kept_url))
                or _substituted(self._naming_lines(host, our_sub), self._naming_lines(host, their_sub)))

    def _one_page(self, key: str, other: str) -> bool:
        """Whether two store keys' URLs show one page by the URLs alone (``page_of``: a view and its page)."""
        return key == other or (self.page_of is not None and self.page_of(key) == self.page_of(other))

    def _naming_lines(self, host: str, subtitle: str) -> list[str]:
        """The lines of a page's subtitle that name it, in boilerplate's normal form (a per-fetch line, "Served
        at 12:00 by node-7", is the same line at every fetch) less its host's boilerplate: a line most pages
        show (a rotating "Related articles" list drawn from one pool, placed under the heading) names none of
        them, and a line too short to count ("Prev") neither. A line a few pages share names them all (MediaWiki
        shows "<- X" above the related changes of X and above the pages linking to X)."""
        if not subtitle:
            return []
        lines = subtitle.split("\n")
        table = self.learner.table(host)
        key = self.learner.hash_key if not callable(self.learner.hash_key) else None
        hashes = block_hashes(lines, self.learner.rule.min_block_words, key)
        own = (hashes != 0) & ~table.is_boilerplate(hashes)
        return [normalize_block(line) for line, mine in zip(lines, own.tolist()) if mine]

    def _site_words(self, host: str, page: Reduction) -> int:
        """Words of the page outside its host's site-wide template: boilerplate blocks counted on at least
        half of the host's counted pages (and on ``min_pages``). A page under ``min_words`` of them is
        undecidable (only chrome, e.g. a page whose text the extraction left out); one whose boilerplate
        blocks are on a few pages only (its own copies, counted before they were caught) is judged on its
        whole text."""
        table = self.learner.table(host)
        floor = max(self.learner.rule.min_pages, table.pages // 2)
        site = table.is_boilerplate(page.hashes) & (table.counts(page.hashes) >= floor)
        return int(_rule_words(page.blocks, page.words)[~site].sum())

    def _own_words(self, host: str, page: Reduction) -> int:
        """Words of the page's reduced text in blocks of its own: neither boilerplate nor counted on two
        pages of ``host`` or more (a block too long to count is its own). A match of the reduced text that
        rests on fewer than ``min_words`` of them rests on text other pages show too (the post teasers of
        a blog's index page, all on its archive page): it is not taken, the whole text decides. Not asked
        of a frozen learner (the audit's second pass): its template is the whole dump's, and what is left is
        content (its first pass counted a re-fetch missed before the template was known as a page)."""
        table = self.learner.table(host)
        lengths = np.fromiter(map(len, page.blocks), dtype=np.int64, count=len(page.blocks))
        own = ~table.is_boilerplate(page.hashes) & np.where(page.hashes == 0, lengths > MAX_BLOCK_CHARS,
                                                             table.counts(page.hashes) <= 1)
        return int(_rule_words(page.blocks, page.words)[own].sum())

    def _fingerprints_less(self, pages: tuple[Reduction, Reduction], out: tuple[np.ndarray, np.ndarray],
                           fingerprint: Callable[[str], ContentFingerprint],
                           fingerprinter: ContentFingerprinter | None,
                           texts: tuple[str, str] | None = None) -> tuple[ContentFingerprint, ContentFingerprint]:
        """The fingerprints of two pages' texts less the blocks ``out`` marks (one boolean a block): from their
        words when both have them (the engine's fingerprinter), else ``fingerprint`` of ``texts`` (those
        texts, when the caller joined them) or of their other blocks joined."""
        if fingerprinter is not None and pages[0].words is not None and pages[1].words is not None:
            return pages[0].words.fingerprint(~out[0]), pages[1].words.fingerprint(~out[1])
        if texts is None:
            texts = (" ".join(compress(pages[0].blocks, (~out[0]).tolist())),
                     " ".join(compress(pages[1].blocks, (~out[1]).tolist())))
        return fingerprint(texts[0]), fingerprint(texts[1])

    def _warmup_match(self, host: str, url: str, page: Reduction, title: str | None,
                      fingerprint: Callable[[str], ContentFingerprint],
                      degenerate: Callable[[ContentFingerprint], bool],
                      fingerprinter: ContentFingerprinter | None = None) -> tuple[str, str, int] | None:
        """A near match (the store's answer: ``("near", kept URL, distance)``) of a page of ``host`` in its
        warm-up, judged unique on its whole text, with the closest of the host's recent kept pages (all of
        its kept pages while it warms up) when both, less the host's boilerplate so far, match by the engine's
        pair rule; None when none does.

        In the warm-up nothing is left out of a page's text yet, so two fetches of one page that differ in
        per-fetch chrome (a rotating list, a banner, an A/B block drawn from a few variants) are apart by their
        whole texts. The table has counted every unique page of the warm-up: a block already on ``min_pages``
        of them is boilerplate by the rule itself (a block on fewer is a post's teaser on a listing, a part of
        a guide on its view-all page, a product's spec rows on a comparison page: text). Limits besides: a
        page and a kept page whose names differ are never matched; at most two thirds of either page's words
        left out (chrome is around a page's text: a listing's next page, whose teasers other pages show, is
        mostly text shown elsewhere); and the words left out of the two must balance, within the pair rule's
        slack (``max_diff``, or ``1 - jaccard`` of the longer page's words): per-fetch chrome swaps a block
        for another, an aggregate (a view-all page, a digest) adds the text of other pages."""
        table = self.learner.table(host)
        if not len(table.boilerplate):
            return None  # nothing would be left out: the whole texts, judged already
        verify = getattr(self.engine.store, "verify", None) or VerifyRule()
        ours, words = table.is_boilerplate(page.hashes), _block_words(page.blocks)
        out, size = int(words[ours].sum()), int(words.sum())
        if 3 * out > 2 * size:
            return None
        best = None
        for kept_url, kept in self.learner.recent_pages(host):
            if kept_url == url or self._titles_differ(host, title, kept_url, url):
                continue
            theirs, kept_words = table.is_boilerplate(kept.hashes), _block_words(kept.blocks)
            kept_out, kept_size = int(kept_words[theirs].sum()), int(kept_words.sum())
            # chrome is around a page's text (a page mostly text shown elsewhere, a listing's teasers, is judged by
            # its whole text); and per-fetch chrome swaps, an aggregate adds
            if (not (out or kept_out) or 3 * kept_out > 2 * kept_size
                    or abs(out - kept_out) > max(verify.max_diff, (1 - verify.jaccard) * max(size, kept_size))):
                continue
            fb, fa = self._fingerprints_less((page, kept), (ours, theirs), fingerprint, fingerprinter)
            if degenerate(fa) or degenerate(fb) or not self.engine.pair_matches(fa, fb):
                continue
            distance = hamming(fa.simhash, fb.simhash)
            if best is None or distance < best[2]:
                best = ("near", kept_url, distance)
        return best

    def _template_undoes(self, host: str, page: Reduction, kept_url: str,
                         fingerprint: Callable[[str], ContentFingerprint],
                         degenerate: Callable[[ContentFingerprint], bool],
                         fingerprinter: ContentFingerprinter | None = None) -> bool:
        """Whether the page and ``kept_url`` (of ``host``, among its recent kept pages) could stop matching
        once their host's template is known (False when that cannot be told: the kept page's blocks are
        not at hand, or the template would change neither text).

        The template is not known yet, so both are compared less what may become it: the host's
        boilerplate, and the blocks both pages hold that the host's table counts on another page too
        (on 2 counted pages or more; while the host has fewer than ``min_pages`` pages counted, every
        block both hold: template and content cannot be told apart yet). A block of the kept page's
        own (counted once) stays: a re-fetch still matches its page.
        """
        if self.host_of(kept_url) != host:
            return False
        kept = self.learner.recent(host, kept_url)
        if kept is None:
            return False
        table, rule = self.learner.table(host), self.learner.rule
        shared = np.intersect1d(page.hashes[page.hashes != 0], kept.hashes)
        if table.pages >= rule.min_pages:
            shared = shared[table.counts(shared) >= 2]
        texts, drops = [], []
        for reduction in (page, kept):
            drop = np.isin(reduction.hashes, shared) | table.is_boilerplate(reduction.hashes)
            drops.append(drop)
            texts.append(" ".join(b for b, gone in zip(reduction.blocks, drop.tolist()) if not gone))
        if texts[0] == page.text and texts[1] == " ".join(kept.blocks):
            return False  # nothing would leave either text
        fa, fb = self._fingerprints_less((page, kept), (drops[0], drops[1]), fingerprint, fingerprinter,
                                         (texts[0], texts[1]))
        if degenerate(fa) or degenerate(fb):
            return False  # too little left to judge: the match stands, as without learning
        return not self.engine.pair_matches(fa, fb)
