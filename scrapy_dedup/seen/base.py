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
from typing import Any

TWO_U64 = struct.Struct("<QQ").unpack_from
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
    h1, h2 = TWO_U64(key)
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


#: The share of a filter's error rate left to the structure of its positions (:class:`KeyHashing`):
#: the bits are sized for the rest, so that the two add up to at most the rate asked.
STRUCTURE_SHARE = 0.01


def bloom_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """``(bits, hashes)`` of a Bloom filter holding ``capacity`` keys at ``error_rate``.

    The bits are sized for ``error_rate * (1 - STRUCTURE_SHARE)`` (0.07% more
    bits at 1e-6); :meth:`KeyHashing.for_filter` keeps the excess of the
    positions' structure within the share left.
    """
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity!r}")
    if not 0.0 < error_rate < 1.0:
        raise ValueError(f"error_rate must be between 0 and 1, got {error_rate!r}")
    hashes = choose_hashes(error_rate)
    bits = max(64, math.ceil(capacity * bits_per_key(error_rate * (1 - STRUCTURE_SHARE), hashes)))
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


def split_hashes(hashes: int, groups: int) -> tuple[int, ...]:
    """``hashes`` cut into ``groups`` lengths as equal as can be, longest first."""
    short, extra = divmod(hashes, groups)
    return (short + 1,) * extra + (short,) * (groups - extra)


def structural_excess(bits: int, hashes: int, keys: int, groups: int) -> float:
    """The false-positive rate that progressions add to ``fill ** hashes`` (a model, checked by the tests).

    A key's positions in ``groups`` arithmetic progressions of length ``L``
    (starts uniform over ``bits``, steps over ``max_step(bits, L)``): a new
    key's progression is covered by a stored one when both have the same step
    and starts ``s`` steps apart (``L - |s|`` positions shared, the ``|s|``
    others set by chance). Independent positions (``L = 1``) add nothing. Plain
    double hashing is ``groups = 1``: at small ``bits`` this term, about
    ``3 * keys * hashes / bits**2``, is many times the rate the bits were
    sized for (4e-5 against 5e-7 at 1,000 keys and 1e-6): the pairs ``(start,
    step)`` are too few, whatever the hash.
    """
    if keys <= 0:
        return 0.0
    fill = -math.expm1(-hashes * keys / bits)
    lengths = split_hashes(hashes, groups)
    covered = 1.0
    for length in lengths:
        chance = fill ** length
        if length > 1:
            alike = keys * lengths.count(length)  # stored progressions of this length
            shifts = 1 + 2 * sum(fill ** s for s in range(1, length))
            chance += alike / (bits * max_step(bits, length)) * shifts
        covered *= min(1.0, chance)
    return max(0.0, covered - fill ** hashes)


class KeyHashing:
    """How a key becomes the bit positions of one Bloom filter (or one slice of a growing one).

    The ``hashes`` positions form ``groups`` arithmetic progressions
    (:func:`positions` each), every one from its own two 64-bit values, so a
    check reads ``groups`` strided slices of the bit array. ``salt`` None takes
    the two values from the key's own digest (:func:`digest_pair`: no hashing,
    ``groups`` 1); an integer salt takes ``2 * groups`` values from BLAKE2b
    keyed by the salt (its ``salt`` parameter; SHAKE-128 over the salt and the
    key past 4 groups, more than BLAKE2b's 64 bytes), independent of every
    other salt. :meth:`for_filter` picks the fewest groups whose
    :func:`structural_excess` stays within ``STRUCTURE_SHARE`` of the rate:
    one group (plain double hashing) for large filters, more for small ones.
    """

    __slots__ = ("bits", "hashes", "groups", "salt", "lengths", "steps", "_prefix", "_nbytes", "_unpack", "_blake")

    def __init__(self, bits: int, hashes: int, groups: int = 1, salt: int | None = None):
        if not 1 <= groups <= hashes:
            raise ValueError(f"groups must be between 1 and hashes ({hashes}), got {groups!r}")
        if salt is None and groups != 1:
            raise ValueError("a key's own digest drives one progression only: give a salt for more")
        self.bits, self.hashes, self.groups, self.salt = bits, hashes, groups, salt
        self.lengths = split_hashes(hashes, groups)
        self.steps = tuple(max_step(bits, length) for length in self.lengths)
        self._prefix = b"" if salt is None else struct.pack("<Q", salt)
        self._nbytes = 16 * groups
        self._unpack = struct.Struct(f"<{2 * groups}Q").unpack
        # a hasher with the salt set up once, copied per key (a third of the cost of building one)
        self._blake = (hashlib.blake2b(digest_size=self._nbytes, salt=self._prefix)
                       if salt is not None and self._nbytes <= 64 else None)

    @classmethod
    def for_filter(cls, bits: int, hashes: int, capacity: int, error_rate: float,
                   salt: int | None = None) -> "KeyHashing":
        """The fewest progressions that keep the structure's excess within ``STRUCTURE_SHARE * error_rate``.

        ``salt`` is used when more than one progression is needed (or when given).
        """
        budget = STRUCTURE_SHARE * error_rate
        groups = next((g for g in range(1, hashes + 1)
                       if structural_excess(bits, hashes, capacity, g) <= budget), hashes)
        if groups > 1 and salt is None:
            salt = 0
        return cls(bits, hashes, groups, salt)

    def values(self, key: bytes) -> tuple[int, ...]:
        """The ``2 * groups`` 64-bit values of ``key``."""
        if self.salt is None:
            if len(key) in DIGEST_LENGTHS:
                return TWO_U64(key)
            return digest_pair(key)[:2]
        if self._blake is not None:
            hasher = self._blake.copy()
            hasher.update(key)
            return self._unpack(hasher.digest())
        return self._unpack(hashlib.shake_128(self._prefix + bytes(key)).digest(self._nbytes))

    def strides(self, values: tuple[int, ...]) -> list[slice]:
        """The positions of :meth:`positions` as strided slices of the bit array (one or two per group)."""
        m = self.bits
        out = []
        for length, step, a, b in zip(self.lengths, self.steps, values[::2], values[1::2]):
            a %= m
            b = b % step + 1
            end = a + length * b
            if end <= m:
                out.append(slice(a, end, b))
            else:
                out += (slice(a, m, b), slice((a - m) % b, end - m, b))
        return out

    def positions(self, values: tuple[int, ...]) -> list[int]:
        """Every bit position of the key whose :meth:`values` these are (a position may repeat across groups)."""
        return [p for i, length in enumerate(self.lengths)
                for p in positions(values[2 * i], values[2 * i + 1], self.bits, length, self.steps[i])]

    def describe(self) -> dict[str, Any]:
        """What a checkpoint or a Redis layout records of it."""
        return {"groups": self.groups, "salt": self.salt}


def false_positive_rate(bits: int, hashes: int, keys: int) -> float:
    """Expected false-positive rate of a ``bits``/``hashes`` filter holding ``keys`` keys."""
    if keys <= 0:
        return 0.0
    return (-math.expm1(-hashes * keys / bits)) ** hashes
