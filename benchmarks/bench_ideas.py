"""Exploration rows for bench_quality.py (``--ideas``): what lifts recall without losing precision.

Every row is built from the library's own pieces (``page_text``, ``words``,
``simhash_words``, ``exact_hash_words``, ``SimhashIndex``) with the same rule for
degenerate pages (fewer than 20 words: never dropped), changing ONE thing:

* ``shingle k``: shorter word shingles. A one-word edit changes ``k`` of the
  ``n`` shingles, so it moves the fingerprint by about ``sqrt(k / n)``: fewer
  flipped bits for smaller ``k``.
* ``threshold t``: a wider Hamming radius (bands ``t + 1``, recall still exact).
* ``verify<=R``: a second stage. Candidates between the threshold and ``R`` bits
  (found here by a brute-force scan, which at crawl scale needs a wider
  index) are accepted only if the estimated Jaccard resemblance of their
  5-word shingle sets is at least 0.8, estimated by a bottom-64 sketch
  (the 64 smallest shingle hashes of each kept page: 512 bytes per page).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from scrapy_dedup.content.index import SimhashIndex
from scrapy_dedup.content.simhash import exact_hash_words, simhash_words, words
from scrapy_dedup.content.text import page_text

MIN_WORDS = 20
Decider = Callable[[str, bytes], Optional[str]]


def _shingle_hashes(tokens: list[str], k: int = 5) -> np.ndarray:
    from scrapy_dedup._util.mix import fmix64_array
    from scrapy_dedup.content import simhash as sh

    return np.unique(fmix64_array(sh._shingle_states(sh.token_hashes(tokens), k)))


def simhash_variant(shingle: int = 5, threshold: int = 3, verify_radius: int = 0,
                    min_jaccard: float = 0.8, sketch: int = 64) -> tuple[Decider, str]:
    bands = threshold + 1
    index = SimhashIndex(threshold=threshold, bands=bands)
    exact: dict[bytes, int] = {}
    urls: list[str] = []
    fps: list[int] = []
    sketches: list[np.ndarray] = []

    def decide(url: str, html: bytes) -> Optional[str]:
        toks = words(page_text(html))
        if len(toks) < MIN_WORDS:
            return None
        e = exact_hash_words(toks)
        if e in exact:
            return urls[exact[e]]
        fp = simhash_words(toks, shingle_size=shingle)
        pid = len(urls)
        match = index.query(fp)
        if match:
            return urls[match[0][0]]
        mine = None
        if verify_radius:
            mine = _shingle_hashes(toks)[:sketch]
            if fps:
                arr = np.array(fps, dtype=np.uint64) ^ np.uint64(fp)
                dist = np.unpackbits(arr.view(np.uint8)).reshape(-1, 64).sum(axis=1)
                for j in np.argsort(dist, kind="stable"):
                    if dist[j] > verify_radius:
                        break
                    other = sketches[j]
                    union = np.union1d(mine, other)[:sketch]
                    jac = len(np.intersect1d(union, np.intersect1d(mine, other))) / len(union)
                    if jac >= min_jaccard:
                        return urls[j]
        index.add(pid, fp)
        exact[e] = pid
        urls.append(url)
        fps.append(fp)
        if verify_radius:
            sketches.append(mine)
        return None

    label = f"idea: shingle {shingle}, threshold {threshold}" + (
        f", verify<={verify_radius} (J>={min_jaccard})" if verify_radius else "")
    return decide, label


def engine_variant(label: str, **kw) -> tuple[Decider, str]:
    """The library's ContentDeduplicator with one engine option changed (e.g. the verification stage)."""
    from scrapy_dedup.content.engine import ContentDeduplicator

    check = ContentDeduplicator.in_memory(**kw).check

    def decide(url: str, html: bytes) -> Optional[str]:
        verdict = check(url, page_text(html))
        return verdict.kept_url if verdict.is_duplicate else None

    return decide, f"idea: {label}"


def deciders(pages=None) -> list[tuple[Decider, str]]:
    from scrapy_dedup.content.sketch import VerifyRule

    return [
        engine_variant("ours, verification off", verify=None),
        engine_variant("ours, sketch 64 values", sketch_size=64),
        engine_variant("ours, radius 12", verify=VerifyRule(radius=12)),
        simhash_variant(shingle=5, threshold=3),
        simhash_variant(shingle=3, threshold=3),
        simhash_variant(shingle=2, threshold=3),
        simhash_variant(shingle=5, threshold=5),
        simhash_variant(shingle=5, threshold=3, verify_radius=12),
        simhash_variant(shingle=3, threshold=3, verify_radius=12),
    ]
