"""A local, persistent, growing Bloom filter of request fingerprints.

Why not pybloom-live's classes (docs/seen-stores.md's "The local Bloom filter" gives the
measurements): its ``BloomFilter`` hashes every key again, and its
``ScalableBloomFilter`` bounds the false-positive rate only at about ten times
the rate it is given. This filter keeps its bit storage (``bitarray``) and:

* takes the bit positions from the fingerprint, already a uniform SHA-1 digest:
  two 64-bit slices drive double hashing (Kirsch and Mitzenmacher 2006), read
  as one strided slice of the bit array, in a slice large enough for double
  hashing to keep its rate; a smaller slice, or a growth slice, takes its
  values from BLAKE2b of the key salted with the slice's own salt (SHAKE-128
  past four progressions), in as many
  progressions as keep the structure's excess under 1% of its rate
  (:class:`~scrapy_dedup.seen.base.KeyHashing`; plain double hashing gave 85
  times the rate at 1,000 keys and 1e-6: ``benchmarks/bench_bloom_rate.py``);
* grows with a bound that holds: slice ``i`` holds ``capacity * 2**i`` keys at
  ``p * (1 - r) * r**i`` with ``r = 1/2``, so the overall rate is at most
  ``p (1 - r**n) < p`` however far it grows (Almeida et al., "Scalable Bloom
  Filters", 2007, tightened from the first slice, which pybloom-live does not do).

Checkpoints (:meth:`BloomSeenSet.save`) are atomic: a magic line, a JSON header
(format version, hashing scheme, slices with their progressions and salt), the
bit arrays and a CRC-32; :meth:`BloomSeenSet.load` raises
:class:`CheckpointError` on a truncated, corrupt or foreign file, never
returns an empty filter in its place. A version 1 file (plain double hashing
in every slice) is read with the hashing it was written with, slice by slice,
and says so in one WARNING; slices it grows use the new hashing.

No Scrapy imports here.
"""
from __future__ import annotations

import json
import logging
import math
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from bitarray import bitarray

from scrapy_dedup._util.files import atomic_write

from scrapy_dedup.seen.base import (
    TWO_U64,
    DIGEST_LENGTHS,
    KeyHashing,
    SeenSet,
    bloom_size,
    false_positive_rate,
    structural_excess,
)

logger = logging.getLogger(__name__)

MAGIC = b"scrapy-dedup bloom\n"
FORMAT_VERSION = 2
#: how bit positions are derived from a key; a file written with another scheme is refused
HASHING = "progressions-v2"
#: version 1's scheme: one double-hashing progression from the key's digest in every slice
LEGACY_HASHING = "digest-double-hashing-v1"
_HEADER_LEN = struct.Struct("<I")
_CRC = struct.Struct("<I")
_CHUNK = 1 << 20

GROWTH = 2
TIGHTENING = 0.5
#: keys a local filter given no capacity starts with (0.4 MiB at 1e-6): it grows with the crawl
START_CAPACITY = 100_000


