"""The one fmix64 (scrapy_dedup._util.mix): its integer and array forms agree, and the array form works in place."""
from __future__ import annotations

import numpy as np

from scrapy_dedup._util.mix import fmix64, fmix64_array


def test_the_integer_and_array_forms_agree_and_the_array_is_mixed_in_place():
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.integers(0, 2**64, 1000, dtype=np.uint64, endpoint=False),
                             np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)])
    original = values.copy()
    mixed = fmix64_array(values)
    assert mixed is values  # in place
    assert [fmix64(int(v)) for v in original] == [int(v) for v in mixed]
    assert fmix64(0) == 0 and len(set(mixed.tolist())) == len(set(original.tolist()))  # a bijection
    # MurmurHash3's published finalizer constants: the value of 1 computed by hand from them
    x = 1 ^ (1 >> 33)
    x = (x * 0xFF51AFD7ED558CCD) % 2**64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) % 2**64
    assert fmix64(1) == x ^ (x >> 33)
