"""A set-difference verification sketch (PinSketch-style BCH syndromes), a measured prototype.

Not the package's code: written to measure whether issue 17's budget (about 60 bytes of
sketch per kept page) can carry the verification rule (:class:`VerifyRule`) unchanged.

The sketch (Dodis, Ostrovsky, Reyzin and Smith 2004, "PinSketch")
----------------------------------------------------------------
Each distinct 64-bit shingle hash ``h`` of a page is mapped to a non-zero element
``x = (h mod 65535) + 1`` of GF(2^16) (primitive polynomial x^16 + x^12 + x^3 + x + 1).
A page stores its shingle count ``n`` (2 bytes) and the ``t`` odd power sums
``s_k = sum x^k`` for ``k = 1, 3, ..., 2t - 1`` (2 bytes each). In characteristic 2 the
XOR of two pages' sums is the power sums of their symmetric difference ``D`` (a shingle in
both pages cancels); the even sums follow (``s_2k = s_k^2``). Berlekamp-Massey finds the
shortest recurrence, the error locator of degree ``L``; when ``|D| <= t`` it is the true
locator and ``L = |D|``. A locator is accepted only if it has ``L`` distinct non-zero roots
in the field, checked without a search over the field: ``x^(2^16) = x`` modulo the locator
(16 squarings), plus ``L = n_a + n_b (mod 2)`` and ``L >= |n_a - n_b|``. With
``d = |D|`` and the exact counts, ``only_a = (d + n_a - n_b) / 2`` and
``only_b = (d - n_a + n_b) / 2``: the rule's inputs, exact.

Collisions: two own shingles (one of each page, or two of one page) with the same 16-bit
element cancel and make ``d`` smaller by 2: about ``a * b / 65535`` for ``a`` and ``b`` own
shingles (0.2% at 12:12). A common shingle colliding with an own one changes nothing.

When the difference does not decode (``d > t``)
-----------------------------------------------
Then ``d >= max(t + 1, |n_a - n_b|)`` (same parity as ``n_a + n_b``). The rule is monotone
in ``d`` (a larger difference lowers ``J`` and raises both one-sided counts), so if it rejects
at that lower bound it rejects: exact for every pair of nearly equal lengths
(``|n_a - n_b| <= t - 2 * max_diff``). Otherwise (one page much longer) ``fallback`` says:

* ``"bound"``: decide at the lower bound (a block added to one copy, nothing else): exact
  for 0:40 and 3:60, but a longer sibling (12:50) is accepted;
* ``"strata"``: a second level of ``t1`` syndromes over the shingles whose hash bits 40-42
  are zero (rate 1/8) with its own count (2 bytes); if its difference decodes, its
  one-sided counts ``only_a1, only_b1`` are exact and ``8 * min(only_a1, only_b1)``
  estimates the smaller side's own shingles (coarse: a binomial of rate 1/8);
* ``"odd"``: an odd sketch of ``odd_bits`` bits (Mitzenmacher, Pagh and Pham 2014: each
  shingle flips the bit its hash's top 32 bits pick) estimates ``d`` from the ``z`` bits in
  which two pages differ, ``d = ln(1 - 2z/m) / ln(1 - 2/m)``: about 2-3 bits per differing
  shingle where a syndrome costs 16, but an estimate, not a count; saturated (``z >= 0.45 m``,
  ``d`` beyond about ``1.2 m``) it rejects.

Bytes: ``2 + 2t`` (``"bound"``), ``2 + 2t + 2 + 2t1`` (``"strata"``), ``2 + 2t + odd_bits / 8``
(``"odd"``).
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scrapy_dedup.content.sketch import Resemblance, VerifyRule  # noqa: E402

M = 16
ORDER = (1 << M) - 1  # multiplicative group order
POLY = 0x1100B  # x^16 + x^12 + x^3 + x + 1 (primitive)


def _tables() -> tuple[list[int], list[int]]:
    exp = [0] * (2 * ORDER)
    log = [0] * (ORDER + 1)
    x = 1
    for i in range(ORDER):
        exp[i] = x
        log[x] = i
        x <<= 1
        if x >> M:
            x ^= POLY
    if x != 1 or len(set(exp[:ORDER])) != ORDER:
        raise AssertionError("POLY is not primitive")
    exp[ORDER:] = exp[:ORDER]  # so exp[a + b] needs no modulo
    return exp, log


EXP, LOG = _tables()
EXP_NP = np.array(EXP[:ORDER], dtype=np.uint16)
LOG_NP = np.array(LOG, dtype=np.int64)
SUBSAMPLE_SHIFT, SUBSAMPLE_MASK = np.uint64(40), np.uint64(7)  # rate 1/8, bits apart from the element's


def gf_mul(a: int, b: int) -> int:
    if not a or not b:
        return 0
    return EXP[LOG[a] + LOG[b]]


def gf_inv(a: int) -> int:
    if not a:
        raise ZeroDivisionError("0 has no inverse in GF(2^16)")
    return EXP[ORDER - LOG[a]]


def elements(shingle_hashes: np.ndarray) -> np.ndarray:
    """The non-zero GF(2^16) element of each 64-bit shingle hash."""
    return (np.asarray(shingle_hashes, dtype=np.uint64) % np.uint64(ORDER) + np.uint64(1)).astype(np.int64)


def odd_power_sums(xs: np.ndarray, t: int) -> np.ndarray:
    """``s_1, s_3, ..., s_(2t-1)`` of the non-zero elements ``xs`` (uint16, ``t`` of them)."""
    if not len(xs) or not t:
        return np.zeros(t, dtype=np.uint16)
    ks = np.arange(1, 2 * t, 2, dtype=np.int64)
    powers = EXP_NP[(LOG_NP[xs][:, None] * ks[None, :]) % ORDER]
    return np.bitwise_xor.reduce(powers, axis=0)


def berlekamp_massey(odd: list[int]) -> list[int]:
    """The shortest LFSR (connection polynomial, low degree first) of ``S_1..S_2t`` from the odd sums."""
    t = len(odd)
    s = [0] * (2 * t + 1)  # s[k] = S_k
    for i, v in enumerate(odd):
        s[2 * i + 1] = v
    for k in range(2, 2 * t + 1, 2):
        s[k] = gf_mul(s[k // 2], s[k // 2])
    c, b = [1], [1]
    length, shift, last = 0, 1, 1
    for n in range(2 * t):
        d = s[n + 1]
        for i in range(1, min(length, len(c) - 1) + 1):
            if c[i]:
                d ^= gf_mul(c[i], s[n + 1 - i])
        if not d:
            shift += 1
            continue
        coef = gf_mul(d, gf_inv(last))
        new = c + [0] * max(0, len(b) + shift - len(c))
        for i, bi in enumerate(b):
            if bi:
                new[i + shift] ^= gf_mul(coef, bi)
        if 2 * length <= n:
            b, last, length, shift = c, d, n + 1 - length, 1
        else:
            shift += 1
        c = new
    c = c[: length + 1] + [0] * max(0, length + 1 - len(c))
    return c


def _polymod_square(r: list[int], mod: list[int]) -> list[int]:
    """``r(x)^2 mod mod(x)`` (``mod`` monic, low degree first, degree >= 1)."""
    deg = len(mod) - 1
    sq = [0] * (2 * len(r) - 1)
    for i, a in enumerate(r):
        if a:
            sq[2 * i] = EXP[2 * LOG[a]]  # char 2: (sum a_i x^i)^2 = sum a_i^2 x^2i
    for top in range(len(sq) - 1, deg - 1, -1):
        a = sq[top]
        if a:
            la = LOG[a]
            base = top - deg
            for j in range(deg):
                if mod[j]:
                    sq[base + j] ^= EXP[la + LOG[mod[j]]]
            sq[top] = 0
    return sq[:deg] if len(sq) > deg else sq + [0] * (deg - len(sq))


def splits_into_distinct_nonzero_roots(locator: list[int]) -> bool:
    """Whether ``locator`` (low degree first, constant 1, exact degree) has deg-many distinct non-zero roots."""
    deg = len(locator) - 1
    if deg == 0:
        return True
    if not locator[deg] or not locator[0]:
        return False
    inv_lead = gf_inv(locator[deg])
    mono = [gf_mul(c, inv_lead) for c in locator]
    if deg == 1:
        return True
    r = [0, 1] + [0] * (deg - 2)  # x mod locator (deg >= 2)
    for _ in range(M):
        r = _polymod_square(r, mono)
    return r == [0, 1] + [0] * (deg - 2)  # x^(2^16) = x: locator divides the product of (x - a) over the field


def difference_size(odd_a: np.ndarray, odd_b: np.ndarray) -> Optional[int]:
    """``|A xor B|`` from the two pages' odd power sums, or None when it does not decode (more than ``t``)."""
    odd = (np.asarray(odd_a, dtype=np.uint16) ^ np.asarray(odd_b, dtype=np.uint16)).tolist()
    if not any(odd):
        return 0
    locator = berlekamp_massey(odd)
    length = len(locator) - 1
    if length > len(odd) or not locator[length]:
        return None
    return length if splits_into_distinct_nonzero_roots(locator) else None


