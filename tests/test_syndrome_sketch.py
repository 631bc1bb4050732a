"""The syndrome (PinSketch-style) prototype of benchmarks/syndrome_sketch.py: the field, the decoder, the rule."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import syndrome_sketch as ss  # noqa: E402

sys.path.pop(0)


def test_field_tables_are_a_field():
    rng = np.random.default_rng(3)
    for a, b, c in rng.integers(1, 2**16, size=(300, 3)).tolist():
        assert ss.gf_mul(a, ss.gf_inv(a)) == 1
        assert ss.gf_mul(ss.gf_mul(a, b), c) == ss.gf_mul(a, ss.gf_mul(b, c))
        assert ss.gf_mul(a, b ^ c) == ss.gf_mul(a, b) ^ ss.gf_mul(a, c)  # addition is XOR
    assert ss.gf_mul(0, 5) == ss.gf_mul(5, 0) == 0
    with pytest.raises(ZeroDivisionError):
        ss.gf_inv(0)


def _pair(rng: np.random.Generator, common: int, own_a: int, own_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Two element sets sharing ``common`` elements, with distinct own ones (no collisions by construction)."""
    xs = rng.choice(np.arange(1, 2**16, dtype=np.int64), size=common + own_a + own_b, replace=False)
    return xs[: common + own_a], np.concatenate([xs[:common], xs[common + own_a:]])


@pytest.mark.parametrize("t", [8, 20, 28])
def test_decodes_every_difference_of_up_to_t_exactly_and_reports_failure_beyond(t):
    rng = np.random.default_rng(t)
    for d in range(0, t + 16):
        for _ in range(6):
            own_a = int(rng.integers(0, d + 1))
            a, b = _pair(rng, 150, own_a, d - own_a)
            got = ss.difference_size(ss.odd_power_sums(a, t), ss.odd_power_sums(b, t))
            assert got == (d if d <= t else None), (t, d, own_a)


def test_the_sums_are_xor_of_the_elements_powers():
    xs = np.array([3, 77, 65535, 1], dtype=np.int64)
    want = [0] * 5
    for x in xs.tolist():
        p = x
        for i in range(5):
            want[i] ^= p
            p = ss.gf_mul(ss.gf_mul(p, x), x)  # next odd power
    assert ss.odd_power_sums(xs, 5).tolist() == want


def test_a_locator_without_distinct_roots_is_refused():
    assert not ss.splits_into_distinct_nonzero_roots([1, 0, 1])  # 1 + x^2 = (1 + x)^2: a double root
    assert ss.splits_into_distinct_nonzero_roots([1, 3 ^ 5, ss.gf_mul(3, 5)])  # (1 + 3x)(1 + 5x)


def _hash_pair(rng: np.random.Generator, common: int, own_a: int, own_b: int) -> tuple[np.ndarray, np.ndarray]:
    """64-bit shingle hashes of two pages whose field elements do not collide (the collision-free case)."""
    xa, xb = _pair(rng, common, own_a, own_b)
    high = lambda n: rng.integers(0, 2**48, size=n, dtype=np.uint64) * np.uint64(ss.ORDER)  # noqa: E731
    ha = high(len(xa)) + (xa - 1).astype(np.uint64)
    hb = np.concatenate([ha[:common], high(own_b) + (xb[common:] - 1).astype(np.uint64)])
    assert (ss.elements(ha) == xa).all() and (ss.elements(hb) == xb).all()
    return ha, hb


def _rule_exact(a: np.ndarray, b: np.ndarray) -> bool:
    from scrapy_dedup.content.sketch import Resemblance, VerifyRule

    common = len(np.intersect1d(a, b))
    r = Resemblance(common / (len(a) + len(b) - common), float(len(a) - common), float(len(b) - common))
    return VerifyRule().accepts(r, len(a), len(b))


@pytest.mark.parametrize("own", [(5, 5), (10, 10), (0, 40), (11, 11), (12, 12), (12, 13), (16, 16), (3, 60), (10, 30)])
def test_the_decision_is_the_exact_rule_where_the_prototype_claims_it(own):
    """Decoded (d <= t), or nearly equal lengths: the exact sets' decision; 0:40, 3:60 by the bound too."""
    rng = np.random.default_rng(sum(own))
    verifier = ss.SyndromeVerifier(t=28)
    for _ in range(40):
        a, b = _hash_pair(rng, 200, *own)
        assert verifier.near(a, b) == _rule_exact(a, b), own


def test_the_bound_fallback_merges_a_longer_sibling_which_the_strata_level_may_not():
    """12:50: d = 62 > t and |n_a - n_b| = 38 leaves room: "bound" accepts (wrong), "strata" estimates."""
    rng = np.random.default_rng(5)
    a, b = _hash_pair(rng, 200, 12, 50)
    assert not _rule_exact(a, b)
    assert ss.SyndromeVerifier(t=28).near(a, b)
    assert ss.SyndromeVerifier(t=20, t1=8, fallback="strata").nbytes == 60
    with pytest.raises(ValueError):
        ss.SyndromeVerifier(t=20, t1=0, fallback="strata")
    with pytest.raises(ValueError):
        ss.SyndromeVerifier(t=20, fallback="odd")


def test_the_odd_fallback_estimates_long_pages_difference():
    """Long pages (the rule's relative clause, J >= 0.85): 60:60 at 1,000 common (J 0.89) is near,
    150:150 (J 0.77) is not; 352 bits (the 126-byte variant; 144 bits merge about 15%, docs/benchmarks.md)."""
    rng = np.random.default_rng(9)
    verifier = ss.SyndromeVerifier(t=40, fallback="odd", odd_bits=352)
    assert verifier.nbytes == 126
    near = [verifier.near(*_hash_pair(rng, 1000, 60, 60)) for _ in range(20)]
    far = [verifier.near(*_hash_pair(rng, 1000, 150, 150)) for _ in range(20)]
    assert sum(near) >= 18 and not any(far)
