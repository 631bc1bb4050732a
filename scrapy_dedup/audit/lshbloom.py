"""``--method lshbloom``: near duplicates found in bounded memory, for dumps whose sketches do not fit.

LSHBloom (Khan et al., 2024) keeps MinHash-LSH's banding and replaces its buckets
(lists of page ids) with Bloom filters: a page is a near duplicate when one of its
band keys was already inserted by a kept page. Nothing per page is stored but the
band keys' bits, so memory is set by a flag, not by the pages' sketches.

The signature: ``bands * rows`` min-hashes of the page's distinct word-shingle
hashes (the same 5-word shingles and 64-bit hashes as the simhash), each the
minimum of ``a*x + b mod 2**64`` for fixed random odd ``a`` (a bijection of the
already uniform hashes). Not one-permutation hashing: on pages with fewer shingles
than bins its empty bins, however densified, make rows agree far more often than
``J`` (measured: a pair at ``J = 0.5`` shared a band key 70% of the time instead of
12%). Band ``b``'s key mixes its ``rows`` values and ``b``. Two pages with resemblance ``J`` share at least
one band key with probability ``1 - (1 - J**rows)**bands``: with the defaults (32 bands of 8 rows)
0.997 at ``J = 0.8``, 0.85 at 0.7, 0.43 at 0.6, 0.12 at 0.5, 0.002 at 0.3.

What it gives up and keeps (docs/audit.md's ``--method lshbloom`` row says it for
users): near duplicates are counted, not named (a Bloom filter says "seen", not
by which page: no cluster, pair or sample) and not verified (the S-curve above
is the rule); exact duplicates are exact and named (16-byte digests in a
:class:`~scrapy_dedup.content.compact.DigestTable`). The filter is sized for
``capacity`` kept pages at ``error_rate / bands`` per band key, so a new page is
wrongly flagged with probability at most about ``error_rate`` (memory
``bands * capacity * 1.44 * log2(bands / error_rate)`` bits: 106 bytes a kept page
at the defaults); ``capacity`` is what ``lshbloom_memory_mb`` holds, or the dump's
records when it is counted first. A full filter inserts no later kept page: their
duplicates are kept as unique (recall lost, never a page), with one WARNING.

The Bloom filter is pybloom-live's ``BloomFilter`` (a filter of fixed capacity
over arbitrary keys, which is what this needs). No Scrapy imports.
"""
from __future__ import annotations

import logging
import math
from array import array
from typing import Any, Optional

import numpy as np
from pybloom_live import BloomFilter

from scrapy_dedup._util.mix import fmix64_array
from scrapy_dedup.audit.records import Decision, SketchDecider, SketchFingerprint, sketch_fingerprint
from scrapy_dedup.content.compact import DigestTable
from scrapy_dedup.content.simhash import simhash_and_shingle_hashes

__all__ = ["LshBloomMethod", "band_keys", "bloom_bytes"]

logger = logging.getLogger(__name__)

_U64 = np.uint64
_MIX = _U64(0x9E3779B97F4A7C15)