class CheckpointError(ValueError):
    """A Bloom checkpoint file cannot be used (truncated, corrupt, or another format)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"Bloom checkpoint {self.path} is unusable: {reason}")


class _Slice:
    """One fixed-size Bloom filter: ``bits`` bits, ``hashes`` positions per key."""

    __slots__ = ("capacity", "error_rate", "nbits", "hashes", "hashing", "step", "count", "bits")

    def __init__(self, capacity: int, error_rate: float, nbits: int | None = None,
                 hashes: int | None = None, count: int = 0, bits: bitarray | None = None,
                 *, salt: int | None = None, hashing: KeyHashing | None = None):
        if nbits is None or hashes is None:
            nbits, hashes = bloom_size(capacity, error_rate)
        self.capacity = capacity
        self.error_rate = error_rate
        self.nbits = nbits
        self.hashes = hashes
        if hashing is None:
            hashing = KeyHashing.for_filter(nbits, hashes, capacity, error_rate, salt)
        self.hashing = hashing
        #: the step bound of the key-digest fast path of :meth:`BloomSeenSet.add` (0: not that scheme)
        self.step = hashing.steps[0] if hashing.salt is None else 0
        self.count = count
        if bits is None:
            bits = bitarray(nbits, endian="little")
            bits.setall(0)
        self.bits = bits

    def positions(self, key: bytes) -> list[int]:
        return self.hashing.positions(self.hashing.values(key))

    def strides(self, key: bytes) -> list[slice]:
        """The same positions as :meth:`positions`, as strided slices of the bit array (one or two per group).

        ``bits[a:end:b]`` reads or sets every position in C, without building a
        list of ints first (the cache misses of the reads remain most of a check).
        """
        return self.hashing.strides(self.hashing.values(key))

    def holds(self, key: bytes) -> bool:
        bits = self.bits
        return all(bits[part].all() for part in self.strides(key))

    def put(self, key: bytes) -> None:
        bits = self.bits
        for part in self.strides(key):
            bits[part] = 1

    def header(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "error_rate": self.error_rate, "bits": self.nbits,
                "hashes": self.hashes, "count": self.count, **self.hashing.describe()}

    def expected_false_positive_rate(self) -> float:
        return (false_positive_rate(self.nbits, self.hashes, self.count)
                + structural_excess(self.nbits, self.hashes, self.count, self.hashing.groups))

    def fill_ratio(self) -> float:
        return self.bits.count(1) / self.nbits

    def estimated_false_positive_rate(self) -> float:
        return self.fill_ratio() ** self.hashes


class BloomSeenSet(SeenSet):
    """A Bloom filter sized by ``capacity`` and ``error_rate`` that grows past its capacity.

    ``add(fingerprint)`` checks and inserts in one step; with one slice it is a
    handful of integer operations and two bitarray calls (no hashing).
    """

    def __init__(self, capacity: int = 10_000_000, error_rate: float = 1e-6):
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        if not (isinstance(error_rate, float) or isinstance(error_rate, int)) or not 0 < error_rate < 1:
            raise ValueError(f"error_rate must be a number between 0 and 1, got {error_rate!r}")
        self.capacity = capacity
        self.error_rate = float(error_rate)
        self.slices: list[_Slice] = [self._new_slice(0)]
        self.dirty = False

    # --- sizing ---------------------------------------------------------------------------

    def _new_slice(self, index: int) -> _Slice:
        # slice 0 reads the key's own digest when one progression keeps its rate; every other slice
        # hashes with its own salt, so no two slices place a key alike
        return _Slice(self.capacity * GROWTH ** index,
                      self.error_rate * (1 - TIGHTENING) * TIGHTENING ** index, salt=index or None)

    def _grow(self) -> _Slice:
        new = self._new_slice(len(self.slices))
        self.slices.append(new)
        return new

    # --- the set ------------------------------------------------------------------------

    def add(self, key: bytes) -> bool:
        slices = self.slices
        only = slices[0]
        if len(slices) == 1 and only.step and len(key) in DIGEST_LENGTHS:
            # the common case, inlined: one strided slice of the digest's progression unless it wraps
            h1, h2 = TWO_U64(key)
            m = only.nbits
            a = h1 % m
            b = h2 % only.step + 1
            end = a + only.hashes * b
            if end <= m:
                bits = only.bits
                if bits[a:end:b].all():
                    return False
                if only.count < only.capacity:
                    bits[a:end:b] = 1
                    only.count += 1
                    self.dirty = True
                    return True
            elif only.holds(key):
                return False
            strides = None
        else:
            for piece in slices:
                strides = piece.strides(key)  # the newest slice's are the last: set below, not hashed again
                bits = piece.bits
                if all(bits[part].all() for part in strides):
                    return False
        newest = slices[-1]
        if newest.count >= newest.capacity:
            newest = self._grow()
            strides = None
        if strides is None:
            strides = newest.strides(key)
        bits = newest.bits
        for part in strides:
            bits[part] = 1
        newest.count += 1
        self.dirty = True
        return True

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            return False
        key = bytes(key)
        return any(piece.holds(key) for piece in self.slices)

    def __len__(self) -> int:
        return sum(piece.count for piece in self.slices)

    def clear(self) -> None:
        self.slices = [self._new_slice(0)]
        self.dirty = True

    def size_bytes(self) -> int:
        """Bytes of the bit arrays (the Python objects around them add a few hundred bytes)."""
        return sum(piece.bits.nbytes for piece in self.slices)

    def estimated_false_positive_rate(self) -> float:
        """``1 - prod(1 - fill_i ** k_i)`` from the bits actually set in each slice."""
        return _union(piece.estimated_false_positive_rate() for piece in self.slices)

    def expected_false_positive_rate(self) -> float:
        """The rate the sizing formulas predict for the keys held now (no bit counting)."""
        return _union(piece.expected_false_positive_rate() for piece in self.slices)

    def describe(self) -> str:
        """Its size for a log line: keys held, capacity, slices, memory, and the rate the bits set give."""
        slices = len(self.slices)
        return (f"{len(self):,} keys, sized for {self.capacity:,} at {self.error_rate:g} and grown to "
                f"{sum(piece.capacity for piece in self.slices):,} in {slices} slice{'s' * (slices > 1)}, "
                f"{self.size_bytes() / 2**20:.1f} MiB, estimated false-positive rate "
                f"{self.estimated_false_positive_rate():.2g}")

    def __repr__(self) -> str:
        return (f"BloomSeenSet(capacity={self.capacity}, error_rate={self.error_rate}, "
                f"slices={len(self.slices)}, keys={len(self)})")

    # --- persistence --------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return {
            "format": "scrapy-dedup-bloom",
            "version": FORMAT_VERSION,
            "hashing": HASHING,
            "endian": "little",
            "capacity": self.capacity,
            "error_rate": self.error_rate,
            "growth": GROWTH,
            "tightening": TIGHTENING,
            "slices": [piece.header() for piece in self.slices],
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the filter to ``path`` atomically (:func:`scrapy_dedup._util.files.atomic_write`)."""
        header = json.dumps(self.header(), sort_keys=True).encode()

        def write(out: Any) -> None:
            crc = 0
            for part in (MAGIC, _HEADER_LEN.pack(len(header)), header):
                out.write(part)
                crc = zlib.crc32(part, crc)
            for piece in self.slices:
                view = memoryview(piece.bits)
                for start in range(0, len(view), _CHUNK):
                    chunk = view[start:start + _CHUNK]
                    out.write(chunk)
                    crc = zlib.crc32(chunk, crc)
            out.write(_CRC.pack(crc))

        atomic_write(path, write)
        self.dirty = False

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BloomSeenSet":
        """Read a filter written by :meth:`save`; :class:`CheckpointError` if it cannot be trusted."""
        path = Path(path)
        try:
            with open(path, "rb") as src:
                return cls._read(src, path)
        except CheckpointError:
            raise
        except OSError as exc:
            raise CheckpointError(path, f"cannot be read ({exc.strerror or exc})") from exc

    @classmethod
    def _read(cls, src: BinaryIO, path: Path) -> "BloomSeenSet":
        size = os.fstat(src.fileno()).st_size
        magic = src.read(len(MAGIC))
        if magic != MAGIC:
            raise CheckpointError(path, "not a scrapy-dedup Bloom checkpoint (bad magic line)")
        raw_len = src.read(_HEADER_LEN.size)
        if len(raw_len) < _HEADER_LEN.size:
            raise CheckpointError(path, "truncated in its header")
        (header_len,) = _HEADER_LEN.unpack(raw_len)
        if header_len > min(size, 1 << 24):
            raise CheckpointError(path, "corrupt header length")
        raw_header = src.read(header_len)
        if len(raw_header) < header_len:
            raise CheckpointError(path, "truncated in its header")
        crc = zlib.crc32(raw_header, zlib.crc32(raw_len, zlib.crc32(magic)))
        try:
            header = json.loads(raw_header)
            version = header.get("version")
            scheme = {1: LEGACY_HASHING, FORMAT_VERSION: HASHING}.get(version)
            if scheme is None:
                raise CheckpointError(
                    path, f"format version {version!r}, this scrapy-dedup reads 1 and {FORMAT_VERSION}")
            if header.get("hashing") != scheme or header.get("endian") != "little":
                raise CheckpointError(path, f"hashing scheme {header.get('hashing')!r}, expected {scheme!r}")
            specs = [(int(s["capacity"]), float(s["error_rate"]), int(s["bits"]), int(s["hashes"]),
                      int(s["count"])) for s in header["slices"]]
            # version 1: one progression from the key's digest in every slice (no salt)
            layouts = [(int(s.get("groups", 1)), None if s.get("salt") is None else int(s["salt"]))
                       if version == FORMAT_VERSION else (1, None) for s in header["slices"]]
            capacity, error_rate = int(header["capacity"]), float(header["error_rate"])
        except CheckpointError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CheckpointError(path, f"corrupt header ({exc.__class__.__name__})") from None
        expected = (len(MAGIC) + _HEADER_LEN.size + header_len
                    + sum((nbits + 7) // 8 for _, _, nbits, _, _ in specs) + _CRC.size)
        if size != expected:
            what = "truncated" if size < expected else "has trailing bytes"
            raise CheckpointError(path, f"{what}: {size} bytes, expected {expected}")
        if not specs or any(nbits < 1 or hashes < 1 for _, _, nbits, hashes, _ in specs):
            raise CheckpointError(path, "corrupt header (no slices)")
        slices = []
        for (capacity_i, rate_i, nbits, hashes, count), (groups, salt) in zip(specs, layouts):
            bits = bitarray(endian="little")
            nbytes = (nbits + 7) // 8
            while nbytes:
                chunk = src.read(min(nbytes, _CHUNK))
                if not chunk:
                    raise CheckpointError(path, "truncated in its bit arrays")
                bits.frombytes(chunk)
                crc = zlib.crc32(chunk, crc)
                nbytes -= len(chunk)
            del bits[nbits:]
            try:
                hashing = KeyHashing(nbits, hashes, groups, salt)
            except ValueError as exc:
                raise CheckpointError(path, f"corrupt header ({exc})") from None
            slices.append(_Slice(capacity_i, rate_i, nbits, hashes, count, bits, hashing=hashing))
        (stored_crc,) = _CRC.unpack(src.read(_CRC.size))
        if stored_crc != crc:
            raise CheckpointError(path, "checksum mismatch (corrupted on disk)")
        bloom = cls.__new__(cls)
        bloom.capacity = capacity
        bloom.error_rate = error_rate
        bloom.slices = slices
        bloom.dirty = False
        if version != FORMAT_VERSION:
            logger.warning(
                "Bloom checkpoint %s was written by an older scrapy-dedup (hashing %s, whose false-positive "
                "rate exceeds the error rate on small filters): its %d slice(s) are read with the hashing they "
                "were written with, new slices use %s; it is saved in format %d from now on",
                path, LEGACY_HASHING, len(slices), HASHING, FORMAT_VERSION)
        return bloom


def _union(rates: Iterable[float]) -> float:
    """``1 - prod(1 - r)`` without losing tiny rates to rounding (0.0, not the -0.0 of ``-expm1(0)``)."""
    return 0.0 - math.expm1(sum(math.log1p(-r) for r in rates))
