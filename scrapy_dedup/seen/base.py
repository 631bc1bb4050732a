"""The small interface every seen-key store implements, and the hashing they share.

A *key* is a request fingerprint: bytes, normally the 20-byte SHA-1 digest of
Scrapy's (or :class:`~scrapy_dedup.CanonicalRequestFingerprinter`'s)
fingerprinter. Digests are already uniform, so the Bloom stores take their bit
positions straight from the key's bytes instead of hashing it again (hashing
again is most of what a pure-Python Bloom filter costs per check).

No Scrapy imports here.
"""
from __future__ import annotations

import hashlib
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable

_TWO_U64 = struct.Struct("<QQ").unpack_from
_U32 = struct.Struct("<I").unpack_from

#: Lengths of keys taken to be digests already (SHA-1, SHA-256); other keys are hashed once.
DIGEST_LENGTHS = frozenset((20, 32))


class SeenSet(ABC):
    """A set of keys answering "have I seen this key?".

    ``add(key)`` is the whole per-request operation (check and insert in one
    step, atomic where the store is shared): it returns True when the key was
    new. Bloom stores may answer "seen" for a key never added (a false
    positive, bounded by their error rate); no store ever answers "new" for a
    key already added.
    """

    @abstractmethod
    def add(self, key: bytes) -> bool:
        """Insert ``key``; return True if it was not there before."""

    @abstractmethod
    def __contains__(self, key: object) -> bool:
        """True if ``key`` was added (or, for a Bloom store, is a false positive)."""

    @abstractmethod
    def __len__(self) -> int:
        """Keys added so far (an estimate for shared Bloom stores)."""

    def add_many(self, keys: Iterable[bytes]) -> list[bool]:
        """``[add(k) for k in keys]``; shared stores override it with one round trip per batch."""
        return [self.add(key) for key in keys]

    def contains_many(self, keys: Iterable[bytes]) -> list[bool]:
        """``[k in self for k in keys]``; shared stores override it with one round trip per batch."""
        return [key in self for key in keys]

    def size_bytes(self) -> int:
        """Memory the store's data takes (process memory or Redis memory)."""
        return 0

    def estimated_false_positive_rate(self) -> float:
        """Probability that a new key is answered "seen" now (0.0 for exact stores)."""
        return 0.0

    def clear(self) -> None:
        """Forget every key."""
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - a hook: most stores have nothing to release
        """Release resources; persistent stores save here where they have a path."""


def digest_pair(key: bytes) -> tuple[int, int, int]:
    """Two 64-bit values and one 32-bit value from ``key`` for double hashing.

    A 20-byte (SHA-1) or 32-byte (SHA-256) key is a digest: its bytes are
    used as they are. Any other key is hashed once with BLAKE2b first, so that
    short or structured keys still spread uniformly.
    """
    if len(key) not in DIGEST_LENGTHS:
        key = hashlib.blake2b(bytes(key), digest_size=20).digest()
    h1, h2 = _TWO_U64(key)
    return h1, h2, _U32(key, 16)[0]


def bits_per_key(error_rate: float, hashes: int) -> float:
    """Bits per key a Bloom filter with ``hashes`` hash functions needs for ``error_rate``.

    From ``p = (1 - exp(-k n / m)) ** k`` solved for ``m / n``.
    """
    return -hashes / math.log1p(-(error_rate ** (1.0 / hashes)))


def choose_hashes(error_rate: float, memory_slack: float = 0.05) -> int:
    """The fewest hash functions whose memory is within ``memory_slack`` of the optimum.

    The optimum (``k = log2(1/p)``, 20 at 1e-6) is flat: 14 hashes cost 4% more
    bits at 1e-6 but 30% fewer bit lookups per check, and lookups are what a
    check costs in Python (and in Redis's ``BITFIELD``).
    """
    costs = {k: bits_per_key(error_rate, k) for k in range(1, 65)}
    best = min(costs.values())
    return min(k for k, bits in costs.items() if bits <= best * (1.0 + memory_slack))


def bloom_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """``(bits, hashes)`` of a Bloom filter holding ``capacity`` keys at ``error_rate``."""
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity!r}")
    if not 0.0 < error_rate < 1.0:
        raise ValueError(f"error_rate must be between 0 and 1, got {error_rate!r}")
    hashes = choose_hashes(error_rate)
    bits = max(64, math.ceil(capacity * bits_per_key(error_rate, hashes)))
    return bits, hashes


def max_step(bits: int, hashes: int) -> int:
    """Largest double-hashing step that wraps around ``bits`` at most once over ``hashes`` positions."""
    return max(1, (bits - 1) // (hashes - 1)) if hashes > 1 else bits


def positions(h1: int, h2: int, bits: int, hashes: int, step: int) -> list[int]:
    """The ``hashes`` bit positions of a key: ``(a + i*b) mod bits`` for ``i < hashes``.

    Double hashing (Kirsch and Mitzenmacher, 2006) with ``a = h1 mod bits`` and
    a step ``b = 1 + h2 mod step``, ``step = max_step(bits, hashes)``: the
    progression wraps around at most once, so it is one or two ``range``
    objects expanded in C instead of a modulo per position in Python (half the
    cost of a check). Every position is still uniform over the bits (``a`` is),
    the positions of one key are distinct, and two keys share all positions
    with probability about ``hashes / bits**2``.
    """
    a = h1 % bits
    b = h2 % step + 1
    end = a + hashes * b
    if end <= bits:
        return list(range(a, end, b))
    return [*range(a, bits, b), *range((a - bits) % b, end - bits, b)]


def false_positive_rate(bits: int, hashes: int, keys: int) -> float:
    """Expected false-positive rate of a ``bits``/``hashes`` filter holding ``keys`` keys."""
    if keys <= 0:
        return 0.0
    return (-math.expm1(-hashes * keys / bits)) ** hashes