@dataclass(frozen=True)
class SyndromeSketch:
    shingles: int
    odd: np.ndarray  # t uint16 odd power sums of every shingle
    sub_shingles: int = 0  # shingles in the 1/8 subsample (strata level), when t1 > 0
    sub_odd: Optional[np.ndarray] = None
    parity_bits: Optional[np.ndarray] = None  # the odd sketch (bools), when odd_bits > 0


@dataclass(frozen=True)
class SyndromeVerifier:
    """Make sketches of ``t`` (and ``t1``) syndromes and decide pairs by ``rule``."""

    t: int = 28
    t1: int = 0
    fallback: str = "bound"  # or "strata" (needs t1 > 0), or "odd" (needs odd_bits > 0)
    odd_bits: int = 0
    rule: VerifyRule = VerifyRule()

    def __post_init__(self) -> None:
        if (self.fallback not in ("bound", "strata", "odd") or (self.fallback == "strata") != (self.t1 > 0)
                or (self.fallback == "odd") != (self.odd_bits > 0)):
            raise ValueError("fallback 'strata' needs t1 > 0, 'odd' odd_bits > 0, 'bound' neither")

    @property
    def name(self) -> str:
        return f"syn{self.t}" + (f"+{self.t1}" if self.t1 else "") + (f"+odd{self.odd_bits}" if self.odd_bits else "")

    @property
    def nbytes(self) -> int:
        return 2 + 2 * self.t + (2 + 2 * self.t1 if self.t1 else 0) + self.odd_bits // 8

    def sketch(self, shingle_hashes: np.ndarray) -> SyndromeSketch:
        h = np.asarray(shingle_hashes, dtype=np.uint64)
        xs = elements(h)
        if self.odd_bits:
            cell = ((h >> np.uint64(32)) * np.uint64(self.odd_bits)) >> np.uint64(32)
            parity = (np.bincount(cell.astype(np.intp), minlength=self.odd_bits) & 1).astype(bool)
            return SyndromeSketch(len(h), odd_power_sums(xs, self.t), parity_bits=parity)
        if not self.t1:
            return SyndromeSketch(len(h), odd_power_sums(xs, self.t))
        sub = ((h >> SUBSAMPLE_SHIFT) & SUBSAMPLE_MASK) == 0
        return SyndromeSketch(len(h), odd_power_sums(xs, self.t), int(sub.sum()), odd_power_sums(xs[sub], self.t1))

    def _accepts_at(self, d: float, na: int, nb: int) -> bool:
        total = na + nb
        j = (total - d) / (total + d) if total + d else 1.0
        return self.rule.accepts(Resemblance(j, (d + na - nb) / 2, (d - na + nb) / 2), na, nb)

    def decide(self, a: SyndromeSketch, b: SyndromeSketch) -> bool:
        na, nb = a.shingles, b.shingles
        d = difference_size(a.odd, b.odd)
        if d is not None and d >= abs(na - nb) and (d - na - nb) % 2 == 0:  # else: not a consistent decode
            return self._accepts_at(d, na, nb)
        low = max(self.t + 1, abs(na - nb))
        low += (low - na - nb) % 2  # d has the parity of na + nb
        if not self._accepts_at(low, na, nb):
            return False  # exact: the rule is monotone in d
        if self.fallback == "bound":
            return True
        if self.fallback == "odd":
            assert a.parity_bits is not None and b.parity_bits is not None
            m = self.odd_bits
            z = int(np.count_nonzero(a.parity_bits ^ b.parity_bits))
            if z >= 0.45 * m:  # saturated (d beyond about 1.2 m): no estimate, and far past short pages' limit
                return False
            estimate = math.log(1 - 2 * z / m) / math.log(1 - 2 / m)
            return self._accepts_at(max(low, estimate), na, nb)
        assert a.sub_odd is not None and b.sub_odd is not None
        d1 = difference_size(a.sub_odd, b.sub_odd)
        if d1 is None:
            return False  # the subsample alone differs by more than t1: about 8 * t1 in all
        delta1 = a.sub_shingles - b.sub_shingles
        small_own = 8 * (d1 - abs(delta1)) / 2
        return self._accepts_at(max(low, 2 * small_own + abs(na - nb)), na, nb)

    def near(self, hashes_a: np.ndarray, hashes_b: np.ndarray) -> bool:
        return self.decide(self.sketch(hashes_a), self.sketch(hashes_b))
