"""MurmurHash3's 64-bit finalizer (``fmix64``): full avalanche of a 64-bit value, no Scrapy imports.

One definition for every 64-bit hash the package builds from combined values (simhash shingles,
the index's bucket keys, the audit's LSH band keys, the sketch's LSH table keys): their keys
on disk and in Redis depend on it, so the copies must never drift apart.
"""
from __future__ import annotations

import numpy as np

__all__ = ["fmix64", "fmix64_array"]

_M64 = (1 << 64) - 1
_C1, _C2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_NP_C1, _NP_C2, _NP_SHIFT = np.uint64(_C1), np.uint64(_C2), np.uint64(33)


def fmix64(x: int) -> int:
    """``fmix64`` of one value in ``[0, 2**64)``."""
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    return x ^ (x >> 33)


def fmix64_array(x: np.ndarray) -> np.ndarray:
    """``fmix64`` of every value of a ``uint64`` array, IN PLACE (returned): pass a copy to keep ``x``.

    In place because the callers mix large temporaries (a page's shingle states), which a copy
    per step would double; uint64 array arithmetic wraps modulo 2**64 without a warning.
    """
    x ^= x >> _NP_SHIFT
    x *= _NP_C1
    x ^= x >> _NP_SHIFT
    x *= _NP_C2
    x ^= x >> _NP_SHIFT
    return x
