"""The textbook near-duplicate algorithm a user would write by hand: the baseline of
bench_quality.py and bench_report.py (one copy, so both benchmarks compare against the same thing).

MD5 per 5-word shingle, a pure-Python vote per bit, 64-bit fingerprints; the 4-band
dict index lives with each benchmark's decider.
"""
from __future__ import annotations

import hashlib
import re

_WORD = re.compile(r"\w+")


def word_shingles(text: str, k: int = 5) -> list[str]:
    """Lowercased runs of word characters, joined ``k`` at a time (one shingle for shorter texts)."""
    words = _WORD.findall(text.lower())
    if len(words) < k:
        return [" ".join(words)] if words else []
    return [" ".join(words[i:i + k]) for i in range(len(words) - k + 1)]


def textbook_fingerprint(text: str) -> int:
    """Charikar simhash the way it is usually written: MD5 of each shingle, one vote per bit."""
    counts = [0] * 64
    for shingle in word_shingles(text):
        h = int.from_bytes(hashlib.md5(shingle.encode("utf-8")).digest()[:8], "big")
        for i in range(64):
            if (h >> i) & 1:
                counts[i] += 1
            else:
                counts[i] -= 1
    fp = 0
    for i in range(64):
        if counts[i] > 0:
            fp |= 1 << i
    return fp
