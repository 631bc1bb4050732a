"""In-memory index of simhash fingerprints: every stored fingerprint within ``threshold`` bits, fast.

Banding (Manku, Jain, Das Sarma, WWW 2007): the fingerprint is cut into ``bands``
blocks; two fingerprints within ``threshold`` bits agree exactly on at least
``bands - threshold`` blocks (pigeonhole), so one hash table per choice of that many
blocks, and an exact popcount of each candidate, miss none of them when ``bands >=
threshold + 1``. Fewer bands break the guarantee and are refused unless
``allow_approximate=True`` (then each block is a table on its own); more than
``MAX_TABLES`` tables are refused. docs/content-duplicates.md ("Recall guarantee") has the trade-off
of bands against tables, key width and candidates per query, with figures.

Layout (compact, no Python object per page): fingerprints in an ``array`` buffer (a
second one for 128-bit fingerprints); keys are the insertion positions 0, 1, 2, ...
(the content store's page ids) and cost nothing until the first key that is not its
position turns on an explicit ``int64`` key column; each table is a chained hash table
in two ``int32`` arrays, ``head`` (bucket -> newest entry) and ``next`` (entry -> older
entry in the same bucket). Entries are never removed.

``add_if_new`` runs its check and insert under one lock, so concurrent callers
cannot both insert two near duplicates. Persistence (:meth:`save`/:meth:`load`)
writes a versioned, checksummed file atomically (temp file, fsync, rename);
the tables are rebuilt on load with numpy in one pass. ``add_many`` links only the new
entries into the tables (vectorized), rebuilding only when the head tables grow.
``query_radius(fp, radius)`` returns the probed entries up to a wider radius: the
candidates of the verification stage (:mod:`scrapy_dedup.content.sketch`).
"""
from __future__ import annotations

import hashlib
import itertools
import operator
import os
import struct
import threading
from array import array
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from scrapy_dedup._util.files import atomic_write
from scrapy_dedup._util.mix import fmix64, fmix64_array
from scrapy_dedup.content.simhash import SUPPORTED_BITS

if TYPE_CHECKING:  # typeshed's "has .read(n)" / ".write(b)" protocols: the files may be CRC-keeping wrappers
    from _typeshed import SupportsRead, SupportsWrite

__all__ = ["SimhashIndex", "MAX_TABLES", "IndexFileError"]

MAX_TABLES = 256
_M64 = (1 << 64) - 1
_MULT = 0x9E3779B97F4A7C15
_MIN_HEAD_BITS = 10
_MAX_LOAD = 4  # entries per bucket (per table) before the head tables grow
_MAGIC = b"SDSIMIX\x00"
_VERSION = 2  # 2: no key column when keys are the positions (flag); version 1 files still load
_HEADER = struct.Struct("<8sHHHHHHQ")  # magic, version, bits, threshold, bands, flags, reserved, count
_FLAG_APPROXIMATE = 1
_FLAG_POSITION_KEYS = 2  # keys are 0..count-1: the file has no key column
_I32_MAX = 2**31 - 1


_popcount = getattr(int, "bit_count", None) or (lambda x: bin(x).count("1"))  # int.bit_count: Python 3.10+


class IndexFileError(ValueError):
    """A saved index file is missing pieces, corrupt, or of another version."""