def _permutations(count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` fixed bijections ``x -> a*x + b (mod 2**64)`` (odd ``a``), the same in every process."""
    rng = np.random.default_rng(0x15B1)
    a = rng.integers(0, 2**63, count, dtype=np.uint64) * _U64(2) + _U64(1)
    b = rng.integers(0, 2**63, count, dtype=np.uint64)
    return a, b


_PERMUTATIONS: dict[int, tuple[np.ndarray, np.ndarray]] = {}
_CHUNK = 2048  # shingles per block of the (shingles x permutations) product: bounded temporary memory


def band_keys(shingle_hashes: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``bands`` 64-bit keys of a page's distinct shingle hashes (see the module doc), as ``uint64``."""
    count = bands * rows
    if count not in _PERMUTATIONS:
        _PERMUTATIONS[count] = _permutations(count)
    a, b = _PERMUTATIONS[count]
    h = np.asarray(shingle_hashes, dtype=_U64)
    if not len(h):
        return np.zeros(0, dtype=_U64)
    signature = np.full(count, np.iinfo(np.uint64).max, dtype=_U64)
    with np.errstate(over="ignore"):
        for start in range(0, len(h), _CHUNK):
            block = h[start:start + _CHUNK, None] * a + b
            np.minimum(signature, block.min(axis=0), out=signature)
        keys = np.zeros(bands, dtype=_U64)
        grid = signature.reshape(bands, rows)
        for r in range(rows):
            keys = fmix64_array(keys ^ grid[:, r])
        return fmix64_array(keys ^ np.arange(bands, dtype=_U64) * _MIX)


def bloom_bytes(capacity: int, bands: int, error_rate: float) -> int:
    """Bytes of the filter for ``capacity`` kept pages (pybloom-live's sizing)."""
    per_key = error_rate / bands
    slices = math.ceil(math.log2(1 / per_key))
    bits_per_slice = math.ceil(capacity * bands * abs(math.log(per_key)) / (slices * math.log(2) ** 2))
    return slices * bits_per_slice // 8


def capacity_for(cfg: Any, expected_pages: Optional[int] = None) -> int:
    """Kept pages the filter is sized for: those ``lshbloom_memory_mb`` holds, fewer if the dump has fewer."""
    budget = cfg.lshbloom_memory_mb * 2**20
    per_page = bloom_bytes(1_000_000, cfg.lshbloom_bands, cfg.lshbloom_error_rate) / 1_000_000
    capacity = max(1, int(budget / per_page))
    if expected_pages is not None:
        capacity = min(capacity, max(1, expected_pages))
    return capacity


class LshBloomMethod:
    """The audit method: picklable fingerprints for the workers, one decider in the main process."""

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def fingerprint(self, text: str) -> SketchFingerprint:
        return sketch_fingerprint(text, self.cfg.min_words, self._band_keys)

    def _band_keys(self, tokens: list[str]) -> Optional[np.ndarray]:
        """uint64[bands] (None without a shingle)."""
        _, hashes = simhash_and_shingle_hashes(tokens, self.cfg.shingle_size)
        keys = band_keys(hashes, self.cfg.lshbloom_bands, self.cfg.lshbloom_rows)
        return keys if len(keys) else None

    def decider(self, expected_pages: Optional[int] = None) -> "LshBloomDecider":
        """A decider whose filter holds ``expected_pages`` kept pages (the dump's records, when counted ahead),
        at most what ``lshbloom_memory_mb`` holds."""
        return LshBloomDecider(self.cfg, capacity_for(self.cfg, expected_pages))


class LshBloomDecider(SketchDecider):
    """Exact digests first (named), then the band keys' Bloom filter (counted); see the module doc."""

    def __init__(self, cfg: Any, capacity: int):
        super().__init__()
        self.cfg = cfg
        bands = cfg.lshbloom_bands
        self.capacity = capacity
        self.bloom = BloomFilter(capacity=self.capacity * bands, error_rate=cfg.lshbloom_error_rate / bands)
        self.exact = DigestTable(16)
        self.exact_page = array("q")  # position in self.exact -> page index
        self.inserted = 0  # kept pages whose band keys are in the filter
        self.full_at: Optional[int] = None  # the page index from which kept pages were no longer inserted

    def _exact_kept(self, exact: bytes) -> Optional[int]:
        position = self.exact.position_of(exact)
        return None if position is None else self.exact_page[position]

    def _near(self, index: int, keys: np.ndarray) -> Optional[Decision]:
        bloom = self.bloom
        if any(int(key) in bloom for key in keys):
            return self.decide(index, "near")  # seen, but by which page the filter cannot say
        return None

    def _named_near(self, keys: np.ndarray) -> list[tuple[int, float]]:
        return []  # only the exact match can be named (``--all-pairs``)

    def _keep(self, index: int, fp: SketchFingerprint) -> None:
        # Kept pages only, as the engine keeps them: a copy of a near duplicate is a near duplicate of the
        # same kept page (it shares the band key the near duplicate matched).
        self.exact.append(fp.exact)
        self.exact_page.append(index)
        if self.full_at is not None:
            return
        if self.inserted >= self.capacity:
            self.full_at = index
            logger.warning("LSHBloom filter full after %d kept pages (lshbloom_memory_mb): later kept pages are not "
                           "inserted, so their near duplicates are kept as unique", self.inserted)
            return
        bloom = self.bloom
        for key in fp.sketch:
            bloom.add(int(key), skip_check=True)
        self.inserted += 1

    @property
    def nbytes(self) -> int:
        return len(self.bloom.bitarray) // 8 + self.exact.nbytes + self.exact_page.itemsize * len(self.exact_page)