class _Table:
    """One chained hash table keyed by a fixed subset of the fingerprint's blocks.

    Bucket of a fingerprint: when the chosen blocks fit in the head table, their
    bits concatenated (a perfect hash); otherwise the blocks' values combined
    (``h = h * MULT + block``, mod 2**64) and mixed by ``fmix64``, top bits kept.
    """

    __slots__ = ("segments", "mask_lo", "mask_hi", "key_bits", "head_bits", "shift", "direct", "head", "next")

    def __init__(self, segments: list[tuple[int, int]]):
        self.segments = [(start, (1 << width) - 1, offset) for start, width, offset in _offsets(segments)]
        mask = sum(((1 << width) - 1) << start for start, width in segments)
        self.mask_lo = mask & _M64
        self.mask_hi = mask >> 64
        self.key_bits = sum(width for _, width in segments)
        self.head_bits = 0
        self.shift = 64
        self.direct = True
        self.head = array("i")
        self.next = array("i")

    def bucket(self, fp: int) -> int:
        if self.direct:
            key = 0
            for start, mask, offset in self.segments:
                key |= ((fp >> start) & mask) << offset
            return key
        h = 0
        for start, mask, _ in self.segments:
            value = (fp >> start) & mask
            if value > _M64:  # a block wider than 64 bits (1 band of 128): fold it
                value = (value & _M64) ^ (value >> 64)
            h = (h * _MULT + value) & _M64
        return fmix64(h) >> self.shift

    def _np_buckets(self, lo: np.ndarray, hi: np.ndarray | None) -> np.ndarray:
        """The same as :meth:`bucket`, for all entries at once."""
        values = []
        for start, mask, offset in self.segments:
            width = mask.bit_length()
            if width > 64:  # the whole 128-bit fingerprint as one block, folded
                value = lo ^ hi
            elif start >= 64:
                assert hi is not None  # a segment past bit 64 exists only in a 128-bit index, which has hi
                value = (hi >> np.uint64(start - 64)) & np.uint64(mask)
            elif start + width <= 64:
                value = (lo >> np.uint64(start)) & np.uint64(mask)
            else:  # straddles the 64-bit boundary
                assert hi is not None
                value = ((lo >> np.uint64(start)) | (hi << np.uint64(64 - start))) & np.uint64(mask)
            values.append((value, offset))
        if self.direct:
            key = np.zeros(len(lo), dtype=np.uint64)
            for value, offset in values:
                key |= value << np.uint64(offset)
            return key
        h = np.zeros(len(lo), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for value, _ in values:
                h = h * np.uint64(_MULT) + value
            return fmix64_array(h) >> np.uint64(self.shift)

    def rebuild(self, head_bits: int, lo: np.ndarray, hi: np.ndarray | None) -> None:
        """Rebuild head/next for all entries, chains newest -> oldest, vectorized."""
        self.head_bits = min(head_bits, self.key_bits)
        self.direct = self.key_bits <= self.head_bits
        self.shift = 64 - self.head_bits
        buckets = self._np_buckets(lo, hi)
        head = np.full(1 << self.head_bits, -1, dtype=np.int32)
        nxt = np.full(len(lo), -1, dtype=np.int32)
        if len(lo):
            order = np.argsort(buckets, kind="stable").astype(np.int32)
            sorted_buckets = buckets[order]
            same = sorted_buckets[1:] == sorted_buckets[:-1]
            nxt[order[1:][same]] = order[:-1][same]
            last = np.ones(len(order), dtype=bool)
            last[:-1] = ~same
            head[sorted_buckets[last].astype(np.int64)] = order[last]
        self.head = array("i", head.tobytes())
        self.next = array("i", nxt.tobytes())

    def link(self, start: int, lo: np.ndarray, hi: np.ndarray | None) -> None:
        """Chain entries ``start, start + 1, ...`` (fingerprints ``lo``/``hi``) in, newest first."""
        buckets = self._np_buckets(lo, hi).astype(np.int64)
        head = np.frombuffer(self.head, dtype=np.int32).copy()
        nxt = np.full(len(lo), -1, dtype=np.int32)
        order = np.argsort(buckets, kind="stable")
        sorted_buckets = buckets[order]
        entries = (order + start).astype(np.int32)
        same = np.zeros(len(order), dtype=bool)
        same[1:] = sorted_buckets[1:] == sorted_buckets[:-1]
        # the oldest new entry of a bucket points at the bucket's old head, the others at the previous new one
        nxt[order[same]] = entries[np.nonzero(same)[0] - 1]
        first = ~same
        nxt[order[first]] = head[sorted_buckets[first]]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = ~same[1:]
        head[sorted_buckets[last]] = entries[last]
        self.head = array("i", head.tobytes())
        self.next.frombytes(nxt.tobytes())


def _offsets(segments: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    out, offset = [], 0
    for start, width in segments:
        out.append((start, width, offset))
        offset += width
    return out


class SimhashIndex:
    """Banded (permuted-table) index of ``bits``-bit fingerprints with integer keys.

    ``add(key, fp)`` stores, ``query(fp)`` returns every stored ``(key, distance)``
    with distance ``<= threshold`` (closest first), ``add_if_new(key, fp)`` returns
    the closest match or stores the fingerprint and returns None, atomically.
    Keys are signed 64-bit integers (page ids; keep URLs elsewhere), free while they
    are the insertion positions (see the module doc).
    """

    def __init__(self, threshold: int = 3, bands: int = 4, bits: int = 64, allow_approximate: bool = False):
        if bits not in SUPPORTED_BITS:
            raise ValueError(f"bits must be 64 or 128, got {bits!r}")
        if not isinstance(threshold, int) or not 0 <= threshold < bits:
            raise ValueError(f"threshold must be an integer in [0, {bits}), got {threshold!r}")
        if not isinstance(bands, int) or not 1 <= bands <= bits:
            raise ValueError(f"bands must be an integer in [1, {bits}], got {bands!r}")
        if bands <= threshold and not allow_approximate:
            raise ValueError(
                f"bands ({bands}) must be greater than threshold ({threshold}): with fewer bands two "
                f"fingerprints {threshold} bits apart may share no band and be missed. Use "
                f"bands >= {threshold + 1}, or allow_approximate=True to accept probabilistic recall."
            )
        self.threshold = threshold
        self.bands = bands
        self.bits = bits
        self.allow_approximate = bool(allow_approximate)
        self.exact_recall = bands > threshold
        blocks = _blocks(bits, bands)
        per_table = bands - threshold if self.exact_recall else 1
        combos = list(itertools.islice(itertools.combinations(range(bands), per_table), MAX_TABLES + 1))
        if len(combos) > MAX_TABLES:
            raise ValueError(
                f"threshold {threshold} with {bands} bands needs more than {MAX_TABLES} tables "
                f"(C({bands}, {per_table})); use fewer bands (at least {threshold + 1})"
            )
        self._tables = [_Table([blocks[i] for i in combo]) for combo in combos]
        self._keys: array | None = None  # None: the key of entry i is i
        self._lo = array("Q")
        self._hi = array("Q") if bits == 128 else None
        self._head_bits = _MIN_HEAD_BITS
        self._lock = threading.RLock()
        self._rebuild()

    # -- public API -------------------------------------------------------

    @property
    def tables(self) -> int:
        """Number of hash tables (memory: 4 bytes per page each)."""
        return len(self._tables)

    def __len__(self) -> int:
        return len(self._lo)

    @property
    def positional_keys(self) -> bool:
        """True while every key equals its insertion position (no key column is held)."""
        return self._keys is None

    def __repr__(self) -> str:
        return (
            f"SimhashIndex(threshold={self.threshold}, bands={self.bands}, bits={self.bits}, "
            f"allow_approximate={self.allow_approximate}; {len(self)} fingerprints, {self.tables} tables)"
        )

    def add(self, key: int, fp: int) -> None:
        """Store ``fp`` under ``key`` without checking for near duplicates."""
        key, fp = self._split(key, fp)
        with self._lock:
            self._insert(key, fp)

    def query(self, fp: int) -> list[tuple[int, int]]:
        """Every stored ``(key, distance)`` within ``threshold`` bits of ``fp``, closest (then oldest) first."""
        _, fp = self._split(0, fp)
        with self._lock:
            found = self._candidates(fp)
        found.sort()
        keys = self._keys
        if keys is None:
            return [(i, d) for d, i in found]
        return [(keys[i], d) for d, i in found]

    def add_if_new(self, key: int, fp: int) -> tuple[int, int] | None:
        """The closest stored ``(key, distance)`` within the threshold, or None after storing ``fp``.

        Check and insert happen under one lock: of two concurrent near-duplicate
        callers exactly one is stored, the other gets it as its match.
        """
        key, fp = self._split(key, fp)
        with self._lock:
            found = self._candidates(fp)
            if found:
                distance, i = min(found)
                return (i if self._keys is None else self._keys[i]), distance
            self._insert(key, fp)
            return None

    def add_many(self, keys: Iterable[int], fps: Iterable[int]) -> None:
        """Bulk insert (no duplicate check): only the new entries are linked into the tables.

        Vectorized per call (numpy); the tables are rebuilt from scratch only when the
        head tables grow (4x each time), so loading in chunks costs the same as one call.
        """
        keys = list(keys)
        fps = list(fps)
        if len(keys) != len(fps):
            raise ValueError("add_many: keys and fps differ in length")
        split = [self._split(k, f) for k, f in zip(keys, fps)]
        if not split:
            return
        with self._lock:
            start = len(self._lo)
            self._extend_keys(start, [k for k, _ in split])
            self._lo.extend(fp & _M64 for _, fp in split)
            if self._hi is not None:
                self._hi.extend(fp >> 64 for _, fp in split)
            self._check_capacity()
            if self._target_head_bits(len(self._lo)) != self._head_bits:
                self._rebuild()
                return
            lo, hi = self._arrays()
            lo, hi = lo[start:].copy(), (hi[start:].copy() if hi is not None else None)
            for table in self._tables:
                table.link(start, lo, hi)

    def query_radius(self, fp: int, radius: int) -> list[tuple[int, int]]:
        """Every ``(key, distance)`` with distance ``<= radius`` among the entries sharing a table key with ``fp``.

        Complete up to ``threshold`` (the index's guarantee); beyond it, only the
        entries that happen to share a table key are seen (the verification stage's
        candidates, see :mod:`scrapy_dedup.content.sketch`). Closest, then oldest, first.
        """
        _, fp = self._split(0, fp)
        with self._lock:
            found = self._candidates(fp, radius)
        found.sort()
        keys = self._keys
        if keys is None:
            return [(i, d) for d, i in found]
        return [(keys[i], d) for d, i in found]

    def bucket_mates(self, a: int, b: int) -> bool:
        """Whether a query for ``b`` walks a chain that ``a``, stored now, would be in: one of the tables puts
        both in one bucket at its present size (their blocks alike, or their hashes' top bits by chance). An
        index holding ``a`` alone has the tables of an empty one: a two-page check, without building one."""
        _, a = self._split(0, a)
        _, b = self._split(0, b)
        with self._lock:
            return any(table.bucket(a) == table.bucket(b) for table in self._tables)

    def fingerprint_at(self, position: int) -> int:
        """The fingerprint of the ``position``-th stored entry (insertion order)."""
        with self._lock:
            return self._lo[position] | (self._hi[position] << 64 if self._hi is not None else 0)

    def items(self) -> Iterator[tuple[int, int]]:
        """``(key, fingerprint)`` of every stored entry, in insertion order."""
        with self._lock:
            lo, hi = list(self._lo), list(self._hi) if self._hi is not None else None
            keys = list(self._keys) if self._keys is not None else range(len(lo))
        for i, key in enumerate(keys):
            yield key, lo[i] | (hi[i] << 64 if hi is not None else 0)

    def largest_bucket(self) -> int:
        """Most entries sharing one exact table key (the template canary: boilerplate fingerprinted)."""
        with self._lock:
            lo, hi = self._arrays()
            best = 0
            for table in self._tables:
                if not len(lo):
                    break
                key_lo = lo & np.uint64(table.mask_lo)
                if hi is not None and table.mask_hi:
                    pairs = np.stack([key_lo, hi & np.uint64(table.mask_hi)], axis=1)
                    _, counts = np.unique(pairs, axis=0, return_counts=True)
                else:
                    _, counts = np.unique(key_lo, return_counts=True)
                best = max(best, int(counts.max()))
            return best

    @property
    def nbytes(self) -> int:
        """Bytes held by the index's arrays (fingerprints, keys if not positional, tables)."""
        with self._lock:
            total = sum(a.itemsize * len(a) for a in (self._keys, self._lo, self._hi) if a is not None)
            for table in self._tables:
                total += table.head.itemsize * len(table.head) + table.next.itemsize * len(table.next)
            return total

    # -- persistence ------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the index to ``path`` atomically (temp file in the same directory, fsync, rename)."""
        atomic_write(path, self.write_to)

    @classmethod
    def load(cls, path: str | os.PathLike) -> SimhashIndex:
        """Read an index written by :meth:`save` (raises :class:`IndexFileError` if it is damaged)."""
        with open(path, "rb") as f:
            return cls.read_from(f)

    def write_to(self, f: SupportsWrite[bytes]) -> None:
        """Serialize into an open binary file (header, keys unless positional, fingerprints, checksum)."""
        with self._lock:
            flags = _FLAG_APPROXIMATE if self.allow_approximate else 0
            if self._keys is None:
                flags |= _FLAG_POSITION_KEYS
            header = _HEADER.pack(_MAGIC, _VERSION, self.bits, self.threshold, self.bands, flags, 0, len(self))
            digest = hashlib.blake2b(header, digest_size=16)
            f.write(header)
            for arr in (self._keys, self._lo, self._hi):
                if arr is None:
                    continue
                data = np.frombuffer(arr, dtype=np.int64 if arr.typecode == "q" else np.uint64)
                payload = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
                del data  # release the buffer export before the array may grow again
                digest.update(payload)
                f.write(payload)
            f.write(digest.digest())

    @classmethod
    def read_from(cls, f: SupportsRead[bytes]) -> SimhashIndex:
        """Deserialize from an open binary file positioned at an index written by :meth:`write_to`."""
        header = read_exactly(f, _HEADER.size)
        magic, version, bits, threshold, bands, flags, _, count = _HEADER.unpack(header)
        if magic != _MAGIC:
            raise IndexFileError("not a scrapy-dedup simhash index file")
        if version not in (1, _VERSION):
            raise IndexFileError(f"simhash index file version {version} is not supported (expected {_VERSION})")
        positional = version >= 2 and bool(flags & _FLAG_POSITION_KEYS)
        try:
            index = cls(threshold, bands, bits, allow_approximate=bool(flags & _FLAG_APPROXIMATE))
        except ValueError as exc:
            raise IndexFileError(f"simhash index file has invalid parameters: {exc}") from None
        digest = hashlib.blake2b(header, digest_size=16)
        parts = []
        for dtype in (() if positional else ("<i8",)) + ("<u8",) + (("<u8",) if bits == 128 else ()):
            payload = read_exactly(f, 8 * count)
            digest.update(payload)
            parts.append(np.frombuffer(payload, dtype=dtype))
        if read_exactly(f, 16) != digest.digest():
            raise IndexFileError("simhash index file is corrupt (checksum mismatch)")
        if not positional:
            keys = parts.pop(0).astype(np.int64)
            if not np.array_equal(keys, np.arange(count, dtype=np.int64)):  # a version-1 file may have them
                index._keys = array("q", keys.tobytes())
        index._lo = array("Q", parts[0].astype(np.uint64).tobytes())
        if bits == 128:
            index._hi = array("Q", parts[1].astype(np.uint64).tobytes())
        index._check_capacity()
        index._rebuild()
        return index

    # -- internals --------------------------------------------------------

    def _split(self, key: int, fp: int) -> tuple[int, int]:
        key = operator.index(key)
        fp = operator.index(fp)
        if not -(1 << 63) <= key < (1 << 63):
            raise ValueError(f"key must fit in a signed 64-bit integer, got {key}")
        if fp < 0 or fp >> self.bits:
            raise ValueError(f"fingerprint must be a non-negative {self.bits}-bit integer, got {fp}")
        return key, fp

    def _arrays(self) -> tuple[np.ndarray, np.ndarray | None]:
        lo = np.frombuffer(self._lo, dtype=np.uint64) if len(self._lo) else np.zeros(0, np.uint64)
        hi = None
        if self._hi is not None:
            hi = np.frombuffer(self._hi, dtype=np.uint64) if len(self._hi) else np.zeros(0, np.uint64)
        return lo, hi

    def _extend_keys(self, start: int, keys: list[int]) -> None:
        """Record the keys of entries ``start, start + 1, ...``: nothing while they are the positions."""
        if self._keys is None:
            if keys == list(range(start, start + len(keys))):
                return
            self._keys = array("q", np.arange(start, dtype=np.int64).tobytes())  # the positions so far
        self._keys.extend(keys)

    def _check_capacity(self) -> None:
        if len(self._lo) > _I32_MAX:
            raise OverflowError("SimhashIndex holds at most 2**31 - 1 fingerprints")

    def _target_head_bits(self, n: int) -> int:
        """Head tables grow 4x when the average chain passes _MAX_LOAD (amortized O(1) insert)."""
        bits = _MIN_HEAD_BITS
        while (1 << bits) * _MAX_LOAD < n and bits < 30:
            bits += 2
        return bits

    def _rebuild(self) -> None:
        self._head_bits = self._target_head_bits(len(self._lo))
        self._growable = self._head_bits < 30 and any(t.key_bits > self._head_bits for t in self._tables)
        # numpy views on the array buffers must be released before the arrays grow again
        lo, hi = self._arrays()
        lo, hi = lo.copy(), (hi.copy() if hi is not None else None)
        for table in self._tables:
            table.rebuild(self._head_bits, lo, hi)

    def _insert(self, key: int, fp: int) -> None:
        i = len(self._lo)
        if i >= _I32_MAX:
            raise OverflowError("SimhashIndex holds at most 2**31 - 1 fingerprints")
        if self._keys is not None:
            self._keys.append(key)
        elif key != i:
            self._extend_keys(i, [key])
        self._lo.append(fp & _M64)
        if self._hi is not None:
            self._hi.append(fp >> 64)
        for table in self._tables:
            b = table.bucket(fp)
            table.next.append(table.head[b])
            table.head[b] = i
        if self._growable and (1 << self._head_bits) * _MAX_LOAD < i + 1:
            self._rebuild()

    def _candidates(self, fp: int, radius: int | None = None) -> list[tuple[int, int]]:
        """``(distance, entry)`` of every probed entry within ``radius`` (default: the threshold)."""
        threshold = self.threshold if radius is None else radius
        popcount = _popcount
        lo, hi = fp & _M64, fp >> 64
        fps_lo = self._lo
        fps_hi = self._hi
        found: dict[int, int] = {}  # an entry can sit in several tables' chains: keep it once
        for table in self._tables:
            nxt = table.next
            i = table.head[table.bucket(fp)]
            if fps_hi is None:
                while i >= 0:
                    if popcount(lo ^ fps_lo[i]) <= threshold:
                        found[i] = popcount(lo ^ fps_lo[i])
                    i = nxt[i]
            else:
                while i >= 0:
                    d = popcount(lo ^ fps_lo[i]) + popcount(hi ^ fps_hi[i])
                    if d <= threshold:
                        found[i] = d
                    i = nxt[i]
        return [(d, i) for i, d in found.items()]


def _blocks(bits: int, bands: int) -> list[tuple[int, int]]:
    """(start, width) of each block, low bits first; the first ``bits % bands`` blocks are one bit wider."""
    base, extra = divmod(bits, bands)
    blocks, start = [], 0
    for b in range(bands):
        width = base + (1 if b < extra else 0)
        blocks.append((start, width))
        start += width
    return blocks


def read_exactly(f: SupportsRead[bytes], size: int) -> bytes:
    data = f.read(size)
    if len(data) != size:
        raise IndexFileError("simhash index file is truncated")
    return data
